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

`decide` looks at the state (`state.py`), the owner's View and the destination's
situation and returns the next call (`calls.py`; None when the destination already
shows the right thing); `apply` (`replies.py`) folds the reply to that call, read as
an `Outcome` kind, back into the state.
A channel's worker only performs calls and stores states; every decision is here, so
it is tested once, without any channel, Redis or clock.

Lifecycle: send → edit in place → delete when a clear leaves nothing to show; in
`block` mode, rotate to a new message past a chunk; in `progress`/`off` mode, on run
end delete the draft (or keep it: keepOnComplete) and send the final answer once. A
run that ended while the draft did not look (the next run already began) is still
ended from the store's record of it. A card written after its run ended is shown in a
new (late) draft, which the next run takes over. A run's end keeps one line of how it
ended, the head of its answer (or a message of its own).

Towards people (`conduct.py`): once the draft shows the view, a ping — a separate
message that notifies, replying to the draft — announces what newly needs a person
(once per need while it lasts; a failed run's ping is its end line); a run's first
draft waits the start delay; an update of a draft that someone else's message landed
below goes out as a new draft under it, and the old one is deleted once that is sent.

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

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol

from ...config.base import Mode
from ...model.activity import Activity
from ...model.needs import Need
from ...model.view import TERMINAL, RunState, View
from ...render.payload import Payload
from .calls import Call, Delete, Edit, Probe, Send, Wait, next_call, shown
from .conduct import Conduct, all_needs, buried, fresh_needs
from .outcome import MessageId
from .state import DraftState

# --- the whole decision --------------------------------------------------------------


class Renderers(Protocol):
    """A channel's pure renderer, for one destination's settings."""

    mode: Mode

    def draft(self, view: View) -> Payload | None: ...

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        """A run's final answer as messages, `head` (the line that says how the run
        ended) first — a message of its own when the answer is empty."""
        ...

    def end_line(self, view: View) -> str | None:
        """How the view's run ended, on one line (None: not ended, or nothing to say)."""
        ...

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        """The separate, notifying message for what newly needs a person."""
        ...

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
    conduct: Conduct = field(default_factory=Conduct)
    """The destination's pings, start delay and staying at the bottom."""
    below: MessageId | None = None
    """The newest message someone else posted in the draft's thread: its id, or when
    it was posted where ids say nothing of order (`ordered_ids`; `conduct.under`)."""
    ordered_ids: bool = True
    """The destination's message ids grow with time (Telegram, Slack, Discord; not Matrix)."""


def on_follow(state: DraftState, view: View) -> DraftState:
    """A chat starts following: a run that already ended is not announced again (no
    final answer), but its card is shown, as a live draft that follows later writes
    (as in a chat that followed before the end and sees a card written after it). What
    needs a person already is not pinged: the chat asked to follow, and sees the card."""
    pinged = tuple(dict.fromkeys((*state.pinged, *all_needs(view))))
    if pinged != state.pinged:
        state = replace(state, pinged=pinged)
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

    # A repost is sent first, then the draft it replaced goes.
    if s.stale is not None:
        return s, Delete(s.stale, stale=True)

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
            ended = View(
                owner=view.owner, card=view.card, activity=Activity(answer=view.previous.answer),
                run=view.previous.state, run_id=seen,
            )
            s = replace(
                s, answer_run=seen, answer_sent=0, answer=view.previous.answer or "", end=renderers.end_line(ended)
            )
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
            s, part = _answer(s, renderers.answer(s.answer, s.end))
            if part is not None:
                return s, part
        # What was pinged stays pinged while it lasts: a step still blocked in the
        # next run is no news.
        if s.late:
            s = DraftState(
                message_id=s.message_id, digest=s.digest, kind=s.kind, revision=s.revision, fresh=s.fresh,
                refused=s.refused, level=s.level, given_up=s.given_up, pinged=s.pinged,
            )
        else:
            s = DraftState(fresh=s.fresh, pinged=s.pinged)

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
            end = renderers.end_line(view)
            if s.answer != answer or s.end != end:
                s = replace(s, answer=answer, end=end)
            keep = mode is Mode.progress and sit.keep_on_complete
            call = next_call(s, renderers.draft(view) if keep else None, rev)
            if call is not None:
                return s, call
            s, part = _answer(s, renderers.answer(answer, end))
            if part is not None:
                return s, part
            # The line that ended the run (a message that notifies) named what needs a
            # person: it is the ping for all of it.
            return replace(
                s, done_run=run_id, keep=keep, late=False, fresh=False, answer=None, end=None,
                pinged=all_needs(view),
            ), None
        if finished and mode is Mode.progress and view.after_end and not s.late:
            # A card written after the run ended: what the agent says now, in a new
            # draft (a kept record stays as it is).
            if s.keep and s.message_id is not None:
                s = replace(s, message_id=None, digest=None, kind=None, revision=None)
            s = replace(s, late=True)
        if finished and s.fresh and mode is Mode.progress and not s.late:
            s = replace(s, keep=True)  # /card after the end: show the finished card again
        if finished and view.card is None and (s.keep or s.late):
            # The card cleared after its run ended: a draft showing it again is deleted,
            # not left holding the ended run's headline and tool line (a record
            # keepOnComplete kept stays as it is, no longer this draft).
            if s.keep and sit.keep_on_complete and s.message_id is not None:
                s = replace(s, message_id=None, digest=None, kind=None, revision=None)
            s = replace(s, keep=False, late=False)
        show = not finished or (mode is Mode.progress and (s.keep or s.late))
        want = renderers.draft(view) if show else None
        if want is not None and (hold := _held(s, view, sit)) is not None:
            return s, hold
        s, draft_call = _settle(s, want, rev, sit)
        return (s, draft_call) if draft_call is not None else _ping(s, view, sit, renderers)

    # partial / block: the preview message is the answer, it stays when the run ends.
    full = view
    if (hold := _held(s, view, sit)) is not None and renderers.draft(view) is not None:
        return s, hold
    if mode is Mode.block:
        s, view, rotation = _rotate(s, view, sit, renderers)
        if rotation is not None:
            return s, rotation
    want = renderers.draft(view)
    s, settled = _settle(s, want, rev, sit)
    if settled is not None:
        return s, settled
    if ending:
        s = replace(s, done_run=run_id, keep=True, fresh=False)
    return _ping(s, full, sit, renderers)


def _held(s: DraftState, view: View, sit: Situation) -> Wait | None:
    """No flash: a run's first draft waits `start_delay` from the run's start, so a quick
    turn shows only its answer (a draft /card asks for goes at once)."""
    if s.message_id is not None or s.fresh or view.run is not RunState.active or view.started_at is None:
        return None
    left = view.started_at + sit.conduct.start_delay - sit.now
    return Wait(left) if left > 0 else None


def _ping(s: DraftState, view: View, sit: Situation, renderers: Renderers) -> tuple[DraftState, Send | None]:
    """Once the draft shows the view: one ping for everything that newly needs a person,
    replying to the draft (a need that passed is forgotten, so it pings again later)."""
    kept, fresh = fresh_needs(s, view, sit.conduct, sit.mode)
    if kept != s.pinged:
        s = replace(s, pinged=kept)
    if not fresh:
        return s, None
    keys = tuple(n.key for n in fresh)
    payload = renderers.ping(view, fresh)
    out = shown(s, payload) if payload is not None else None
    if payload is None or out is None:
        return replace(s, pinged=(*s.pinged, *keys)), None  # nothing left to say it with
    return s, Send(payload, out, "ping", reply_to=s.message_id, needs=keys)


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


def _settle(s: DraftState, want: Payload | None, rev: int | None, sit: Situation) -> tuple[DraftState, Call | None]:
    call = next_call(s, want, rev)
    if call is None and s.fresh:
        s = replace(s, fresh=False)  # nothing to show again (or already shown fresh)
    if isinstance(call, Edit) and buried(s, sit.below, sit.conduct, sit.now, sit.ordered_ids):
        # Someone else's message landed below the draft: this update goes out as a new
        # draft under it (the old one is deleted once it is sent).
        want = call.payload
        if call.shown is want and want.opening is not None:
            return s, Send(want, want.opening, revision=rev, opens=True, repost=True)
        return s, Send(want, call.shown, revision=rev, repost=True)
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
        # A frozen chunk is a part of the answer, not the run: no state of its own (the
        # line that ends the run heads the last message only).
        chunk = View(owner=view.owner, activity=Activity(answer=answer[s.offset : cut].rstrip()))
        # A finished chunk is part of the answer: /card's `fresh` does not move it.
        call = next_call(replace(s, fresh=False), renderers.draft(chunk))
        if call is not None:
            return s, view, call
        s = replace(s, message_id=None, digest=None, kind=None, revision=None, offset=cut)
    tail = answer[s.offset :]
    if view.run not in TERMINAL:
        tail = completed_blocks(tail)
    return s, _with_answer(view, tail), None


__all__ = ["Renderers", "Situation", "block_cut", "completed_blocks", "decide", "on_follow"]
