"""What one draft shows and remembers, stored with it in Redis as JSON (see `decide`).

`DraftState` is everything a later decision about the draft depends on, so a restarted
worker behaves as the one before it: the message and what it shows, the bookkeeping of
runs and answers, the content the channel refused, an unsure first send (`Intent`),
what was pinged, when its message was sent and when the draft last moved to the bottom
of the chat.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from typing import Any, Literal

from .outcome import MessageId

Purpose = Literal["draft", "answer", "ping"]


@dataclass(frozen=True, slots=True)
class Intent:
    """A first send whose outcome is not known yet (see the module doc)."""

    purpose: Purpose
    index: int
    """Which part of the final answer (purpose "answer"); 0 for a draft."""
    method: str
    params: dict[str, Any]
    """Exactly what was sent (a fallback when that was sent), for probing."""
    digest: str
    """The digest of the payload we meant to show: what the draft shows once adopted."""
    kind: str
    """The kind of message that was sent."""
    mark: int
    """The highest message id known in the destination before the send; 0 when none is
    known (then the ids from 1 are probed: a destination where nothing is known yet)."""
    at: float
    """Wall-clock time (seconds) from which probing waits `settle`: the send, then, once
    its outcome turned out unknown (a timeout), that moment — a request still in flight
    at the server may land until well after the client gave up."""
    probe: int = 0
    """The next message id to probe (mark + 1 at first)."""
    probes: int = 0
    """Probes made so far."""
    revision: int | None = None
    """The card revision the payload showed."""
    needs: tuple[str, ...] = ()
    """Purpose "ping": the keys of what it announced (`model.needs`)."""
    repost: bool = False
    """A draft sent again at the bottom: once found, the draft it replaced is deleted."""


@dataclass(frozen=True, slots=True)
class DraftState:
    message_id: MessageId | None = None
    digest: str | None = None
    """What the message shows: the digest of the payload we *meant* (see `Payload`)."""
    kind: str | None = None
    revision: int | None = None
    """The card revision the message shows (None: no card, or not known)."""
    fresh: bool = False
    """/card asked to show the draft again as a new message at the bottom of the chat."""
    seen_run: str | None = None
    """The last run this draft saw active: if it ended unseen (the next run began before
    the draft looked again), its ending is still handled, from the run's record."""
    done_run: str | None = None
    """The run whose end was handled; its message (if kept) is that run's record."""
    keep: bool = False
    """After `done_run`, progress mode keeps showing the finished card (keepOnComplete)."""
    late: bool = False
    """After `done_run`, the message is a live draft of a card written after the run
    ended (or of a finished session the chat followed afterwards), not its record: it
    follows later writes, and the next run takes it over."""
    answer_run: str | None = None
    """The run whose end is being handled (set before its first call)."""
    answer_sent: int = 0
    """How many messages of `answer_run`'s final answer were sent."""
    offset: int = 0
    """`block` mode: characters of the answer shown by earlier (rotated) messages."""
    answer: str | None = None
    """`progress`/`off` mode: the final answer of `answer_run`, captured while its ending
    is under way (None otherwise). A new run replaces the owner's activity, so an ending
    interrupted by a new run is finished from this copy."""
    refused: str | None = None
    """The digest of a payload whose content the channel refused: it is shown through
    its fallback `level` deep (the same content is never tried again as it was)."""
    level: int = 0
    given_up: str | None = None
    """The digest of a draft the channel refused for good (or with no fallback left):
    not tried again until the content changes."""
    end: str | None = None
    """`progress`/`off` mode: the line that says how `answer_run` ended, captured with
    `answer` (None: no line, or no ending under way)."""
    pinged: tuple[str, ...] = ()
    """The keys of what needs a person (`model.needs`) that a ping (or the line that
    ended a run) announced here, for as long as each lasts: a need is pinged once, and
    again only after it passed."""
    stale: MessageId | None = None
    """A draft message replaced by a repost at the bottom of the chat, still to be
    deleted (the new one is sent first)."""
    reposted_at: float = 0.0
    """Wall-clock time of the last repost to the bottom (one per `repostInterval`)."""
    sent_at: float = 0.0
    """Wall-clock time the draft's message was sent (the request left; an unsure send's:
    when its outcome turned out unknown): where message ids say nothing of order, what
    tells whether someone else's message came later (`conduct.under`)."""
    intent: Intent | None = None

    @property
    def settled(self) -> bool:
        """The message is the record of a finished run: left alone from now on."""
        return self.done_run is not None and self.keep and not self.late

    def to_json(self) -> str:
        # Field by field, not `asdict`: its deep copy was most of the cost of every draft
        # write. Fields at their defaults are left out (`from_json` gives them back):
        # a draft's state is a handful of fields, written and read on every call.
        data = {name: value for name, default in _DEFAULTS if (value := getattr(self, name)) != default}
        if self.intent is not None:
            data["intent"] = {name: getattr(self.intent, name) for name in self.intent.__dataclass_fields__}
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | None) -> DraftState:
        if not raw:
            return cls()
        data = json.loads(raw)
        intent = data.pop("intent", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if "pinged" in known:
            known["pinged"] = tuple(known["pinged"])
        if intent:
            intent = {k: v for k, v in intent.items() if k in Intent.__dataclass_fields__}
            intent.setdefault("kind", "classic")
            intent["needs"] = tuple(intent.get("needs", ()))
        return cls(**known, intent=Intent(**intent) if intent else None)


_DEFAULTS = tuple((f.name, f.default) for f in fields(DraftState) if f.name != "intent")
"""Each field of a state but its intent, with its default (every field has one)."""

__all__ = ["DraftState", "Intent", "Purpose"]
