"""Drafts, decided purely: from what a chat shows and what it should show, the next call.

A *draft* is the one live message an owner (agent + session) has in one chat topic.
`DraftState` is what the chat shows as far as we know — the message id, a digest of
the payload it shows, its kind (classic HTML or rich) — plus the bookkeeping of
runs: which run's end was handled, how much of a final answer was sent, where the
current `block` message starts in the answer, and an *intent* for a first send whose
outcome is not known yet.

`plan` looks at the state, the owner's View and the chat's situation and returns the
next Bot API call to make (or None when the chat already shows the right thing);
the outcome functions below fold the answer of that call back into the state. The
Telegram worker only performs calls and stores states; every decision is here, so
it can be tested without Telegram, Redis or a clock.

Duplicate-free first sends. Telegram has no idempotency keys: a `sendMessage` that
times out may or may not have created the message. Before a first send the worker
stores an `Intent` (what it sends and the highest message id known in the chat,
the *mark*). When the send succeeds or surely never reached the server, the intent
is dropped; when the outcome is unknown it stays, and nothing else is sent for this
draft until it is resolved: after a settle delay the ids after the mark are probed
with `editMessageText` carrying exactly the content that was sent. "message is not
modified" proves that our message landed there (it is adopted as the draft); "message
to edit not found" proves nothing of ours landed at or after that id (it is then
safe to send); "message can't be edited" is someone else's message, so the next id
is tried, at most `max_probes` of them. Ids we know we sent ourselves since (other
drafts, replies) are skipped, so a probe never overwrites one of our messages.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Literal, Protocol

from .activity import Activity
from .config import Mode
from .view import RunState, View

Kind = Literal["classic", "rich"]
Purpose = Literal["draft", "answer"]

RICH_METHOD = "sendRichMessage"
TERMINAL = frozenset({RunState.completed, RunState.failed, RunState.canceled})


def digest(method: str, params: Mapping[str, Any]) -> str:
    """A stable digest of a rendered payload: equal digests show the same message."""
    blob = json.dumps([method, params], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True, eq=False)
class Payload:
    """What a renderer returned: `{"method", "params"}` without chat or message id.

    `fallback` gives the plain-text rendering used when Telegram cannot parse the HTML
    (computed only then); it takes no part in the digest, which says what we *meant*
    to show."""

    method: str
    params: Mapping[str, Any]
    fallback: Callable[[], str | None] | None = field(default=None, repr=False)
    digest: str = field(default="", repr=False)

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", digest(self.method, self.params))

    @property
    def kind(self) -> Kind:
        return "rich" if self.method == RICH_METHOD else "classic"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Payload) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)

    @classmethod
    def of(
        cls, rendered: Mapping[str, Any] | None, fallback: Callable[[], str | None] | None = None
    ) -> Payload | None:
        if rendered is None:
            return None
        return cls(str(rendered["method"]), dict(rendered["params"]), fallback)


@dataclass(frozen=True)
class Intent:
    """A first send whose outcome is not known yet (see the module doc)."""

    purpose: Purpose
    index: int
    """Which part of the final answer (purpose "answer"); 0 for a draft."""
    method: str
    params: dict[str, Any]
    """Exactly what was sent (the plain-text fallback when that was sent), for probing."""
    digest: str
    """The digest of the payload we meant to show: what the draft shows once adopted."""
    mark: int
    """The highest message id known in the chat before the send; 0 when unknown."""
    at: float
    """Wall-clock time (seconds) from which probing waits `settle`: the send, then, once
    its outcome turned out unknown (a timeout), that moment — a request still in flight
    at the server may land until well after the client gave up."""
    probe: int = 0
    """The next message id to probe (mark + 1 at first)."""
    probes: int = 0
    """Probes made so far."""

    @property
    def kind(self) -> Kind:
        return "rich" if self.method == RICH_METHOD else "classic"


@dataclass(frozen=True)
class DraftState:
    message_id: int | None = None
    digest: str | None = None
    kind: Kind | None = None
    fresh: bool = False
    """/card asked to show the draft again as a new message at the bottom of the chat."""
    done_run: str | None = None
    """The run whose end was handled; its message (if kept) is that run's record."""
    keep: bool = False
    """After `done_run`, progress mode keeps showing the card (keepOnComplete, or the
    chat followed a session whose run had already ended)."""
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
    intent: Intent | None = None

    @property
    def settled(self) -> bool:
        """The message is the record of a finished run: left alone from now on."""
        return self.done_run is not None and self.keep

    def to_json(self) -> str:
        return json.dumps(asdict(self), ensure_ascii=False, separators=(",", ":"))

    @classmethod
    def from_json(cls, raw: str | None) -> DraftState:
        if not raw:
            return cls()
        data = json.loads(raw)
        intent = data.pop("intent", None)
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        return cls(**known, intent=Intent(**intent) if intent else None)


# --- the calls -----------------------------------------------------------------------


@dataclass(frozen=True)
class Send:
    payload: Payload
    purpose: Purpose = "draft"
    index: int = 0


@dataclass(frozen=True)
class Edit:
    message_id: int
    payload: Payload


@dataclass(frozen=True)
class Delete:
    message_id: int


@dataclass(frozen=True)
class Probe:
    """Re-apply an unsure send's exact content to a candidate message id."""

    message_id: int
    intent: Intent


@dataclass(frozen=True)
class Wait:
    """Nothing to call yet: look again after `seconds`."""

    seconds: float


Step = Send | Edit | Delete | Probe | Wait


def next_call(state: DraftState, want: Payload | None) -> Send | Edit | Delete | None:
    """The one call that moves the chat from `state` towards showing `want` (None: no draft)."""
    if want is None:
        return Delete(state.message_id) if state.message_id is not None else None
    if state.message_id is None:
        return Send(want)
    # A classic message cannot become a rich one (nor back) by editing, and /card wants
    # the draft at the bottom of the chat: both replace the message (delete, then send).
    if state.kind != want.kind or state.fresh:
        return Delete(state.message_id)
    if state.digest == want.digest:
        return None
    return Edit(state.message_id, want)


# --- the whole decision --------------------------------------------------------------


class Renderers(Protocol):
    def draft(self, view: View) -> Payload | None: ...

    def answer(self, markdown: str) -> list[Payload]: ...


@dataclass(frozen=True)
class Situation:
    """What the worker knows besides the state and the view."""

    following: bool
    mode: Mode
    run_id: str | None
    """The owner's current (or last) run id; None when no run was ever recorded."""
    keep_on_complete: bool = False
    block_chars: int = 3000
    now: float = 0.0
    settle: float = 3.0
    max_probes: int = 5
    known: frozenset[int] = frozenset()
    """Message ids after an intent's mark that we know we sent (other drafts, replies):
    not the lost message, so never probed — a probe must not overwrite them."""


def on_follow(state: DraftState, view: View, run_id: str | None) -> DraftState:
    """A chat starts following: a run that already ended is not announced again (no
    final answer), but its card is shown (`keep`)."""
    if view.run in TERMINAL and run_id and state.done_run != run_id:
        return replace(state, done_run=run_id, keep=True, answer_run=None, answer_sent=0)
    return state


def plan(state: DraftState, view: View, sit: Situation, renderers: Renderers) -> tuple[DraftState, Step | None]:
    """The state with the bookkeeping that needs no call applied, and the next call."""
    s = state

    # An unsure send first: nothing else is sent for this draft until we know.
    if s.intent is not None:
        intent = s.intent
        if intent.mark <= 0 or intent.probes >= sit.max_probes:
            # Nowhere to look (or looked far enough): give up and treat it as not landed.
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

    # A new run after one whose end was handled (or began to be): the finished run's
    # message stays as its record, the new run gets a new draft. An ending still under
    # way in progress/off mode is finished first (its draft deleted, its answer sent),
    # so that a new run never orphans the old draft nor loses the old answer.
    handled = s.done_run or s.answer_run
    if handled is not None and sit.run_id != handled:
        if s.answer is not None and s.answer_run is not None and s.done_run != s.answer_run:
            keep = sit.mode is Mode.progress and sit.keep_on_complete
            if not keep and s.message_id is not None:
                return s, Delete(s.message_id)
            parts = renderers.answer(s.answer)
            if s.answer_sent < len(parts):
                return s, Send(parts[s.answer_sent], "answer", s.answer_sent)
        s = DraftState(fresh=s.fresh)

    terminal = view.run in TERMINAL
    run_id = sit.run_id
    ending = terminal and run_id is not None and s.done_run != run_id
    finished = terminal and run_id is not None and s.done_run == run_id
    if ending and s.answer_run != run_id:
        # Noted before the first call of the ending, so that a new run starting while
        # the ending is under way cannot take over this run's message.
        s = replace(s, answer_run=run_id, answer_sent=0)
    mode = sit.mode

    if mode in (Mode.progress, Mode.off):
        if ending:
            assert run_id is not None
            answer = view.activity.answer or ""
            if s.answer != answer:
                s = replace(s, answer=answer)
            keep = mode is Mode.progress and sit.keep_on_complete
            call = next_call(s, renderers.draft(view) if keep else None)
            if call is not None:
                return s, call
            parts = renderers.answer(answer)
            if s.answer_sent < len(parts):
                return s, Send(parts[s.answer_sent], "answer", s.answer_sent)
            return replace(s, done_run=run_id, keep=keep, fresh=False, answer=None), None
        if finished and s.fresh and mode is Mode.progress:
            s = replace(s, keep=True)  # /card after the end: show the finished card again
        show = not finished or (mode is Mode.progress and s.keep)
        want = renderers.draft(view) if show else None
        return _settle(s, want)

    # partial / block: the preview message is the answer, it stays when the run ends.
    if mode is Mode.block:
        s, view, rotation = _rotate(s, view, sit, renderers)
        if rotation is not None:
            return s, rotation
    want = renderers.draft(view)
    s, settled = _settle(s, want)
    if settled is None and ending:
        s = replace(s, done_run=run_id, keep=True, fresh=False)
    return s, settled


def _settle(s: DraftState, want: Payload | None) -> tuple[DraftState, Step | None]:
    call = next_call(s, want)
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
) -> tuple[DraftState, View, Step | None]:
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
        s = replace(s, message_id=None, digest=None, kind=None, offset=cut)
    tail = answer[s.offset :]
    if view.run not in TERMINAL:
        tail = completed_blocks(tail)
    return s, _with_answer(view, tail), None


# --- outcomes ------------------------------------------------------------------------


def sending(state: DraftState, step: Send, method: str, params: dict[str, Any], mark: int, now: float) -> DraftState:
    """Before a first send: remember what goes out (see the module doc)."""
    intent = Intent(step.purpose, step.index, method, dict(params), step.payload.digest, mark, now, mark + 1)
    return replace(state, intent=intent)


def unknown(state: DraftState, now: float) -> DraftState:
    """The send's outcome turned out unknown (a timeout, a 5xx) at `now`: `settle` is
    counted from here, not from the send, so that probing never starts while the
    request may still be landing."""
    if state.intent is None:
        return state
    return replace(state, intent=replace(state.intent, at=now))


def sent(state: DraftState, step: Send, message_id: int) -> DraftState:
    if step.purpose == "answer":
        return replace(state, intent=None, answer_sent=step.index + 1)
    return replace(
        state, intent=None, message_id=message_id, digest=step.payload.digest, kind=step.payload.kind, fresh=False
    )


def not_sent(state: DraftState) -> DraftState:
    """The send surely never took effect (refused, or never reached the server)."""
    return replace(state, intent=None)


def skipped(state: DraftState, step: Send) -> DraftState:
    """A send Telegram refuses for good: an answer part is given up; a draft send keeps
    the state (the worker remembers the refused digest so as not to loop)."""
    if step.purpose == "answer":
        return replace(state, intent=None, answer_sent=step.index + 1)
    return replace(state, intent=None)


def edited(state: DraftState, step: Edit) -> DraftState:
    """The edit went through, or Telegram says the message already shows it."""
    return replace(state, digest=step.payload.digest, kind=step.payload.kind)


def gone(state: DraftState) -> DraftState:
    """The message was deleted (by us or a user) or can no longer be edited."""
    return replace(state, message_id=None, digest=None, kind=None)


def found(state: DraftState, intent: Intent, message_id: int) -> DraftState:
    """A probe proved the unsure send landed as `message_id`."""
    if intent.purpose == "answer":
        return replace(state, intent=None, answer_sent=intent.index + 1)
    return replace(state, intent=None, message_id=message_id, digest=intent.digest, kind=intent.kind, fresh=False)


def absent(state: DraftState) -> DraftState:
    """A probe proved nothing of ours landed at or after the probed id."""
    return replace(state, intent=None)


def foreign(state: DraftState, intent: Intent, message_id: int) -> DraftState:
    """The probed id is someone else's message: try the next one."""
    return replace(state, intent=replace(intent, probe=message_id + 1, probes=intent.probes + 1))


__all__ = [
    "Delete",
    "DraftState",
    "Edit",
    "Intent",
    "Payload",
    "Probe",
    "Renderers",
    "Send",
    "Situation",
    "Step",
    "Wait",
    "absent",
    "block_cut",
    "completed_blocks",
    "digest",
    "edited",
    "foreign",
    "found",
    "gone",
    "next_call",
    "not_sent",
    "on_follow",
    "plan",
    "sending",
    "sent",
    "skipped",
    "unknown",
]
