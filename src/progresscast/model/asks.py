"""Asks: a question an agent puts to the people who follow its session (docs/answering.md).

An ask belongs to an owner (agent + session). It is `open` until the first allowed
answer (`answered`), its expiry on the store's clock (`expired`), or the agent stops
waiting (`withdrawn`). The store keeps each ask as one JSON object (`Ask.to_stored`);
what an agent sends is checked here first (`AskInput.parse`), so a wrong shape never
reaches Redis. Pure data: nothing here touches Redis.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .card import SHOWN_AS_SPACE, CardError, clean_text, has_lone_surrogate, shows_nothing
from .validation import field_and_rule

MAX_OPEN = 5
"""Open asks per owner; a sixth is refused until one ends."""
MAX_PROMPT_CHARS = 280
MAX_DETAIL_CHARS = 2000
MAX_OPTION_CHARS = 40
MAX_OPTIONS = 10
MAX_ANSWER_CHARS = 2000
DEFAULT_TIMEOUT = 600
MAX_TIMEOUT = 24 * 3600
APPROVAL_OPTIONS = ("Allow", "Deny")
KEEP_CLOSED_MS = 24 * 3600 * 1000
"""How long an ask that ended is kept (a late press is told who answered it)."""
GONE_KEEP_MS = 60 * 1000
"""How long a withdraw that found no ask is remembered: its open may still be on its way
to Redis (sent on another connection, or stopped after it was sent), and offers nothing
when it lands."""
MAX_GONE = 32
"""Such withdraws remembered per owner at most (the newest): anyone may withdraw an id."""


class AskKind(StrEnum):
    approval = "approval"
    choice = "choice"
    text = "text"


class AskState(StrEnum):
    open = "open"
    answered = "answered"
    expired = "expired"
    withdrawn = "withdrawn"


def new_ask_id() -> str:
    """128 random bits, URL-safe (22 characters): an id nobody can guess."""
    return secrets.token_urlsafe(16)


def _one_line(value: str) -> str:
    return " ".join(SHOWN_AS_SPACE.sub(" ", value).split())


def _checked(value: object, name: str, limit: int) -> str:
    if not isinstance(value, str):
        raise ValueError("must be a string")
    if has_lone_surrogate(value):
        raise ValueError("must be valid Unicode text (no lone surrogates)")
    value = clean_text(value)
    if len(value) > limit:
        raise ValueError(f"must be at most {limit} characters")
    return value


class AskInput(BaseModel):
    """What an agent asks (`progressCard.ask`, `progresscast ask`, `ask_person`, hooks)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    kind: AskKind = AskKind.choice
    prompt: str
    detail: str | None = None
    options: list[str] | None = None
    multi: bool = False
    allowText: bool = False
    timeoutSeconds: int = DEFAULT_TIMEOUT
    source: str = "api"

    @field_validator("prompt", mode="before")
    @classmethod
    def _prompt(cls, v: object) -> str:
        text = _one_line(_checked(v, "prompt", 10 * MAX_PROMPT_CHARS))
        if not text:
            raise ValueError("must not be empty")
        if len(text) > MAX_PROMPT_CHARS:
            raise ValueError(f"must be at most {MAX_PROMPT_CHARS} characters")
        return text

    @field_validator("detail", mode="before")
    @classmethod
    def _detail(cls, v: object) -> str | None:
        if v is None:
            return None
        text = _checked(v, "detail", MAX_DETAIL_CHARS)
        return None if shows_nothing(text) else text

    @field_validator("options", mode="before")
    @classmethod
    def _options(cls, v: object) -> list[str] | None:
        if v is None:
            return None
        if not isinstance(v, list):
            raise ValueError("must be an array of labels")
        if not 1 <= len(v) <= MAX_OPTIONS:
            raise ValueError(f"must hold 1 to {MAX_OPTIONS} labels")
        out: list[str] = []
        for i, item in enumerate(v):
            try:
                label = _one_line(_checked(item, "label", 10 * MAX_OPTION_CHARS))
            except ValueError as exc:
                raise ValueError(f"[{i}] {exc}") from None
            if not label:
                raise ValueError(f"[{i}] must not be empty")
            if len(label) > MAX_OPTION_CHARS:
                raise ValueError(f"[{i}] must be at most {MAX_OPTION_CHARS} characters")
            if label in out:
                raise ValueError(f"[{i}] repeats {label!r}")
            out.append(label)
        return out

    @field_validator("timeoutSeconds", mode="before")
    @classmethod
    def _timeout(cls, v: object) -> int:
        if isinstance(v, bool) or not isinstance(v, int | float) or v != v:
            raise ValueError("must be a number of seconds")
        if not 1 <= v <= MAX_TIMEOUT:
            raise ValueError(f"must be between 1 and {MAX_TIMEOUT} seconds")
        return int(v)

    @field_validator("source", mode="before")
    @classmethod
    def _source(cls, v: object) -> str:
        text = _one_line(_checked(v, "source", 40))
        return text or "api"

    @classmethod
    def parse(cls, raw: object) -> AskInput:
        """Validate an ask; a wrong shape raises `CardError` naming field and rule."""
        if not isinstance(raw, dict):
            raise CardError("", "an ask must be an object")
        try:
            ask = cls.model_validate(raw)
        except ValidationError as exc:
            field_name, rule = field_and_rule(exc)
            raise CardError(field_name, rule) from None
        return ask.normalized()

    def normalized(self) -> AskInput:
        """The options each kind has: an approval's default `Allow`/`Deny`; a text ask none
        (a typed answer only); a choice without options is refused."""
        if self.multi and self.kind is not AskKind.choice:
            raise CardError("multi", "is only for a choice")
        if self.kind is AskKind.approval and not self.options:
            return self.model_copy(update={"options": list(APPROVAL_OPTIONS)})
        if self.kind is AskKind.text:
            if self.options:
                raise CardError("options", "must be absent for a text ask (it takes a typed answer)")
            return self.model_copy(update={"allowText": True})
        if self.kind is AskKind.choice and not self.options:
            raise CardError("options", "is required for a choice (1 to 10 labels)")
        return self


@dataclass(frozen=True)
class Actor:
    """Who acted, and where: a person in a chat (or a token's holder on the web)."""

    platform: str
    destination: str
    user: str
    name: str

    def to_json(self) -> dict[str, str]:
        return {"platform": self.platform, "destination": self.destination, "user": self.user, "name": self.name}

    @classmethod
    def from_json(cls, raw: Any) -> Actor:
        raw = raw if isinstance(raw, dict) else {}
        return cls(*(str(raw.get(k, "")) for k in ("platform", "destination", "user", "name")))

    @property
    def shown(self) -> str:
        """How the actor is named in chat: their display name, else their id."""
        return self.name or self.user or "someone"


@dataclass(frozen=True)
class Answer:
    by: Actor
    at_ms: int
    options: tuple[str, ...] = ()
    text: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"by": self.by.to_json(), "at": self.at_ms, "options": list(self.options)}
        if self.text is not None:
            out["text"] = self.text
        return out

    @classmethod
    def from_json(cls, raw: Any) -> Answer:
        return cls(
            by=Actor.from_json(raw.get("by")),
            at_ms=int(raw.get("at", 0)),
            options=tuple(str(o) for o in raw.get("options") or ()),
            text=raw.get("text") if isinstance(raw.get("text"), str) else None,
        )

    @property
    def words(self) -> str:
        """The answer as one line: the labels chosen, then the text."""
        parts = list(self.options)
        if self.text:
            parts.append(self.text)
        return ", ".join(parts)


@dataclass(frozen=True)
class Ask:
    """One ask as the store keeps it."""

    ask_id: str
    kind: AskKind
    prompt: str
    options: tuple[str, ...] = ()
    detail: str | None = None
    multi: bool = False
    allow_text: bool = False
    source: str = "api"
    created_ms: int = 0
    expires_ms: int = 0
    state: AskState = AskState.open
    closed_ms: int | None = None
    answer: Answer | None = None
    run_id: str | None = None
    seq: int = field(default=0, compare=False)
    """When it was opened, in µs on the store's clock: the order of asks opened within one ms."""

    @property
    def declined(self) -> bool:
        """An approval answered without its first option (`Allow`, unless the agent named
        its own): `Deny`, another option, or words typed instead."""
        if self.kind is not AskKind.approval or self.state is not AskState.answered or self.answer is None:
            return False
        return not (self.options and self.options[0] in self.answer.options)

    def state_at(self, now_ms: int) -> AskState:
        """The state at `now_ms` on the store's clock: an open ask past its expiry is expired."""
        if self.state is AskState.open and now_ms >= self.expires_ms:
            return AskState.expired
        return self.state

    def to_stored(self) -> str:
        out: dict[str, Any] = {
            "askId": self.ask_id, "kind": self.kind.value, "prompt": self.prompt, "options": list(self.options),
            "multi": self.multi, "allowText": self.allow_text, "source": self.source, "createdAt": self.created_ms,
            "expiresAt": self.expires_ms, "state": self.state.value,
        }
        if self.detail is not None:
            out["detail"] = self.detail
        if self.closed_ms is not None:
            out["closedAt"] = self.closed_ms
        if self.answer is not None:
            out["answer"] = self.answer.to_json()
        if self.run_id:
            out["runId"] = self.run_id
        if self.seq:
            out["seq"] = self.seq
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_stored(cls, raw: str) -> Ask | None:
        """An ask as stored; None for anything unreadable."""
        try:
            d = json.loads(raw)
            return cls(
                ask_id=str(d["askId"]),
                kind=AskKind(d["kind"]),
                prompt=str(d["prompt"]),
                options=tuple(str(o) for o in d.get("options") or ()),
                detail=d.get("detail"),
                multi=bool(d.get("multi")),
                allow_text=bool(d.get("allowText")),
                source=str(d.get("source", "api")),
                created_ms=int(d.get("createdAt", 0)),
                expires_ms=int(d["expiresAt"]),
                state=AskState(d.get("state", "open")),
                closed_ms=int(d["closedAt"]) if d.get("closedAt") is not None else None,
                answer=Answer.from_json(d["answer"]) if isinstance(d.get("answer"), dict) else None,
                run_id=d.get("runId"),
                seq=int(d.get("seq") or 0),
            )
        except (ValueError, KeyError, TypeError, AttributeError):
            return None

    def to_json(self, now_ms: int | None = None) -> dict[str, Any]:
        """The ask as the API shows it (`state` as of `now_ms` when given)."""
        out: dict[str, Any] = {
            "askId": self.ask_id, "kind": self.kind.value, "prompt": self.prompt, "options": list(self.options),
            "multi": self.multi, "allowText": self.allow_text, "source": self.source,
            "expiresAt": _iso(self.expires_ms),
            "state": (self.state_at(now_ms) if now_ms is not None else self.state).value,
        }
        if self.detail is not None:
            out["detail"] = self.detail
        if self.answer is not None:
            out["answer"] = {
                "by": self.answer.by.to_json(), "at": _iso(self.answer.at_ms), "options": list(self.answer.options),
                **({"text": self.answer.text} if self.answer.text is not None else {}),
            }
        return out

    def check_answer(self, options: list[str] | None, text: str | None) -> tuple[tuple[str, ...], str | None]:
        """An answer's labels and text, checked against this ask (`CardError` when they do
        not fit): labels among its options (one unless `multi`), text only where it takes one."""
        chosen = tuple(options or ())
        for label in chosen:
            if label not in self.options:
                raise CardError("options", f"{label!r} is not one of this ask's options")
        if len(set(chosen)) != len(chosen):
            raise CardError("options", "must not repeat a label")
        if len(chosen) > 1 and not self.multi:
            raise CardError("options", "takes one label (the ask is not multiple choice)")
        clean: str | None = None
        if text is not None:
            if not isinstance(text, str) or has_lone_surrogate(text):
                raise CardError("text", "must be valid Unicode text")
            clean = clean_text(text).strip()
            if len(clean) > MAX_ANSWER_CHARS:
                raise CardError("text", f"must be at most {MAX_ANSWER_CHARS} characters")
            if not clean:
                clean = None
            elif not self.allow_text:
                raise CardError("text", "this ask takes one of its options, not a typed answer")
        if not chosen and clean is None:
            raise CardError("options", "an answer needs a label or a text")
        return chosen, clean


@dataclass(frozen=True)
class StopMark:
    """A Stop pressed on a run: who, when."""

    by: Actor
    at_ms: int

    def to_stored(self) -> str:
        return json.dumps({"by": self.by.to_json(), "at": self.at_ms}, ensure_ascii=False)

    @classmethod
    def from_stored(cls, raw: str | None) -> StopMark | None:
        if not raw:
            return None
        try:
            d = json.loads(raw)
            return cls(Actor.from_json(d.get("by")), int(d.get("at", 0)))
        except (ValueError, TypeError, AttributeError):
            return None

    def to_json(self) -> dict[str, Any]:
        return {"by": self.by.to_json(), "at": _iso(self.at_ms)}


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


STOP_CONTROL = "pc:stop"
"""The opaque id of a draft's Stop button (the draft pressed says which run)."""


def option_control(ask_id: str, index: int) -> str:
    """The opaque id of an ask's option button: `pc:a:<askId>:<index>` (≤ 64 bytes, as
    Telegram's `callback_data` wants; ask ids are 22 characters)."""
    return f"pc:a:{ask_id}:{index}"


def text_control(ask_id: str) -> str:
    """The opaque id of an ask's "type an answer" button (a platform's text form)."""
    return f"pc:t:{ask_id}"


def parse_control(raw: str) -> tuple[str, str | None, int | None] | None:
    """A control id as (kind `a` | `t` | `stop`, askId, option index); None: not ours."""
    if raw == STOP_CONTROL:
        return "stop", None, None
    parts = raw.split(":")
    if len(parts) == 4 and parts[:2] == ["pc", "a"] and parts[3].isdigit() and 0 < len(parts[2]) <= 64:
        return "a", parts[2], int(parts[3])
    if len(parts) == 3 and parts[:2] == ["pc", "t"] and 0 < len(parts[2]) <= 64:
        return "t", parts[2], None
    return None


def asks_of(raw: dict[str, str]) -> tuple[Ask, ...]:
    """The stored asks hash as asks, oldest first."""
    asks = [a for a in map(Ask.from_stored, raw.values()) if a is not None]
    return tuple(sorted(asks, key=lambda a: (a.created_ms, a.seq, a.ask_id)))


__all__ = [
    "APPROVAL_OPTIONS",
    "GONE_KEEP_MS",
    "MAX_GONE",
    "MAX_OPEN",
    "STOP_CONTROL",
    "Actor",
    "Answer",
    "Ask",
    "AskInput",
    "AskKind",
    "AskState",
    "StopMark",
    "asks_of",
    "new_ask_id",
    "option_control",
    "parse_control",
    "text_control",
]
