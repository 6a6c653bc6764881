"""A card's history (docs/card.md): what each accepted write changed, newest first.

The write scripts (store/scripts.py) append one entry per accepted write — a clear and a reset
included — to a capped list in the owner's slot; this reads them back. Pure data: nothing
here touches Redis.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from .card import Status

MAX_LIMIT = 200
"""The most entries one read returns (all that are kept)."""
DEFAULT_LIMIT = 50


@dataclass(frozen=True)
class StepChange:
    step: str
    before: Status | None
    """None: the step was added."""
    after: Status | None
    """None: the step was removed."""

    def to_json(self) -> dict[str, Any]:
        return {
            "step": self.step,
            "from": self.before.value if self.before else None,
            "to": self.after.value if self.after else None,
        }


@dataclass(frozen=True)
class HistoryEntry:
    revision: int
    at_ms: int
    """When the write was accepted, on the store's clock (ms since the epoch)."""
    changes: tuple[StepChange, ...]
    note: str
    """`changed`, `same` or `removed`: what happened to the Markdown note."""
    cleared: bool
    reset: bool
    event: dict[str, Any] | None = None
    """An ask, an answer, an expiry, a withdrawal or a Stop (`kind`, `askId`, `prompt`,
    `by`, `options`, `text`): a line that is not a write; the revision is the card's then."""

    @property
    def at(self) -> str:
        """`at_ms` as ISO 8601 (UTC, milliseconds)."""
        when = datetime.fromtimestamp(self.at_ms / 1000, UTC)
        return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    @classmethod
    def from_stored(cls, raw: str) -> HistoryEntry | None:
        """An entry as the scripts store it; None for anything unreadable."""
        try:
            data = json.loads(raw)
            changes = tuple(
                StepChange(
                    step=str(c["step"]),
                    before=Status(c["from"]) if c.get("from") else None,
                    after=Status(c["to"]) if c.get("to") else None,
                )
                for c in data["changes"]
            )
            return cls(
                revision=int(data["revision"]),
                at_ms=int(data["at"]),
                changes=changes,
                note=str(data["note"]),
                cleared=bool(data["cleared"]),
                reset=bool(data["reset"]),
                event=data["event"] if isinstance(data.get("event"), dict) else None,
            )
        except (ValueError, KeyError, TypeError):
            return None

    def to_json(self) -> dict[str, Any]:
        out = {
            "revision": self.revision,
            "at": self.at,
            "changes": [c.to_json() for c in self.changes],
            "note": self.note,
            "cleared": self.cleared,
            "reset": self.reset,
        }
        if self.event is not None:
            out["event"] = _event_json(self.event)
        return out


def _event_json(event: dict[str, Any]) -> dict[str, Any]:
    """An event line as the API shows it: Lua's empty tables are `{}`, meant as `[]`."""
    out = dict(event)
    if "options" in out and not isinstance(out["options"], list):
        out["options"] = []
    return out


def active_since(entries: list[HistoryEntry], step: str) -> HistoryEntry | None:
    """The entry (of `entries`, newest first) in which `step` last became in progress;
    None when the kept history does not reach back to it."""
    for entry in entries:
        if entry.event is not None:
            continue
        if entry.cleared:
            return None
        for change in entry.changes:
            if change.step == step and change.after is Status.in_progress:
                return entry
    return None
