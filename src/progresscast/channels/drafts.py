"""Drafts, decided purely, for every channel: from what a destination shows and what it
should show, the next call — and what the reply to it means.

A *draft* is the one live message an owner (agent + session) has in one destination
(a Telegram chat or topic, a Slack channel or thread). `DraftState` is what it shows
as far as we know — the message id, a digest of the payload it shows, its kind — plus
the bookkeeping of runs: which run's end was handled, how much of a final answer was
sent, where the current `block` message starts in the answer, which content the
channel refused (and how deep into its fallbacks we went), and an *intent* for a
first send whose outcome is not known yet. All of it is stored with the draft, so a
restarted worker behaves as the one before it.

`decide` looks at the state, the owner's View and the destination's situation and
returns the next call (or None when the destination already shows the right thing);
`apply` folds the reply to that call, read as an `Outcome` kind, back into the state.
A channel's worker only performs calls and stores states; every decision is here, so
it is tested once, without any channel, Redis or clock.

Lifecycle: send → edit in place → delete when a clear leaves nothing to show; in
`block` mode, rotate to a new message past a chunk; in `progress`/`off` mode, on run
end delete the draft (or keep it: keepOnComplete) and send the final answer once. A
run that ended while the draft did not look (the next run already began) is still
ended from the store's record of it. A card written after its run ended is shown in a
new (late) draft, which the next run takes over.

Duplicate-free first sends. Chat APIs have no idempotency keys: a `sendMessage` that
times out may or may not have created the message. Before a first send the worker
stores an `Intent` (what it sends and the highest message id known in the chat,
the *mark*). When the send succeeds or surely never reached the server, the intent
is dropped; when the outcome is unknown it stays, and nothing else is sent for this
draft until it is resolved: after a settle delay the ids after the mark are probed
with `editMessageText` carrying exactly the content that was sent. "message is not
modified" proves that our message landed there (it is adopted as the draft); "message
to edit not found" proves nothing of ours landed at or after that id (it is then
safe to send); "message can't be edited" is someone else's message, so the next id
is tried, at most `max_probes` of them. (A channel whose client can look a message
up otherwise — Slack's history — answers `found`/`absent` the same way.) Ids we know we sent ourselves since (other
drafts, replies) are skipped, so a probe never overwrites one of our messages.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, Protocol

from ..config.settings import Mode
from ..model.activity import Activity
from ..model.view import TERMINAL, View
from ..render.payload import Payload, digest
from .outcome import MessageId, Outcome, OutcomeKind

Purpose = Literal["draft", "answer"]


@dataclass(frozen=True)
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


@dataclass(frozen=True)
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
    intent: Intent | None = None

    @property
    def settled(self) -> bool:
        """The message is the record of a finished run: left alone from now on."""
        return self.done_run is not None and self.keep and not self.late

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | None) -> DraftState:
        if not raw:
            return cls()
        data = json.loads(raw)
        intent = data.pop("intent", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        if intent:
            intent = {k: v for k, v in intent.items() if k in Intent.__dataclass_fields__}
            intent.setdefault("kind", "classic")
        return cls(**known, intent=Intent(**intent) if intent else None)


# --- the calls -----------------------------------------------------------------------


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


# --- the whole decision --------------------------------------------------------------


class Renderers(Protocol):
    """A channel's pure renderer, for one destination's settings."""

    mode: Mode

    def draft(self, view: View) -> Payload | None: ...

    def answer(self, markdown: str) -> list[Payload]: ...

    def snapshot(self, view: View) -> Payload | None:
        """A one-off of the progress draft, whatever the mode (`card` where the mode
        shows no live draft)."""
        ...


@dataclass(frozen=True)
class Situation:
    """What the worker knows besides the state and the view."""

    following: bool
    mode: Mode
    keep_on_complete: bool = False
    block_chars: int = 3000
    now: float = 0.0
    settle: float = 3.0
    max_probes: int = 5
    known: frozenset[int] = frozenset()
    """Message ids after an intent's mark that we know we sent (other drafts, replies):
    not the lost message, so never probed — a probe must not overwrite them."""


def on_follow(state: DraftState, view: View) -> DraftState:
    """A chat starts following: a run that already ended is not announced again (no
    final answer), but its card is shown, as a live draft that follows later writes
    (as in a chat that followed before the end and sees a card written after it)."""
    run_id = view.run_id
    if view.run in TERMINAL and run_id and state.done_run != run_id:
        return replace(state, done_run=run_id, keep=False, late=True, answer_run=None, answer_sent=0)
    return state


def _revision(view: View) -> int | None:
    return view.card.revision if view.card is not None else None


def decide(state: DraftState, view: View, sit: Situation, renderers: Renderers) -> tuple[DraftState, Call | None]:
    """The state with the bookkeeping that needs no call applied, and the next call."""
    s = state

    # An unsure send first: nothing else is sent for this draft until we know.
    if s.intent is not None:
        intent = s.intent
        if intent.probes >= sit.max_probes:
            # Looked far enough: give up and treat it as not landed.
            s = replace(s, intent=None)
        elif sit.now < intent.at + sit.settle:
            return s, Wait(intent.at + sit.settle - sit.now)
        else:
            candidate = max(intent.probe, intent.mark + 1)
            while candidate in sit.known:
                candidate += 1
            return s, Probe(candidate, intent)

    if not sit.following:
        if s.message_id is not None and not s.settled:
            return s, Delete(s.message_id)
        return s, None

    mode = sit.mode
    run_id = view.run_id

    # The run this draft saw ended while we did not look, and the next one began: its
    # ending is handled from what the store kept of it (its final answer).
    seen = s.seen_run
    if (
        seen is not None
        and seen != run_id
        and s.done_run != seen
        and s.answer_run != seen
        and view.previous is not None
        and view.previous.run_id == seen
    ):
        if mode in (Mode.progress, Mode.off):
            s = replace(s, answer_run=seen, answer_sent=0, answer=view.previous.answer or "")
        else:  # partial / block: the preview is that run's answer; it stays
            s = replace(s, done_run=seen, keep=True)

    # A new run after one whose end was handled (or began to be): the finished run's
    # message stays as its record, the new run gets a new draft (a late draft is taken
    # over). An ending still under way in progress/off mode is finished first (its
    # draft deleted, its answer sent), so that a new run never orphans the old draft
    # nor loses the old answer.
    handled = s.done_run or s.answer_run
    if handled is not None and run_id != handled:
        if s.answer is not None and s.answer_run is not None and s.done_run != s.answer_run:
            keep = mode is Mode.progress and sit.keep_on_complete
            if not keep and s.message_id is not None:
                return s, Delete(s.message_id)
            s, part = _answer(s, renderers.answer(s.answer))
            if part is not None:
                return s, part
        if s.late:
            s = DraftState(
                message_id=s.message_id, digest=s.digest, kind=s.kind, revision=s.revision, fresh=s.fresh,
                refused=s.refused, level=s.level, given_up=s.given_up,
            )
        else:
            s = DraftState(fresh=s.fresh)

    terminal = view.run in TERMINAL
    if not terminal and run_id is not None and s.seen_run != run_id:
        s = replace(s, seen_run=run_id)
    ending = terminal and run_id is not None and s.done_run != run_id
    finished = terminal and run_id is not None and s.done_run == run_id
    if ending and s.answer_run != run_id:
        # Noted before the first call of the ending, so that a new run starting while
        # the ending is under way cannot take over this run's message.
        s = replace(s, answer_run=run_id, answer_sent=0)
    rev = _revision(view)

    if mode in (Mode.progress, Mode.off):
        if ending:
            assert run_id is not None
            answer = view.activity.answer or ""
            if s.answer != answer:
                s = replace(s, answer=answer)
            keep = mode is Mode.progress and sit.keep_on_complete
            call = next_call(s, renderers.draft(view) if keep else None, rev)
            if call is not None:
                return s, call
            s, part = _answer(s, renderers.answer(answer))
            if part is not None:
                return s, part
            return replace(s, done_run=run_id, keep=keep, late=False, fresh=False, answer=None), None
        if finished and mode is Mode.progress and view.after_end and not s.late:
            # A card written after the run ended: what the agent says now, in a new
            # draft (a kept record stays as it is).
            if s.keep and s.message_id is not None:
                s = replace(s, message_id=None, digest=None, kind=None, revision=None)
            s = replace(s, late=True)
        if finished and s.fresh and mode is Mode.progress and not s.late:
            s = replace(s, keep=True)  # /card after the end: show the finished card again
        show = not finished or (mode is Mode.progress and (s.keep or s.late))
        want = renderers.draft(view) if show else None
        return _settle(s, want, rev)

    # partial / block: the preview message is the answer, it stays when the run ends.
    if mode is Mode.block:
        s, view, rotation = _rotate(s, view, sit, renderers)
        if rotation is not None:
            return s, rotation
    want = renderers.draft(view)
    s, settled = _settle(s, want, rev)
    if settled is None and ending:
        s = replace(s, done_run=run_id, keep=True, fresh=False)
    return s, settled


def _answer(s: DraftState, parts: list[Payload]) -> tuple[DraftState, Send | None]:
    """The next part of a final answer to send; parts with nothing left to try (refused
    with no fallback) are skipped."""
    while s.answer_sent < len(parts):
        part = parts[s.answer_sent]
        out = shown(s, part)
        if out is not None:
            return s, Send(part, out, "answer", s.answer_sent)
        s = replace(s, answer_sent=s.answer_sent + 1)
    return s, None


def _settle(s: DraftState, want: Payload | None, rev: int | None) -> tuple[DraftState, Call | None]:
    call = next_call(s, want, rev)
    if call is None and s.fresh:
        s = replace(s, fresh=False)  # nothing to show again (or already shown fresh)
    return s, call


def block_cut(answer: str, offset: int, limit: int) -> int | None:
    """Where the current `block` message should end, when the answer from `offset` is
    longer than `limit`: after the last paragraph break, line break or space in the
    second half of the window, else at the limit."""
    if len(answer) - offset <= limit:
        return None
    window = answer[offset : offset + limit]
    for sep in ("\n\n", "\n", " "):
        k = window.rfind(sep)
        if k >= limit // 2:
            return offset + k + len(sep)
    return offset + limit


def completed_blocks(answer: str) -> str:
    """The answer up to its last paragraph break: `block` mode shows whole blocks while
    the run is still writing."""
    k = answer.rfind("\n\n")
    return answer[:k] if k > 0 else ""


def _with_answer(view: View, answer: str | None) -> View:
    activity = view.activity.model_copy(update={"answer": answer if answer and answer.strip() else None})
    return replace(view, activity=activity)


def _rotate(
    s: DraftState, view: View, sit: Situation, renderers: Renderers
) -> tuple[DraftState, View, Call | None]:
    """`block` mode: freeze the current message at a chunk boundary and move on to a new
    one; returns the view for the current message (the answer after `offset`)."""
    answer = view.activity.answer or ""
    if s.offset > len(answer):  # the answer started over (a new run cleared the activity)
        s = replace(s, offset=0)
    while (cut := block_cut(answer, s.offset, sit.block_chars)) is not None:
        chunk = View(owner=view.owner, activity=Activity(answer=answer[s.offset : cut].rstrip()), run=view.run)
        # A finished chunk is part of the answer: /card's `fresh` does not move it.
        call = next_call(replace(s, fresh=False), renderers.draft(chunk))
        if call is not None:
            return s, view, call
        s = replace(s, message_id=None, digest=None, kind=None, revision=None, offset=cut)
    tail = answer[s.offset :]
    if view.run not in TERMINAL:
        tail = completed_blocks(tail)
    return s, _with_answer(view, tail), None


# --- outcomes ------------------------------------------------------------------------


def begin(state: DraftState, call: Send, mark: int, now: float) -> DraftState:
    """Before a first send: remember what goes out (write-ahead; see the module doc)."""
    out = call.shown
    intent = Intent(
        call.purpose, call.index, out.method, dict(out.params), call.makes, out.kind,
        mark, now, mark + 1, revision=call.revision,
    )
    return replace(state, intent=intent)


def apply(state: DraftState, call: Call, outcome: Outcome, now: float = 0.0) -> DraftState:
    """The state after `call` was answered with `outcome` — how every reply is read,
    whatever the channel. Waiting (rate limits, backoff) is the worker's part."""
    k = outcome.kind
    if isinstance(call, Send):
        if k in (OutcomeKind.ok, OutcomeKind.not_modified) and outcome.message_id is not None:
            return _sent(state, call, outcome.message_id)
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
        return _gone(state)  # deleted, already gone, or not deletable: forgotten
    if isinstance(call, Probe):
        intent = call.intent
        if k is OutcomeKind.found:
            message_id = outcome.message_id if outcome.message_id is not None else call.message_id
            if intent.purpose == "answer":
                return replace(state, intent=None, answer_sent=intent.index + 1)
            return replace(
                state, intent=None, message_id=message_id, digest=intent.digest, kind=intent.kind,
                revision=intent.revision, fresh=False,
            )
        if k is OutcomeKind.foreign:
            return replace(state, intent=replace(intent, probe=call.message_id + 1, probes=intent.probes + 1))
        if outcome.retryable or k is OutcomeKind.forbidden:
            return state
        return replace(state, intent=None)  # absent: nothing of ours landed there
    return state


def _sent(state: DraftState, call: Send, message_id: MessageId) -> DraftState:
    if call.purpose == "answer":
        return replace(state, intent=None, answer_sent=call.index + 1)
    return replace(
        state, intent=None, message_id=message_id, digest=call.makes, kind=call.shown.kind,
        revision=call.revision, fresh=False,
    )


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
    return replace(state, message_id=None, digest=None, kind=None, revision=None)


__all__ = [
    "Call",
    "Delete",
    "DraftState",
    "Edit",
    "Intent",
    "Payload",
    "Probe",
    "Renderers",
    "Send",
    "Situation",
    "Wait",
    "apply",
    "begin",
    "block_cut",
    "completed_blocks",
    "decide",
    "digest",
    "next_call",
    "on_follow",
    "shown",
]
