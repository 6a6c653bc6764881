"""What a draft shows besides the checklist (docs/events-and-runs.md): headline, tool lines,
answer text, and an attention line when the agent waits for a person.

Agent text, so it is cleaned like card text and bounded: a headline and an attention
line of at most 280 characters each, the most recent tool lines, and the tail of the
streamed answer.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, field_validator

from .card import MAX_NOTE_CHARS, clean_text, cut, parse_object

MAX_TOOL_LINES = 5
MAX_TOOL_LINE_CHARS = 280
MAX_ANSWER_CHARS = 16_384


class Activity(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    headline: str | None = None
    tools: tuple[str, ...] = ()
    answer: str | None = None
    attention: str | None = None
    """What the agent waits for from a person (`Waiting for input: …`), shown with
    the other lines that need a person."""

    @field_validator("headline", "attention")
    @classmethod
    def _headline(cls, value: str | None) -> str | None:
        if value is None:
            return None
        return cut(" ".join(clean_text(value).split()), MAX_NOTE_CHARS) or None

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> tuple[str, ...]:
        if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
            raise ValueError("must be an array of strings")
        lines = [cut(" ".join(clean_text(v).split()), MAX_TOOL_LINE_CHARS) for v in value]
        return tuple(line for line in lines if line)[-MAX_TOOL_LINES:]

    @field_validator("answer")
    @classmethod
    def _answer(cls, value: str | None) -> str | None:
        if value is None:
            return None
        value = clean_text(value)
        if len(value) > MAX_ANSWER_CHARS:
            value = "…" + value[-(MAX_ANSWER_CHARS - 1) :]
        return value if value.strip() else None

    @property
    def empty(self) -> bool:
        return not (self.headline or self.tools or self.answer or self.attention)

    def to_json(self) -> dict[str, Any]:
        out = {"headline": self.headline, "tools": list(self.tools), "answer": self.answer}
        if self.attention:
            out["attention"] = self.attention
        return out

    @classmethod
    def parse(cls, data: Any) -> Activity:
        return parse_object(cls, data, "activity", "must be a JSON object", "activity")
