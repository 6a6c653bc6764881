"""What the reply to a call means for the draft (`apply`), and the write-ahead record
of a first send (`begin`) — how every reply is read, whatever the channel (see
`decide` for the lifecycle and probing of unsure sends)."""

from __future__ import annotations

from dataclasses import replace

from ...render.payload import Payload
from .calls import Call, Delete, Edit, Probe, Send
from .outcome import MessageId, Outcome, OutcomeKind
from .state import DraftState, Intent


def begin(state: DraftState, call: Send, mark: int, now: float) -> DraftState:
    """Before a first send: remember what goes out (write-ahead; see the module doc)."""
    return replace(state, intent=_intent(call, mark, now))


def _intent(call: Send, mark: int, now: float) -> Intent:
    out = call.shown
    return Intent(
        call.purpose, call.index, out.method, dict(out.params), call.makes, out.kind,
        mark, now, mark + 1, revision=call.revision, needs=call.needs, repost=call.repost,
    )


def apply(state: DraftState, call: Call, outcome: Outcome, now: float = 0.0) -> DraftState:
    """The state after `call` was answered with `outcome` — how every reply is read,
    whatever the channel. Waiting (rate limits, backoff) is the worker's part."""
    k = outcome.kind
    if isinstance(call, Send):
        if k in (OutcomeKind.ok, OutcomeKind.not_modified) and outcome.message_id is not None:
            return _sent(state, call, outcome.message_id, now)
        if k is OutcomeKind.unsure:
            return _unknown(state, now)
        s = replace(state, intent=None)
        if k in (OutcomeKind.rate_limited, OutcomeKind.transient, OutcomeKind.unsupported, OutcomeKind.forbidden):
            return s  # tried again (a forbidden destination once it is no longer paused)
        if k is OutcomeKind.refused_content:
            return _refused_content(s, call.payload)
        # Refused for good (or a reply that makes no sense for a send).
        if call.purpose == "answer":
            return replace(s, answer_sent=call.index + 1)
        if call.purpose == "ping":
            return _pinged(s, call.needs)  # not tried again: a ping is not worth a loop
        return replace(s, given_up=call.payload.digest)
    if isinstance(call, Edit):
        if outcome.delivered:
            return replace(state, digest=call.payload.digest, kind=call.shown.kind, revision=call.revision)
        if k in (OutcomeKind.gone, OutcomeKind.locked):
            return _gone(state)  # deleted by a user, or no longer editable: a new draft
        if k is OutcomeKind.refused_content:
            return _refused_content(state, call.payload)
        if k is OutcomeKind.refused:
            return replace(state, given_up=call.payload.digest)
        return state  # retried (with the newest content), or switched off (unsupported)
    if isinstance(call, Delete):
        if outcome.retryable or k is OutcomeKind.forbidden:
            return state
        if call.stale:
            return replace(state, stale=None)
        return _gone(state)  # deleted, already gone, or not deletable: forgotten
    if isinstance(call, Probe):
        intent = call.intent
        if k is OutcomeKind.found:
            message_id = outcome.message_id if outcome.message_id is not None else call.message_id
            return _landed(state, intent, message_id, now)
        if k is OutcomeKind.foreign:
            return replace(state, intent=replace(intent, probe=call.message_id + 1, probes=intent.probes + 1))
        if outcome.retryable or k is OutcomeKind.forbidden:
            return state
        return replace(state, intent=None)  # absent: nothing of ours landed there
    return state


def _sent(state: DraftState, call: Send, message_id: MessageId, now: float = 0.0) -> DraftState:
    # Sent when the request left (`begin`'s record): whatever is posted later is surely below it.
    left = state.intent.at if state.intent is not None else now
    return _landed(state, _intent(call, 0, left), message_id, now)


def _landed(state: DraftState, sent: Intent, message_id: MessageId, now: float) -> DraftState:
    """A first send landed as `message_id` (answered, or found by a probe)."""
    if sent.purpose == "answer":
        return replace(state, intent=None, answer_sent=sent.index + 1)
    if sent.purpose == "ping":
        return _pinged(replace(state, intent=None), sent.needs)
    # A repost landed: the draft it replaces is to be deleted, and the interval starts.
    stale, reposted_at = (state.message_id, now) if sent.repost else (state.stale, state.reposted_at)
    return replace(
        state, intent=None, message_id=message_id, digest=sent.digest, kind=sent.kind, revision=sent.revision,
        fresh=False, sent_at=sent.at, stale=stale, reposted_at=reposted_at,
    )


def _pinged(state: DraftState, keys: tuple[str, ...]) -> DraftState:
    return replace(state, pinged=tuple(dict.fromkeys((*state.pinged, *keys))))


def _unknown(state: DraftState, now: float) -> DraftState:
    """The send's outcome turned out unknown (a timeout, a 5xx) at `now`: `settle` is
    counted from here, not from the send, so that probing never starts while the
    request may still be landing."""
    if state.intent is None:
        return state
    return replace(state, intent=replace(state.intent, at=now))


def _refused_content(state: DraftState, payload: Payload) -> DraftState:
    """Show this payload through its next fallback from now on."""
    level = state.level + 1 if state.refused == payload.digest else 1
    return replace(state, refused=payload.digest, level=level)


def _gone(state: DraftState) -> DraftState:
    """The message was deleted (by us or a user) or can no longer be edited."""
    return replace(state, message_id=None, digest=None, kind=None, revision=None, sent_at=0.0)


__all__ = ["apply", "begin"]
