"""channels/draft/decide.py: the pure decisions shared by every channel — next call, run
ends, block rotation, unsure sends, and what each reply means — tested once, without
any channel.

A tiny simulated chat applies each call the way a chat service would and answers with
an `Outcome`, so a test can drive `decide`/`apply` until the chat shows what it should
and look at every call it took.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from hypothesis import given, settings
from hypothesis import strategies as st

from progresscast.channels.draft.calls import Delete, Edit, Probe, Send, Wait, next_call
from progresscast.channels.draft.decide import Situation, block_cut, completed_blocks, decide, on_follow
from progresscast.channels.draft.outcome import Outcome, OutcomeKind
from progresscast.channels.draft.replies import apply, begin
from progresscast.channels.draft.state import DraftState, Intent
from progresscast.config.base import Mode
from progresscast.model.activity import Activity
from progresscast.model.card import Card
from progresscast.model.needs import Need
from progresscast.model.owners import Owner
from progresscast.model.view import EndedRun, RunState, View
from progresscast.render.payload import Payload

OWNER = Owner("main", "t1")


def card(revision: int, *steps: tuple[str, str]) -> Card:
    return Card(
        sessionKey=OWNER.session_key,
        agentId=OWNER.agent_id,
        displayKey=OWNER.display_key,
        revision=revision,
        plan=[{"step": s, "status": st} for s, st in steps] or None,
        markdown=None if steps else "note",
        updatedAt="2026-01-01T00:00:00.000Z",
    )


def view(c: Card | None = None, run: RunState = RunState.none, **activity: object) -> View:
    return View(owner=OWNER, card=c, activity=Activity(**activity), run=run)


class Fake:
    """Renderers that show what a view holds, in a way tests can read back."""

    def __init__(self, *, rich: bool = False, mode: Mode = Mode.progress) -> None:
        self.rich = rich
        self.mode = mode

    def draft(self, v: View) -> Payload | None:
        if self.mode is Mode.off:
            return None
        parts = []
        if v.card is not None:
            parts.append(f"card r{v.card.revision}")
        if v.activity.headline and self.mode is Mode.progress:
            parts.append(f"headline {v.activity.headline}")
        if v.activity.answer and self.mode is not Mode.progress:
            parts.append(f"answer {v.activity.answer}")
        if not parts:
            return None
        text = " / ".join(parts)
        if v.paused:
            text += " (paused)"
        if v.activity.tools:
            text += " / tools " + ",".join(v.activity.tools)
        classic = Payload("sendMessage", {"text": text, "parse_mode": "HTML"}, "classic", lambda: plain(text))
        if self.rich:
            return Payload(
                "sendRichMessage",
                {"rich_message": {"blocks": [{"type": "paragraph", "text": text}]}},
                "rich",
                lambda: classic,
            )
        return classic

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        parts = [p for p in markdown.split("|") if p]
        if head:
            parts = [f"{head} / {parts[0]}", *parts[1:]] if parts else [head]
        return [
            Payload("sendMessage", {"text": f"answer: {p}"}, "classic", lambda p=p: plain(f"answer: {p}"))
            for p in parts
        ]

    def end_line(self, v: View) -> str | None:
        """No end lines here (tests/test_draft_conduct.py has them)."""
        return None

    def ping(self, v: View, needs: Sequence[Need]) -> Payload | None:
        return Payload("sendMessage", {"text": "ping " + ", ".join(n.key for n in needs)}, "classic")


def plain(text: str) -> Payload:
    """The fallbacks' last step: plain text (marked so tests can tell)."""
    return Payload("sendMessage", {"text": f"plain {text}"}, "classic")


def shown_text(payload: Payload) -> str:
    if payload.kind == "rich":
        return payload.params["rich_message"]["blocks"][0]["text"]
    return payload.params["text"]


@dataclass
class Chat:
    """What a chat shows: message id → text; ids only grow."""

    messages: dict[int, str] = field(default_factory=dict)
    next_id: int = 10
    calls: list[object] = field(default_factory=list)
    refuse: set[str] = field(default_factory=set)
    """Texts the chat refuses for their content (markup it cannot parse, say)."""

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id


@dataclass(frozen=True)
class Sit:
    """A Situation, and the run id the tests' views carry (the store puts it in the view)."""

    situation: Situation
    run_id: str | None = None


def plan(state: DraftState, v: View, s: Sit, renderers: Fake) -> tuple[DraftState, object]:
    if v.run_id is None and s.run_id is not None:
        v = replace(v, run_id=s.run_id)
    return decide(state, v, s.situation, renderers)


def sent(state: DraftState, call: Send, message_id: int) -> DraftState:
    return apply(state, call, Outcome(OutcomeKind.ok, message_id=message_id))


def drive(state: DraftState, v: View, s: Sit, renderers: Fake, chat: Chat, limit: int = 20) -> DraftState:
    """Decide and apply until nothing is left to do (as the worker does, minus a channel)."""
    for _ in range(limit):
        state, call = plan(state, v, s, renderers)
        if call is None:
            return state
        chat.calls.append(call)
        if isinstance(call, Send | Edit) and shown_text(call.shown) in chat.refuse:
            outcome = Outcome(OutcomeKind.refused_content)
        elif isinstance(call, Send):
            mid = chat.new_id()
            chat.messages[mid] = shown_text(call.shown)
            outcome = Outcome(OutcomeKind.ok, message_id=mid)
        elif isinstance(call, Edit):
            if call.message_id in chat.messages:
                chat.messages[call.message_id] = shown_text(call.shown)
                outcome = Outcome(OutcomeKind.ok, message_id=call.message_id)
            else:
                outcome = Outcome(OutcomeKind.gone)
        elif isinstance(call, Delete):
            chat.messages.pop(call.message_id, None)
            outcome = Outcome(OutcomeKind.ok)
        else:
            raise AssertionError(f"unexpected {call}")
        state = apply(state, call, outcome)
    raise AssertionError("decide did not settle")


def sit(run_id: str | None = None, **kw: object) -> Sit:
    base = dict(following=True, mode=Mode.progress, now=100.0, settle=3.0, max_probes=5)
    base.update(kw)
    return Sit(Situation(**base), run_id)  # type: ignore[arg-type]


def resit(s: Sit, run_id: str | None = None, **kw: object) -> Sit:
    return Sit(replace(s.situation, **kw), run_id if run_id is not None else s.run_id)  # type: ignore[arg-type]


# --- next_call ------------------------------------------------------------------------

P1 = Payload("sendMessage", {"text": "one"})
P2 = Payload("sendMessage", {"text": "two"})
RICH = Payload("sendRichMessage", {"rich_message": {"blocks": []}}, "rich")


def test_next_call_covers_every_case() -> None:
    assert next_call(DraftState(), None) is None
    assert next_call(DraftState(), P1) == Send(P1, P1)
    shown = DraftState(message_id=5, digest=P1.digest, kind="classic")
    assert next_call(shown, P1) is None  # never send what the chat already shows
    assert next_call(shown, P2) == Edit(5, P2, P2)
    assert next_call(shown, None) == Delete(5)
    assert next_call(shown, RICH) == Delete(5)  # classic → rich: replaced, not edited
    assert next_call(replace(shown, fresh=True), P1) == Delete(5)  # /card: moved down


def test_a_payload_with_an_opening_is_sent_as_it_then_edited_to_it_in_a_call_of_its_own() -> None:
    # Slack's finished plan display: a stream is started, and stopped by a second call.
    blocks = Payload("chat.postMessage", {"blocks": []}, "blocks")
    opening = Payload("chat.startStream", {"chunks": [1]}, "plan")
    stopped = Payload("chat.stopStream", {"chunks": [1]}, "plan", lambda: blocks, opening=opening)
    send = next_call(DraftState(), stopped)
    assert send == Send(stopped, opening, opens=True)
    assert isinstance(send, Send) and send.makes == opening.digest != stopped.digest
    state = apply(DraftState(), send, Outcome(OutcomeKind.ok, message_id="1.2"))
    assert state.digest == opening.digest and state.kind == "plan"
    assert next_call(state, stopped) == Edit("1.2", stopped, stopped)
    # An unsure opening, once found, is the opening too: it is still to be stopped.
    unsure = apply(begin(DraftState(), send, 0, 1.0), send, Outcome(OutcomeKind.unsure), 2.0)
    assert unsure.intent is not None and unsure.intent.digest == opening.digest
    # Its content refused: the payload's own fallback, in one call.
    refused = apply(DraftState(), send, Outcome(OutcomeKind.refused_content))
    assert next_call(refused, stopped) == Send(stopped, blocks)


def test_digest_ignores_the_fallback_and_key_order() -> None:
    a = Payload("sendMessage", {"text": "x", "parse_mode": "HTML"}, "classic", lambda: P1)
    b = Payload("sendMessage", {"parse_mode": "HTML", "text": "x"})
    assert a.digest == b.digest and a == b
    assert a.digest != Payload("sendMessage", {"text": "y", "parse_mode": "HTML"}).digest


def test_state_round_trips_through_json() -> None:
    intent = Intent("draft", 0, "sendMessage", {"text": "é"}, "abc", "classic", 7, 12.5, 8)
    state = DraftState(
        message_id=3, digest="d", kind="rich", done_run="r1", keep=True, offset=40, answer="a", intent=intent
    )
    assert DraftState.from_json(state.to_json()) == state
    assert DraftState.from_json(None) == DraftState()
    # Only what differs from the defaults is written: a draft's state is a few fields.
    assert json.loads(DraftState(message_id=3, revision=2).to_json()) == {"message_id": 3, "revision": 2}
    assert DraftState.from_json(DraftState().to_json()) == DraftState()


# --- progress mode ----------------------------------------------------------------------


def test_progress_edits_one_draft_and_deletes_it_on_clear() -> None:
    chat, r = Chat(), Fake()
    state = drive(DraftState(), view(card(1, ("a", "in_progress"))), sit(), r, chat)
    assert list(chat.messages.values()) == ["card r1"]
    state = drive(state, view(card(2, ("a", "completed"))), sit(), r, chat)
    assert list(chat.messages.values()) == ["card r2"]
    assert [type(c).__name__ for c in chat.calls] == ["Send", "Edit"]
    state = drive(state, view(None), sit(), r, chat)
    assert chat.messages == {} and state.message_id is None


def test_clear_keeps_other_activity() -> None:
    chat, r = Chat(), Fake()
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), headline="reading"), sit(), r, chat)
    mid = state.message_id
    state = drive(state, view(None, headline="reading"), sit(), r, chat)
    assert chat.messages == {mid: "headline reading"}


def test_run_end_deletes_the_draft_then_sends_the_answer_once() -> None:
    chat, r = Chat(), Fake()
    live = sit(run_id="r1")
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), live, r, chat)
    ended = view(card(2, ("a", "completed")), RunState.completed, answer="part one|part two")
    state = drive(state, ended, live, r, chat)
    assert list(chat.messages.values()) == ["answer: part one", "answer: part two"]
    assert [type(c).__name__ for c in chat.calls] == ["Send", "Delete", "Send", "Send"]
    assert state.done_run == "r1" and not state.keep
    calls = len(chat.calls)
    # More events about the finished run (or a restart reading the same state): nothing.
    state = drive(state, replace(ended, activity=Activity(headline="idle", answer="part one|part two")), live, r, chat)
    assert len(chat.calls) == calls


def test_card_after_the_end_shows_the_finished_card_again() -> None:
    chat, r = Chat(), Fake()
    done = DraftState(done_run="r1", answer_run="r1", answer_sent=1)
    ended = view(card(2, ("a", "completed")), RunState.completed, answer="x")
    assert plan(done, ended, sit(run_id="r1"), r)[1] is None
    state = drive(replace(done, fresh=True), ended, sit(run_id="r1"), r, chat)
    assert list(chat.messages.values()) == ["card r2"] and state.keep


def test_answer_parts_resume_where_they_stopped() -> None:
    chat, r = Chat(), Fake()
    state = DraftState(answer_run="r1", answer_sent=1)
    ended = view(None, RunState.completed, answer="one|two|three")
    state = drive(state, ended, sit(run_id="r1"), r, chat)
    assert list(chat.messages.values()) == ["answer: two", "answer: three"]


def test_keep_on_complete_keeps_the_checklist_and_a_new_run_gets_a_new_draft() -> None:
    chat, r = Chat(), Fake()
    s1 = sit(run_id="r1", keep_on_complete=True)
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), s1, r, chat)
    kept = state.message_id
    state = drive(state, view(card(2, ("a", "completed")), RunState.completed, answer="done"), s1, r, chat)
    assert chat.messages == {kept: "card r2", kept + 1: "answer: done"}
    assert state.settled
    s2 = resit(s1, run_id="r2")
    state = drive(state, view(card(3, ("b", "in_progress")), RunState.active), s2, r, chat)
    assert chat.messages[kept] == "card r2"  # the record of r1 is left alone
    assert state.message_id not in (None, kept) and chat.messages[state.message_id] == "card r3"


def test_a_new_run_during_the_ending_does_not_take_over_the_kept_message() -> None:
    # The kept message was edited for r1's end (answer_run noted), then r2 started
    # before the ending was finished.
    r = Fake()
    state = DraftState(message_id=4, digest="x", kind="classic", answer_run="r1")
    new, step = plan(state, view(card(3, ("b", "in_progress")), RunState.active), sit(run_id="r2"), r)
    assert isinstance(step, Send) and new.message_id is None


def test_a_new_run_before_the_ending_delete_still_deletes_the_old_draft_and_sends_its_answer() -> None:
    # r1 ended: its draft is to be deleted and its answer sent; r2 starts (replacing the
    # activity) before the paced Delete went out, or after it got a 429.
    chat, r = Chat(), Fake()
    r1 = sit(run_id="r1")
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), r1, r, chat)
    old = state.message_id
    state, step = plan(state, view(card(2, ("a", "completed")), RunState.completed, answer="the answer"), r1, r)
    assert step == Delete(old) and state.answer_run == "r1"
    r2 = view(card(3, ("b", "in_progress")), RunState.active)
    state, step = plan(state, r2, sit(run_id="r2"), r)
    assert step == Delete(old)  # not a second draft next to the old one
    state = drive(state, r2, sit(run_id="r2"), r, chat)
    assert list(chat.messages.values()) == ["answer: the answer", "card r3"]
    assert state.answer is None and state.message_id == max(chat.messages)
    calls = len(chat.calls)
    drive(state, r2, sit(run_id="r2"), r, chat)
    assert len(chat.calls) == calls


def test_a_new_run_after_the_old_draft_was_deleted_still_sends_the_old_answer() -> None:
    chat, r = Chat(), Fake()
    r1 = sit(run_id="r1")
    ended = view(card(2, ("a", "completed")), RunState.completed, answer="one|two")
    state, step = plan(DraftState(message_id=4, digest="x", kind="classic"), ended, r1, r)
    state = apply(state, step, Outcome(OutcomeKind.ok))  # the Delete went out
    state, step = plan(state, ended, r1, r)
    assert isinstance(step, Send) and step.purpose == "answer"
    state = sent(state, step, 5)  # part one sent; then r2 starts
    state = drive(state, view(card(3, ("b", "in_progress")), RunState.active), sit(run_id="r2"), r, chat)
    assert list(chat.messages.values()) == ["answer: two", "card r3"]


def test_following_a_finished_session_shows_its_card_without_its_answer() -> None:
    chat, r = Chat(), Fake()
    finished = view(card(2, ("a", "completed")), RunState.completed, answer="old answer")
    state = on_follow(DraftState(), replace(finished, run_id="r1"))
    state = drive(state, finished, sit(run_id="r1"), r, chat)
    assert list(chat.messages.values()) == ["card r2"]


def test_off_mode_shows_no_draft_but_sends_the_answer() -> None:
    chat, r = Chat(), Fake(mode=Mode.off)
    off = sit(mode=Mode.off, run_id="r1")
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), off, r, chat)
    assert chat.messages == {}
    drive(state, view(card(1, ("a", "completed")), RunState.completed, answer="done"), off, r, chat)
    assert list(chat.messages.values()) == ["answer: done"]


def test_switching_to_rich_replaces_the_message() -> None:
    chat = Chat()
    v = view(card(1, ("a", "in_progress")))
    state = drive(DraftState(), v, sit(), Fake(), chat)
    old = state.message_id
    state = drive(state, v, sit(), Fake(rich=True), chat)
    assert old not in chat.messages and state.kind == "rich" and len(chat.messages) == 1


def test_unfollow_deletes_a_live_draft_but_not_a_record() -> None:
    r = Fake()
    live = DraftState(message_id=4, digest="x", kind="classic")
    assert plan(live, view(card(1)), sit(following=False), r)[1] == Delete(4)
    record = replace(live, done_run="r1", keep=True)
    assert plan(record, view(card(1)), sit(following=False, run_id="r1"), r)[1] is None


def test_fresh_moves_the_draft_down_once() -> None:
    chat, r = Chat(), Fake()
    v = view(card(1, ("a", "in_progress")))
    state = drive(DraftState(), v, sit(), r, chat)
    old = state.message_id
    state = drive(replace(state, fresh=True), v, sit(), r, chat)
    assert state.message_id > old and list(chat.messages) == [state.message_id] and not state.fresh
    calls = len(chat.calls)
    drive(state, v, sit(), r, chat)
    assert len(chat.calls) == calls
    # Nothing to show: the flag is dropped, nothing is sent.
    state, step = plan(DraftState(fresh=True), view(None), sit(), r)
    assert step is None and not state.fresh


# --- partial and block ----------------------------------------------------------------


def test_partial_preview_stays_as_the_answer_when_the_run_ends() -> None:
    chat, r = Chat(), Fake(mode=Mode.partial)
    p = sit(mode=Mode.partial, run_id="r1")
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active, answer="so far"), p, r, chat)
    state = drive(state, view(card(1, ("a", "completed")), RunState.completed, answer="all of it"), p, r, chat)
    assert list(chat.messages.values()) == ["card r1 / answer all of it"] and state.settled
    state = drive(state, view(None, RunState.active, answer="next"), resit(p, run_id="r2"), r, chat)
    assert list(chat.messages.values()) == ["card r1 / answer all of it", "answer next"]


def test_block_cut_prefers_paragraphs_then_lines_then_spaces() -> None:
    assert block_cut("a" * 100, 0, 200) is None
    text = "a" * 150 + "\n\n" + "b" * 100
    assert block_cut(text, 0, 200) == 152
    text = "a" * 150 + "\n" + "b" * 100
    assert block_cut(text, 0, 200) == 151
    text = "a" * 120 + " " + "b" * 180
    assert block_cut(text, 0, 200) == 121
    assert block_cut("x" * 500, 0, 200) == 200  # no break in the second half: hard cut
    assert block_cut("a" * 10 + "\n\n" + "b" * 300, 0, 200) == 200  # a break too early is ignored
    assert block_cut("c" * 300 + "a" * 150 + "\n\n" + "b" * 100, 300, 200) == 452


def test_completed_blocks_only_while_writing() -> None:
    assert completed_blocks("one\n\ntwo") == "one"
    assert completed_blocks("one") == ""


def test_block_mode_rotates_to_new_messages() -> None:
    chat, r = Chat(), Fake(mode=Mode.block)
    b = sit(mode=Mode.block, run_id="r1", block_chars=200)
    first, second, third = "a" * 150, "b" * 150, "c" * 50
    state = drive(DraftState(), view(None, RunState.active, answer=f"{first}\n\n{second}\n\n{third}"), b, r, chat)
    texts = list(chat.messages.values())
    assert texts == [f"answer {first}", f"answer {second}"]  # the third paragraph is not complete yet
    assert state.offset == 2 * (150 + 2) and state.message_id is None  # both frozen
    state = drive(state, view(None, RunState.completed, answer=f"{first}\n\n{second}\n\n{third}!"), b, r, chat)
    assert list(chat.messages.values()) == [f"answer {first}", f"answer {second}", f"answer {third}!"]
    assert state.settled


def test_block_offset_resets_when_the_answer_starts_over() -> None:
    state, step = plan(
        DraftState(offset=500), view(None, RunState.active, answer="fresh\n\nstart"), sit(mode=Mode.block), Fake(mode=Mode.block)
    )
    assert state.offset == 0 and isinstance(step, Send)


# --- unsure first sends ----------------------------------------------------------------


def unsure(mark: int = 7, at: float = 100.0, purpose: str = "draft", index: int = 0) -> DraftState:
    intent = Intent(purpose, index, "sendMessage", {"text": "card r1"}, P1.digest, "classic", mark, at, mark + 1)  # type: ignore[arg-type]
    return DraftState(intent=intent)


def test_an_unsure_send_waits_then_probes_the_ids_after_the_mark() -> None:
    r, v = Fake(), view(card(1, ("a", "in_progress")))
    state = unsure()
    _, step = plan(state, v, sit(now=101.0), r)
    assert step == Wait(2.0)
    _, step = plan(state, v, sit(now=104.0), r)
    assert isinstance(step, Probe) and step.message_id == 8


def test_settle_counts_from_when_the_outcome_became_unknown() -> None:
    # Sent at 100, timed out at 105 (read timeout > settle): no probe before 108.
    r, v = Fake(), view(card(1, ("a", "in_progress")))
    first = unsure(at=100.0)
    state = apply(first, Send(P1, P1), Outcome(OutcomeKind.unsure), 105.0)
    _, step = plan(state, v, sit(now=105.0), r)
    assert step == Wait(3.0)
    _, step = plan(state, v, sit(now=108.0), r)
    assert isinstance(step, Probe)
    assert apply(DraftState(), Send(P1, P1), Outcome(OutcomeKind.unsure), 1.0) == DraftState()


def test_a_probe_that_finds_the_message_adopts_it() -> None:
    state = unsure()
    assert state.intent is not None
    adopted = apply(state, Probe(8, state.intent), Outcome(OutcomeKind.found, message_id=8))
    assert (adopted.message_id, adopted.digest, adopted.kind, adopted.intent) == (8, P1.digest, "classic", None)
    answer = unsure(purpose="answer", index=2)
    assert answer.intent is not None
    assert apply(answer, Probe(9, answer.intent), Outcome(OutcomeKind.found)).answer_sent == 3
    # A probe that hit trouble decides nothing: the same probe comes again.
    for kind in (OutcomeKind.rate_limited, OutcomeKind.transient, OutcomeKind.unsure):
        assert apply(state, Probe(8, state.intent), Outcome(kind)) == state


def test_probes_skip_foreign_messages_and_give_up_after_max_probes() -> None:
    r, v = Fake(), view(card(1, ("a", "in_progress")))
    state = unsure(mark=7)
    for expected in range(8, 13):
        _, step = plan(state, v, sit(now=200.0), r)
        assert isinstance(step, Probe) and step.message_id == expected
        state = apply(state, step, Outcome(OutcomeKind.foreign))
    new, step = plan(state, v, sit(now=200.0), r)
    assert new.intent is None and isinstance(step, Send)


def test_probes_skip_ids_we_know_we_sent() -> None:
    r, v = Fake(), view(card(1, ("a", "in_progress")))
    _, step = plan(unsure(mark=7), v, sit(now=200.0, known=frozenset({8, 9, 11})), r)
    assert isinstance(step, Probe) and step.message_id == 10


def test_an_absent_probe_sends_again() -> None:
    r, v = Fake(), view(card(1, ("a", "in_progress")))
    state = unsure()
    assert state.intent is not None
    state, step = plan(apply(state, Probe(8, state.intent), Outcome(OutcomeKind.absent)), v, sit(now=200.0), r)
    assert isinstance(step, Send)


def test_an_unsure_send_with_no_known_message_id_is_probed_from_the_first_id() -> None:
    # Nothing was known in the chat (a config follow before anyone spoke): the send is
    # looked for from id 1, never blindly repeated.
    r, v = Fake(), view(card(1, ("a", "in_progress")))
    state, step = plan(unsure(mark=0), v, sit(now=200.0), r)
    assert state.intent is not None and step == Probe(1, state.intent)


# --- lifecycle: runs that end unseen, cards written after the end ------------------------


def test_a_run_that_ended_unseen_still_gets_its_answer_once() -> None:
    # r1's draft is shown; r1 ends and r2 starts before the draft looks again (within one
    # pacing interval): the store kept r1's ending, so its draft goes and its answer is sent.
    chat, r = Chat(), Fake()
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), sit(run_id="r1"), r, chat)
    old = state.message_id
    assert state.seen_run == "r1"
    r2 = replace(
        view(card(1, ("a", "in_progress")), RunState.active),
        previous=EndedRun("r1", RunState.completed, "the answer"),
    )
    state = drive(state, r2, sit(run_id="r2"), r, chat)
    assert old not in chat.messages
    assert list(chat.messages.values()) == ["answer: the answer", "card r1"]
    calls = len(chat.calls)
    state = drive(state, r2, sit(run_id="r2"), r, chat)  # once: nothing more
    assert len(chat.calls) == calls and state.done_run is None and state.seen_run == "r2"


def test_a_previous_run_this_draft_never_saw_is_not_announced() -> None:
    chat, r = Chat(), Fake()
    r2 = replace(
        view(card(1, ("a", "in_progress")), RunState.active), previous=EndedRun("r1", RunState.completed, "old")
    )
    drive(DraftState(), r2, sit(run_id="r2"), r, chat)
    assert list(chat.messages.values()) == ["card r1"]


def late(c: Card, **activity: object) -> View:
    """A card written after run r1 ended (the store says so: `after_end`)."""
    return replace(view(c, RunState.completed, **activity), run_id="r1", paused=True, after_end=True)


def test_a_card_written_after_the_run_ended_gets_a_new_draft_which_the_next_run_takes_over() -> None:
    chat, r = Chat(), Fake()
    s1 = sit(run_id="r1")
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), s1, r, chat)
    state = drive(state, view(card(1, ("a", "in_progress")), RunState.completed, answer="done"), s1, r, chat)
    assert list(chat.messages.values()) == ["answer: done"]
    state = drive(state, late(card(2, ("a", "in_progress"), ("b", "pending"))), s1, r, chat)
    assert list(chat.messages.values()) == ["answer: done", "card r2 (paused)"]
    draft = state.message_id
    state = drive(state, late(card(3, ("a", "completed"), ("b", "pending"))), s1, r, chat)
    assert chat.messages[draft] == "card r3 (paused)" and len(chat.messages) == 2  # edited in place
    state = drive(state, view(card(4, ("b", "in_progress")), RunState.active), sit(run_id="r2"), r, chat)
    assert chat.messages[draft] == "card r4" and len(chat.messages) == 2  # the next run took it over
    state = drive(state, view(card(4, ("b", "completed")), RunState.completed, answer="two"), sit(run_id="r2"), r, chat)
    assert list(chat.messages.values()) == ["answer: done", "answer: two"]


def test_a_late_card_leaves_a_kept_record_alone() -> None:
    chat, r = Chat(), Fake()
    s1 = sit(run_id="r1", keep_on_complete=True)
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), s1, r, chat)
    record = state.message_id
    state = drive(state, view(card(1, ("a", "completed")), RunState.completed), s1, r, chat)
    state = drive(state, late(card(2, ("b", "in_progress"))), s1, r, chat)
    assert chat.messages[record] == "card r1"
    assert state.message_id != record and chat.messages[state.message_id] == "card r2 (paused)"


def test_chats_that_followed_at_different_times_show_a_late_card_the_same_way() -> None:
    r = Fake()
    before, after = Chat(), Chat()
    s1 = sit(run_id="r1")
    a = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), s1, r, before)
    a = drive(a, view(card(1, ("a", "in_progress")), RunState.completed, answer="x"), s1, r, before)
    latest = late(card(2, ("a", "in_progress")))
    a = drive(a, latest, s1, r, before)
    b = drive(on_follow(DraftState(), latest), latest, s1, r, after)
    assert before.messages[a.message_id] == after.messages[b.message_id] == "card r2 (paused)"
    # Both follow the next write the same way: an edit of their draft.
    nxt = late(card(3, ("a", "completed")))
    a, b = drive(a, nxt, s1, r, before), drive(b, nxt, s1, r, after)
    assert before.messages[a.message_id] == after.messages[b.message_id] == "card r3 (paused)"
    assert isinstance(before.calls[-1], Edit) and isinstance(after.calls[-1], Edit)


# --- refused content: the renderer's fallbacks, remembered with the draft ----------------


def test_refused_content_goes_down_the_fallbacks_and_is_remembered() -> None:
    r = Fake(rich=True)
    chat = Chat(refuse={"card r1"})  # the rich payload and its classic fallback both show "card r1"
    state = drive(DraftState(), view(card(1, ("a", "in_progress"))), sit(), r, chat)
    assert list(chat.messages.values()) == ["plain card r1"] and state.level == 2
    assert state.kind == "classic" and state.digest == r.draft(view(card(1, ("a", "in_progress")))).digest
    # Stored with the draft: after a restart (a JSON round trip) nothing is tried again.
    state = DraftState.from_json(state.to_json())
    calls = len(chat.calls)
    state = drive(state, view(card(1, ("a", "in_progress"))), sit(), r, chat)
    assert len(chat.calls) == calls
    # New content starts from the top again (rich), replacing the classic message.
    chat.refuse.clear()
    state = drive(state, view(card(2, ("a", "completed"))), sit(), r, chat)
    assert list(chat.messages.values()) == ["card r2"] and state.kind == "rich"


def test_content_with_no_fallback_left_is_given_up_until_it_changes() -> None:
    r = Fake()
    chat = Chat(refuse={"card r1", "plain card r1"})
    state = drive(DraftState(), view(card(1, ("a", "in_progress"))), sit(), r, chat)
    assert chat.messages == {} and len(chat.calls) == 2
    state = drive(state, view(card(2, ("a", "in_progress"))), sit(), r, chat)
    assert list(chat.messages.values()) == ["card r2"]


def test_a_payload_refused_for_good_is_not_tried_again_until_it_changes() -> None:
    # `refused` (not a content refusal: no fallback applies) gives up on that payload.
    gave_up = apply(DraftState(), Send(P1, P1), Outcome(OutcomeKind.refused))
    assert next_call(gave_up, P1) is None
    assert next_call(gave_up, P2) == Send(P2, P2)
    shown = DraftState(message_id=5, digest=P1.digest, kind="classic")
    gave_up = apply(shown, Edit(5, P2, P2), Outcome(OutcomeKind.refused))
    assert next_call(gave_up, P2) is None and next_call(gave_up, None) == Delete(5)


def test_a_refused_answer_gets_the_same_plain_fallback_as_a_draft() -> None:
    chat, r = Chat(refuse={"answer: x"}), Fake()
    s1 = sit(run_id="r1")
    state = drive(DraftState(), view(card(1, ("a", "in_progress")), RunState.active), s1, r, chat)
    drive(state, view(card(1, ("a", "completed")), RunState.completed, answer="x|y"), s1, r, chat)
    assert list(chat.messages.values()) == ["plain answer: x", "answer: y"]


def test_replies_are_read_by_kind() -> None:
    base = DraftState(message_id=5, digest=P1.digest, kind="classic")
    edit = Edit(5, P2, P2, revision=2)
    assert apply(base, edit, Outcome(OutcomeKind.not_modified)).digest == P2.digest
    for kind in (OutcomeKind.gone, OutcomeKind.locked):
        assert apply(base, edit, Outcome(kind)).message_id is None
    for kind in (OutcomeKind.rate_limited, OutcomeKind.transient, OutcomeKind.unsure, OutcomeKind.unsupported):
        assert apply(base, edit, Outcome(kind)) == base
    assert apply(base, edit, Outcome(OutcomeKind.refused)).given_up == P2.digest
    assert apply(base, Delete(5), Outcome(OutcomeKind.refused)).message_id is None
    assert apply(base, Delete(5), Outcome(OutcomeKind.transient)) == base
    send = Send(P1, P1)
    assert apply(DraftState(), send, Outcome(OutcomeKind.refused)).given_up == P1.digest
    answer = Send(P1, P1, "answer", 2)
    assert apply(DraftState(), answer, Outcome(OutcomeKind.refused)).answer_sent == 3


# --- a property: whatever the sequence, one message showing the last thing --------------

steps_strategy = st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans()), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(steps_strategy)
def test_any_sequence_ends_with_one_draft_showing_the_latest(seq: list[tuple[bool, bool, bool]]) -> None:
    # Each step is a new write (a card, or a clear), in either kind, sometimes after the
    # user deleted the draft (noticed at the next write: Telegram tells no one).
    chat, state = Chat(), DraftState()
    for revision, (has_card, rich, user_deletes) in enumerate(seq, start=1):
        v = view(card(revision, ("a", "in_progress")) if has_card else None)
        if user_deletes and state.message_id in chat.messages:
            del chat.messages[state.message_id]
        state = drive(state, v, sit(), Fake(rich=rich), chat)
        want = Fake(rich=rich).draft(v)
        if want is None:
            assert chat.messages == {}
        else:
            assert list(chat.messages.values()) == [shown_text(want)]
            assert state.message_id in chat.messages and state.digest == want.digest
