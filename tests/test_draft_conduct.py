"""channels/draft/decide.py with channels/draft/conduct.py: pings, the line that ends a run, the
start delay and staying at the bottom — decided purely, tested once for every channel
on the simulated chat of tests/test_drafts.py."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from progresscast.channels.draft.calls import Delete, Edit, Send, Wait
from progresscast.channels.draft.conduct import Conduct
from progresscast.channels.draft.decide import on_follow
from progresscast.channels.draft.outcome import Outcome, OutcomeKind
from progresscast.channels.draft.replies import apply, begin
from progresscast.channels.draft.state import DraftState
from progresscast.config.base import Mode
from progresscast.model.needs import Need, Notify
from progresscast.model.view import RunState, View
from progresscast.render.payload import Payload
from test_drafts import Chat, Fake, card, drive, plan, resit, sit, view


class Ends(Fake):
    """Fake renderers with end lines and pings that say what they name."""

    def end_line(self, v: View) -> str | None:
        if v.run not in (RunState.completed, RunState.failed, RunState.canceled):
            return None
        if v.card is None and not v.activity.answer:
            return None
        blocked = [s.step for s in (v.card.plan or ()) if s.status == "blocked"] if v.card else []
        return f"end {v.run.value}" + (f" blocked {','.join(blocked)}" if blocked else "")

    def ping(self, v: View, needs: Sequence[Need]) -> Payload | None:
        if any(n.kind in (Notify.failed, Notify.done) for n in needs):
            return Payload("sendMessage", {"text": f"ping {self.end_line(v)}"})
        return Payload("sendMessage", {"text": "ping needs you: " + ", ".join(n.text for n in needs)})


def pings(chat: Chat) -> list[Send]:
    return [c for c in chat.calls if isinstance(c, Send) and c.purpose == "ping"]


def blocked_card(revision: int, *blocked: str) -> object:
    return card(revision, ("Fetch", "completed"), *((b, "blocked") for b in blocked), ("Repair", "pending"))


def test_a_blocked_step_pings_once_as_a_reply_to_the_draft() -> None:
    chat, r, s = Chat(), Ends(), sit("r1")
    state = drive(DraftState(), view(card(1, ("Confirm access", "in_progress")), RunState.active), s, r, chat)
    assert pings(chat) == []
    state = drive(state, view(blocked_card(2, "Confirm access"), RunState.active), s, r, chat)
    [ping] = pings(chat)
    assert ping.reply_to == state.message_id  # the live draft, already showing the blocked step
    assert chat.calls.index(ping) > max(i for i, c in enumerate(chat.calls) if isinstance(c, Edit))
    assert chat.messages[max(chat.messages)] == "ping needs you: Confirm access"
    assert state.pinged == ("blocked:Confirm access",)
    # The same card written again (and another revision with the same blocked step): nothing.
    state = drive(state, view(blocked_card(2, "Confirm access"), RunState.active), s, r, chat)
    state = drive(state, view(blocked_card(3, "Confirm access"), RunState.active, headline="waiting"), s, r, chat)
    assert len(pings(chat)) == 1


def test_blocked_again_after_it_passed_pings_again() -> None:
    chat, r, s = Chat(), Ends(), sit("r1")
    state = drive(DraftState(), view(blocked_card(1, "Confirm access"), RunState.active), s, r, chat)
    assert len(pings(chat)) == 1
    state = drive(state, view(card(2, ("Confirm access", "in_progress")), RunState.active), s, r, chat)
    assert state.pinged == ()  # passed: forgotten
    state = drive(state, view(blocked_card(3, "Confirm access"), RunState.active), s, r, chat)
    assert len(pings(chat)) == 2


def test_several_steps_blocked_at_once_make_one_ping_naming_them_all() -> None:
    chat, r, s = Chat(), Ends(), sit("r1")
    state = drive(DraftState(), view(blocked_card(1, "A", "B"), RunState.active), s, r, chat)
    [ping] = pings(chat)
    assert ping.needs == ("blocked:A", "blocked:B")
    assert "A, B" in ping.payload.params["text"]
    # A third one later: only it is named.
    drive(state, view(card(2, ("A", "blocked"), ("B", "blocked"), ("C", "blocked")), RunState.active), s, r, chat)
    assert pings(chat)[-1].needs == ("blocked:C",)


def test_waiting_for_input_pings_and_only_what_notify_names_does() -> None:
    chat, r = Chat(), Ends()
    quiet = sit("r1", conduct=Conduct(notify=frozenset({Notify.failed})))
    state = drive(DraftState(), view(blocked_card(1, "A"), RunState.active, attention="Waiting for input: ok?"),
                  quiet, r, chat)
    assert pings(chat) == []
    chat2 = Chat()
    drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active, attention="Waiting for input: ok?"),
          sit("r1"), r, chat2)
    [ping] = pings(chat2)
    assert ping.needs == ("input",) and "Waiting for input: ok?" in ping.payload.params["text"]
    assert state.pinged == ()


def test_a_ping_that_could_not_be_sent_is_retried_until_what_it_announces_has_passed() -> None:
    r, s = Ends(), sit("r1")
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active), s, r, Chat())
    blocked = view(blocked_card(2, "A"), RunState.active)
    state, edit = plan(state, blocked, s, r)
    assert isinstance(edit, Edit)
    state = apply(state, edit, Outcome(OutcomeKind.ok, message_id=edit.message_id))
    state, ping = plan(state, blocked, s, r)
    assert isinstance(ping, Send) and ping.purpose == "ping"
    for kind in (OutcomeKind.rate_limited, OutcomeKind.transient):
        state = apply(state, ping, Outcome(kind))
        state, again = plan(state, blocked, s, r)
        assert again == ping  # still owed
    # Unblocked before it could go: nothing to announce any more.
    state, after = plan(state, view(card(3, ("A", "in_progress")), RunState.active), s, r)
    assert not (isinstance(after, Send) and after.purpose == "ping")


def test_an_unsure_ping_is_probed_for_and_not_sent_twice() -> None:
    r, s = Ends(), sit("r1")
    blocked = view(blocked_card(2, "A"), RunState.active)
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active), s, r, Chat())
    state, edit = plan(state, blocked, s, r)
    state = apply(state, edit, Outcome(OutcomeKind.ok, message_id=edit.message_id))
    state, ping = plan(state, blocked, s, r)
    assert isinstance(ping, Send)
    from progresscast.channels.draft.calls import Probe
    from progresscast.channels.draft.replies import begin

    state = apply(begin(state, ping, 20, 100.0), ping, Outcome(OutcomeKind.unsure), 100.0)
    state, wait = plan(state, blocked, s, r)
    assert isinstance(wait, Wait)
    state, probe = plan(state, blocked, replace(s, situation=replace(s.situation, now=200.0)), r)
    assert isinstance(probe, Probe) and probe.intent.purpose == "ping"
    state = apply(state, probe, Outcome(OutcomeKind.found, message_id=21))
    assert state.pinged == ("blocked:A",) and state.intent is None
    assert plan(state, blocked, s, r)[1] is None


def test_a_new_follower_is_not_pinged_for_what_needed_a_person_before_it_followed() -> None:
    chat, r, s = Chat(), Ends(), sit("r1")
    v = view(blocked_card(1, "A"), RunState.active)
    drive(on_follow(DraftState(), v), v, s, r, chat)
    assert pings(chat) == [] and len(chat.messages) == 1


def test_a_failed_run_in_progress_mode_ends_with_one_line_that_is_its_ping() -> None:
    chat, r, s = Chat(), Ends(), sit("r1")
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active), s, r, chat)
    state = drive(state, view(blocked_card(2, "A"), RunState.failed, answer="gave up"), s, r, chat)
    # The draft is gone, the answer carries the end line, which names the blocked step:
    # that message notifies, so it is the ping for all of it.
    assert list(chat.messages.values()) == ["answer: end failed blocked A / gave up"]
    assert pings(chat) == []
    assert set(state.pinged) == {"blocked:A", "failed:r1"}
    assert drive(state, view(blocked_card(2, "A"), RunState.failed, answer="gave up"), s, r, chat) == state


def test_a_run_that_ends_without_an_answer_keeps_its_end_line() -> None:
    chat, r, s = Chat(), Ends(), sit("r1")
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active), s, r, chat)
    drive(state, view(card(2, ("A", "completed")), RunState.completed), s, r, chat)
    assert list(chat.messages.values()) == ["answer: end completed"]


def test_a_failed_run_in_partial_mode_pings_a_reply_to_the_preview() -> None:
    chat, r, s = Chat(), Ends(mode=Mode.partial), sit("r1", mode=Mode.partial)
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active, answer="so far"), s, r, chat)
    preview = state.message_id
    state = drive(state, view(card(2, ("A", "in_progress")), RunState.failed, answer="so far"), s, r, chat)
    [ping] = pings(chat)
    assert ping.reply_to == preview and ping.payload.params["text"] == "ping end failed"
    assert preview in chat.messages


def test_done_pings_only_where_the_answer_is_not_a_message_of_its_own() -> None:
    every = Conduct(notify=frozenset(Notify))
    chat, r = Chat(), Ends(mode=Mode.partial)
    s = sit("r1", mode=Mode.partial, conduct=every)
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active, answer="x"), s, r, chat)
    drive(state, view(card(2, ("A", "completed")), RunState.completed, answer="x"), s, r, chat)
    assert [p.needs for p in pings(chat)] == [("done:r1",)]
    chat, r = Chat(), Ends()
    s = sit("r1", conduct=every)
    state = drive(DraftState(), view(card(1, ("A", "in_progress")), RunState.active), s, r, chat)
    drive(state, view(card(2, ("A", "completed")), RunState.completed, answer="x"), s, r, chat)
    assert pings(chat) == [] and list(chat.messages.values()) == ["answer: end completed / x"]


def test_pinged_state_round_trips_and_a_step_still_blocked_in_the_next_run_is_no_news() -> None:
    chat, r = Chat(), Ends()
    state = drive(DraftState(), view(blocked_card(1, "A"), RunState.active), sit("r1"), r, chat)
    assert DraftState.from_json(state.to_json()) == state
    state = drive(state, view(blocked_card(1, "A"), RunState.completed, answer="ok"), sit("r1"), r, chat)
    drive(state, view(blocked_card(1, "A"), RunState.active), sit("r2"), r, chat)
    assert len(pings(chat)) == 1


def test_a_draft_send_is_a_draft_and_never_deletes_before_its_ping() -> None:
    # (Silent sends are the channel's part: drafts are Sends with purpose "draft".)
    chat, r, s = Chat(), Ends(), sit("r1")
    drive(DraftState(), view(blocked_card(1, "A"), RunState.active), s, r, chat)
    kinds = [(type(c).__name__, getattr(c, "purpose", None)) for c in chat.calls]
    assert kinds == [("Send", "draft"), ("Send", "ping")]
    assert not any(isinstance(c, Delete) for c in chat.calls)


# --- no flash: the start delay -------------------------------------------------------------


def started(v: View, at: float) -> View:
    return replace(v, started_at=at)


def test_a_runs_first_draft_waits_the_start_delay_from_the_runs_start() -> None:
    r, s = Ends(), sit("r1", now=100.0, conduct=Conduct(start_delay=1.5))
    v = started(view(card(1, ("A", "in_progress")), RunState.active), 99.0)
    state, call = plan(DraftState(), v, s, r)
    assert call == Wait(0.5)
    later = replace(s, situation=replace(s.situation, now=100.6))
    state, call = plan(state, v, later, r)
    assert isinstance(call, Send) and call.purpose == "draft"
    # Once there is a draft, updates go out at once.
    state = apply(state, call, Outcome(OutcomeKind.ok, message_id=5))
    _, edit = plan(state, started(view(card(2, ("A", "completed")), RunState.active), 99.0), s, r)
    assert isinstance(edit, Edit)


def test_a_run_shorter_than_the_start_delay_shows_only_its_answer_and_end_line() -> None:
    chat, r = Chat(), Ends()
    s = sit("r1", now=100.0, conduct=Conduct(start_delay=1.5))
    state, call = plan(DraftState(), started(view(card(1, ("A", "in_progress")), RunState.active), 99.9), s, r)
    assert isinstance(call, Wait)
    drive(state, started(view(card(2, ("A", "completed")), RunState.completed, answer="done"), 99.9), s, r, chat)
    assert [type(c).__name__ for c in chat.calls] == ["Send"]
    assert list(chat.messages.values()) == ["answer: end completed / done"]


def test_no_start_delay_without_a_run_for_card_or_after_it() -> None:
    r, s = Ends(), sit(None, now=100.0, conduct=Conduct(start_delay=1.5))
    _, call = plan(DraftState(), view(card(1, ("A", "in_progress"))), s, r)  # a session without runs
    assert isinstance(call, Send)
    fresh = DraftState(fresh=True)  # /card asked for it
    _, call = plan(fresh, started(view(card(1, ("A", "in_progress")), RunState.active), 99.9), sit("r1", now=100.0), r)
    assert isinstance(call, Send)


# --- at the bottom -----------------------------------------------------------------------


def shown_at(message_id: int, r: Fake, v: View, s: object) -> DraftState:
    state, send = plan(DraftState(), v, s, r)  # type: ignore[arg-type]
    assert isinstance(send, Send)
    return apply(state, send, Outcome(OutcomeKind.ok, message_id=message_id))


def test_a_message_below_the_draft_moves_the_next_update_to_the_bottom_new_first() -> None:
    r = Ends()
    s = sit("r1", now=100.0, conduct=Conduct(repost_interval=10.0), below=12)
    state = shown_at(10, r, view(card(1, ("A", "in_progress")), RunState.active), s)
    v2 = view(card(2, ("A", "completed"), ("B", "in_progress")), RunState.active)
    state, send = plan(state, v2, s, r)
    assert isinstance(send, Send) and send.purpose == "draft" and send.reply_to is None
    state = apply(state, send, Outcome(OutcomeKind.ok, message_id=13), 100.0)
    assert state.message_id == 13 and state.stale == 10 and state.reposted_at == 100.0
    state, delete = plan(state, v2, s, r)
    assert delete == Delete(10, stale=True)
    state = apply(state, delete, Outcome(OutcomeKind.ok))
    assert state.stale is None and state.message_id == 13
    assert plan(state, v2, s, r)[1] is None
    # Someone writes again at once: within the interval the draft is edited in place.
    soon = resit(s, now=105.0, below=14)
    _, edit = plan(state, view(card(3, ("B", "completed")), RunState.active), soon, r)
    assert isinstance(edit, Edit) and edit.message_id == 13
    # After the interval, the next update moves it again.
    later = resit(s, now=110.5, below=14)
    _, again = plan(state, view(card(3, ("B", "completed")), RunState.active), later, r)
    assert isinstance(again, Send) and again.purpose == "draft"


def test_no_repost_without_an_update_a_newer_message_or_stay_at_bottom() -> None:
    r = Ends()
    v = view(card(1, ("A", "in_progress")), RunState.active)
    v2 = view(card(2, ("A", "completed")), RunState.active)
    s = sit("r1", now=100.0, below=12)
    state = shown_at(10, r, v, s)
    assert plan(state, v, s, r)[1] is None  # nothing new to show: it stays where it is
    assert isinstance(plan(state, v2, resit(s, below=9), r)[1], Edit)  # the message is above the draft
    assert isinstance(plan(state, v2, resit(s, below=None), r)[1], Edit)
    off = resit(s, conduct=Conduct(stay_at_bottom=False))
    assert isinstance(plan(state, v2, off, r)[1], Edit)


def test_where_ids_have_no_order_a_message_is_below_when_posted_after_the_draft_was_sent() -> None:
    # Matrix: event ids say nothing of order; what was heard is when the message was
    # posted (ms), compared with when the draft's send left.
    r = Ends()
    v = view(card(1, ("A", "in_progress")), RunState.active)
    v2 = view(card(2, ("A", "completed")), RunState.active)
    s = sit("r1", now=100.0, ordered_ids=False)
    state, send = plan(DraftState(), v, s, r)
    assert isinstance(send, Send)
    state = apply(begin(state, send, 0, 100.0), send, Outcome(OutcomeKind.ok, message_id="$d1"), 100.4)
    assert state.sent_at == 100.0  # when the request left, not when its answer came
    assert isinstance(plan(state, v2, resit(s, now=101.0, below=99_900), r)[1], Edit)  # posted before the draft
    later = resit(s, now=101.0, below=100_200)
    state, repost = plan(state, v2, later, r)
    assert isinstance(repost, Send) and repost.repost
    state = apply(begin(state, repost, 0, 101.0), repost, Outcome(OutcomeKind.ok, message_id="$d2"), 101.2)
    assert state.message_id == "$d2" and state.stale == "$d1" and state.sent_at == 101.0
    state, delete = plan(state, v2, later, r)
    assert delete == Delete("$d1", stale=True)
    state = apply(state, delete, Outcome(OutcomeKind.ok))
    # The same message heard, past the interval: the draft is already under it.
    v3 = view(card(3, ("A", "completed"), ("B", "in_progress")), RunState.active)
    assert isinstance(plan(state, v3, resit(later, now=200.0), r)[1], Edit)
    # A mark that is no time (an id, where the channel says ids have no order) moves nothing.
    assert isinstance(plan(state, v3, resit(later, now=200.0, below="$x"), r)[1], Edit)
    # With ordered ids, the same state compares ids: "$…" ones tell nothing.
    assert isinstance(plan(state, v3, resit(later, now=200.0, ordered_ids=True, below=200_000), r)[1], Edit)


def test_a_stale_draft_that_cannot_be_deleted_is_forgotten_and_an_unsure_repost_is_probed() -> None:
    r = Ends()
    s = sit("r1", now=100.0, below=12)
    state = shown_at(10, r, view(card(1, ("A", "in_progress")), RunState.active), s)
    v2 = view(card(2, ("A", "completed")), RunState.active)
    state, send = plan(state, v2, s, r)
    assert isinstance(send, Send)
    from progresscast.channels.draft.calls import Probe
    from progresscast.channels.draft.replies import begin

    unsure = apply(begin(state, send, 12, 100.0), send, Outcome(OutcomeKind.unsure), 100.0)
    assert unsure.message_id == 10 and unsure.stale is None  # the old one is still the draft
    state2, probe = plan(unsure, v2, resit(s, now=200.0), r)
    assert isinstance(probe, Probe)
    found = apply(state2, probe, Outcome(OutcomeKind.found, message_id=13), 200.0)
    assert found.message_id == 13 and found.stale == 10  # it landed: the old one goes
    state = apply(state, send, Outcome(OutcomeKind.ok, message_id=13), 100.0)
    state, delete = plan(state, v2, s, r)
    assert isinstance(delete, Delete)
    assert apply(state, delete, Outcome(OutcomeKind.refused)).stale is None
    assert apply(state, delete, Outcome(OutcomeKind.transient)).stale == 10
