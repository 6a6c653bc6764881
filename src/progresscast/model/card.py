"""The progress card and its rules (docs/card.md): cleaning, limits, receipts.

`CardInput` is what a write carries; `Card` is what the store keeps. Both are
pure data: nothing here touches Redis.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .validation import field_and_rule

MAX_STEPS = 50
MAX_STEP_BYTES = 512
MAX_NOTE_CHARS = 280
MAX_MARKDOWN_BYTES = 8192

# Removed before anything is stored (docs/card.md lists them): every Unicode
# Bidi_Control character, and the invisible fillers and selectors. U+FE0F (emoji
# presentation) stays.
REMOVED_CHARACTERS = (
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"  # Bidi_Control
    "\u00ad\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200d\u2060-\u2065"
    "\u206a-\u206f\u3164\ufe00-\ufe0e\ufeff\uffa0\U0001d173-\U0001d17a\U000e0000-\U000e0fff"
)
_REMOVED = re.compile(f"[{REMOVED_CHARACTERS}]")
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
# C0/C1 controls (tab and newline included) and line/paragraph separators: kept in what
# is stored, shown as a space wherever a line is rendered. A step made only of them has
# nothing to show, so it counts as empty.
SHOWN_AS_SPACE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def shows_nothing(text: str) -> bool:
    """Whether `text` renders as no visible character (only whitespace and controls)."""
    return not SHOWN_AS_SPACE.sub(" ", text).strip()
SURROGATE_RULE = "must be valid Unicode text (no lone surrogates)"


class Status(StrEnum):
    pending = "pending"
    in_progress = "in_progress"
    completed = "completed"
    blocked = "blocked"
    skipped = "skipped"


DONE_STATUSES = frozenset({Status.completed, Status.skipped})
STATUS_NAMES = ", ".join(s.value for s in Status)
_STATUS_VALUES = frozenset(s.value for s in Status)
"""(`Status.__members__` builds a new mapping on every access: this is read per step.)"""


class CardError(ValueError):
    """A write that breaks a rule. `field` names where, `rule` says what."""

    def __init__(self, field: str, rule: str) -> None:
        super().__init__(f"{field}: {rule}" if field else rule)
        self.field = field
        self.rule = rule


def clean_text(text: str) -> str:
    return _REMOVED.sub("", text)


def has_lone_surrogate(text: str) -> bool:
    # JSON's "\ud800" and argv's undecodable bytes both arrive as lone surrogates, which
    # no encoder (Redis, a log line, a response) accepts.
    return not text.isascii() and _LONE_SURROGATE.search(text) is not None


def escape_lone_surrogates(text: str) -> str:
    """`text` fit to repeat in an answer: each lone surrogate as its escape (`\\ud800`),
    so the answer can be encoded and the reader sees what was wrong."""
    if not has_lone_surrogate(text):
        return text
    return _LONE_SURROGATE.sub(lambda m: m.group().encode("ascii", "backslashreplace").decode(), text)


def replace_lone_surrogates(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD, for text that is cut to fit, not refused."""
    return _LONE_SURROGATE.sub("\ufffd", text) if has_lone_surrogate(text) else text


def _field_name(key: str) -> str:
    return escape_lone_surrogates(key)


def reject_lone_surrogates(data: Any, field: str = "") -> None:
    """Raise CardError naming the first string (value or object key) in JSON-shaped `data`
    holding a lone surrogate. Every input is checked with this once, where it comes in."""
    if isinstance(data, str):
        if has_lone_surrogate(data):
            raise CardError(field or "input", SURROGATE_RULE)
    elif isinstance(data, dict):
        for key, value in data.items():
            name = f"{field}.{_field_name(str(key))}" if field else _field_name(str(key))
            if isinstance(key, str) and has_lone_surrogate(key):
                raise CardError(name, SURROGATE_RULE)
            reject_lone_surrogates(value, name)
    elif isinstance(data, list):
        for i, value in enumerate(data):
            reject_lone_surrogates(value, f"{field}[{i}]")


def _cleaned(value: str) -> str:
    # Inputs are checked where they come in; this keeps the rule's words for a card
    # built in code (no "codec can't encode" from the byte limits below).
    if has_lone_surrogate(value):
        raise ValueError(SURROGATE_RULE)
    return clean_text(value)


def _within_bytes(value: str, limit: int) -> str:
    if len(value.encode()) > limit:
        raise ValueError(f"must be at most {limit} UTF-8 bytes")
    return value


def cut(text: str, limit: int) -> str:
    """Cut to at most `limit` characters, ending with `…` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class Step(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    step: str
    status: Status
    note: str | None = None

    @field_validator("status", mode="before")
    @classmethod
    def _status(cls, value: Any) -> Status:
        if not isinstance(value, str) or value not in _STATUS_VALUES:
            raise ValueError(f"must be one of {STATUS_NAMES}")
        return Status(value)

    @field_validator("step")
    @classmethod
    def _step(cls, value: str) -> str:
        value = _cleaned(value).strip()
        if shows_nothing(value):
            raise ValueError("must not be empty")
        return _within_bytes(value, MAX_STEP_BYTES)

    @field_validator("note")
    @classmethod
    def _note(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return cut(_cleaned(value).strip(), MAX_NOTE_CHARS) or None

    @property
    def done(self) -> bool:
        return self.status in DONE_STATUSES

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"step": self.step, "status": self.status.value}
        if self.note:
            out["note"] = self.note
        return out


class CardInput(BaseModel):
    """One write: the whole card. Every write replaces what was there."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    plan: list[Step] | None = None
    markdown: str | None = None

    @field_validator("plan")
    @classmethod
    def _plan(cls, plan: list[Step] | None) -> list[Step] | None:
        if plan is None:
            return None
        if len(plan) > MAX_STEPS:
            raise ValueError(f"must have at most {MAX_STEPS} steps")
        if sum(s.status is Status.in_progress for s in plan) > 1:
            raise ValueError("at most one step may be in_progress")
        return plan or None

    @field_validator("markdown")
    @classmethod
    def _markdown(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = _within_bytes(_cleaned(value), MAX_MARKDOWN_BYTES)
        return value if value.strip() else None

    @property
    def clears(self) -> bool:
        return not self.plan and self.markdown is None

    @classmethod
    def parse(cls, data: Any) -> CardInput:
        """Validate raw JSON-shaped input; raise CardError naming the first bad field."""
        return parse_object(cls, data, "card", "must be a JSON object with optional 'plan' and 'markdown'")

    def to_json(self) -> dict[str, Any]:
        return {
            "plan": [s.to_json() for s in self.plan] if self.plan else None,
            "markdown": self.markdown,
        }


_M = TypeVar("_M", bound=BaseModel)


def parse_object(model: type[_M], data: Any, name: str, shape: str, default_field: str = "") -> _M:
    """Raw JSON-shaped `data` validated as `model`: CardError `name`, `shape` when it is no
    JSON object, else naming the first bad field (`default_field` where the rule names none)."""
    if not isinstance(data, dict):
        raise CardError(name, shape)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise CardError(*field_and_rule(exc, default_field)) from None


class StepCounts(BaseModel):
    completed: int
    total: int


class Card(BaseModel):
    """A stored card: the last accepted write of one owner."""

    model_config = ConfigDict(frozen=True)

    sessionKey: str
    agentId: str
    displayKey: str
    revision: int
    plan: list[Step] | None = None
    markdown: str | None = None
    updatedAt: str

    @property
    def active_step(self) -> Step | None:
        return next((s for s in self.plan or () if s.status is Status.in_progress), None)

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        data["plan"] = [s.to_json() for s in self.plan] if self.plan else None
        return data


class WriteResult(BaseModel):
    """What an accepted write answers: the receipt text and the structured result."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    revision: int
    steps: StepCounts | None = None
    cleared: bool = False
    stop: Any = None
    """The Stop pressed on the owner's active run (`model.asks.StopMark`), if any: the
    writer's agent should stop."""

    @property
    def receipt(self) -> str:
        if self.cleared:
            return "Progress card cleared"
        if self.steps is None:
            return f"Progress card updated (rev {self.revision})"
        return (
            f"Progress card updated (rev {self.revision}, "
            f"{self.steps.completed}/{self.steps.total} done)"
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "revision": self.revision,
            "steps": self.steps.model_dump() if self.steps else None,
        }
        if self.cleared:
            out["cleared"] = True
        if self.stop is not None:
            out["stop"] = self.stop.to_json()
        return out
