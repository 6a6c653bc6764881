"""The calls a draft needs — what `drafts.decide` returns — and the one call that moves a
destination from what it shows towards what it should show (`next_call`)."""

from __future__ import annotations

from dataclasses import dataclass

from ...render.payload import Payload
from .outcome import MessageId
from .state import DraftState, Intent, Purpose


@dataclass(frozen=True)
class Send:
    payload: Payload
    """What we mean to show (its digest is what the draft then shows)."""
    shown: Payload
    """What goes out: `payload`, or its fallback after the channel refused it."""
    purpose: Purpose = "draft"
    index: int = 0
    revision: int | None = None
    opens: bool = False
    """`shown` is `payload`'s opening (`Payload.opening`): the new message shows that,
    and is edited to `payload` by a call of its own."""
    reply_to: MessageId | None = None
    """Purpose "ping": the live draft it replies to (None: none)."""
    needs: tuple[str, ...] = ()
    """Purpose "ping": the keys of what it announces."""
    repost: bool = False
    """A draft sent again below someone else's message: the one it replaces is deleted
    once it is sent (`DraftState.stale`)."""

    @property
    def makes(self) -> str:
        """The digest of what the new message shows once sent."""
        return self.shown.digest if self.opens else self.payload.digest


@dataclass(frozen=True)
class Edit:
    message_id: MessageId
    payload: Payload
    shown: Payload
    revision: int | None = None


@dataclass(frozen=True)
class Delete:
    message_id: MessageId
    stale: bool = False
    """The draft a repost replaced (not the live one)."""


@dataclass(frozen=True)
class Probe:
    """Re-apply an unsure send's exact content to a candidate message id."""

    message_id: int
    intent: Intent


@dataclass(frozen=True)
class Wait:
    """Nothing to call yet: look again after `seconds`."""

    seconds: float


Call = Send | Edit | Delete | Probe | Wait
"""One API call a draft needs (or a wait): what `decide` returns."""


def shown(state: DraftState, want: Payload) -> Payload | None:
    """What goes out to show `want`: its fallback as deep as the channel refused it;
    None when nothing is left to try."""
    if want.digest == state.given_up:
        return None
    if want.digest == state.refused and state.level > 0:
        return want.degraded(state.level)
    return want


def next_call(state: DraftState, want: Payload | None, revision: int | None = None) -> Send | Edit | Delete | None:
    """The one call that moves the chat from `state` towards showing `want` (None: no draft)."""
    if want is None:
        return Delete(state.message_id) if state.message_id is not None else None
    out = shown(state, want)
    if state.message_id is None:
        if out is want and want.opening is not None:
            return Send(want, want.opening, revision=revision, opens=True)
        return Send(want, out, revision=revision) if out is not None else None
    if state.digest == want.digest and not state.fresh:
        return None
    if out is None:
        return None
    # A message cannot become another kind (classic ↔ rich) by editing, and /card wants
    # the draft at the bottom of the chat: both replace the message (delete, then send).
    if state.kind != out.kind or state.fresh:
        return Delete(state.message_id)
    return Edit(state.message_id, want, out, revision)


__all__ = ["Call", "Delete", "Edit", "Probe", "Send", "Wait", "next_call", "shown"]
