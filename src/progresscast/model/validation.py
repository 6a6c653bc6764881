"""The one translation of a pydantic validation error into the field it concerns and the
rule it broke, as every input path reports bad input (`plan[0].step: must be a string`):
the card, activity, the config file and the command line."""

from __future__ import annotations

import re
from collections.abc import Sequence

from pydantic import ValidationError

_EXPECTED = {"string_type": "a string", "list_type": "an array", "int_type": "an integer", "bool_type": "a boolean"}


def field_path(loc: Sequence[int | str]) -> str:
    """`("plan", 0, "step")` → `plan[0].step`."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def field_and_rule(exc: ValidationError, default_field: str = "") -> tuple[str, str]:
    """The first error's field (a path) and rule, in the words the project uses."""
    err = exc.errors(include_url=False)[0]
    field = field_path(err["loc"]) or default_field
    kind = err["type"]
    if kind == "extra_forbidden":
        return field, "is not a known field"
    if kind in _EXPECTED:
        return field, f"must be {_EXPECTED[kind]}"
    if kind in ("model_type", "dict_type"):
        return field, "must be an object"
    if kind == "missing":
        return field, "is required"
    rule = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
    item = _ITEM.match(rule)  # a list's validator names its item first: `[2] must not be empty`
    if item is not None:
        return f"{field}[{item[1]}]", item[2]
    return field, rule


_ITEM = re.compile(r"\[(\d+)\] (.+)", re.S)


__all__ = ["field_and_rule", "field_path"]
