"""Drafts that behave like a teammate, over the Slack emulator (real HTTP, real Redis,
signed events and commands, pacing on the shared time scale): pings as new messages
(or broadcast thread replies), the line that ends every run, no flash for quick
runs, and the draft kept at the bottom of the channel."""

# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name
from __future__ import annotations

import asyncio

import pytest

from progresscast.channels.state.ids import DraftKey
from progresscast.model.view import RunState
from progresscast.slack.events import landed
from progresscast.testing import SlackAPIEmulator, SlackMessage
from test_slack_adapter import OWNER, SCALE, C, Harness, harness, refused  # noqa: F401 (harness: the fixture, on this module's `slack`)


@pytest.fixture
async def slack(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", str(SCALE))
    async with SlackAPIEmulator(channels=[C]) as emulator:
        yield emulator


def app_messages(slack: SlackAPIEmulator, thread_ts: str | None = None) -> list[SlackMessage]:
    return slack.channel(C).visible(thread_ts=thread_ts)


async def quiet(seconds: float) -> None:
    await asyncio.sleep(seconds * SCALE)


# --- pings ---------------------------------------------------------------------------------


async def test_a_blocked_step_pings_once_with_a_new_message(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Confirm access", "in_progress"))
    [draft] = await h.shows("Confirm access")
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"))
    [_, ping] = await slack.wait_for(lambda: len(app_messages(slack)) == 2 and app_messages(slack), 5)
    assert ping.visible_text == "⛔ Needs you — t1: Confirm access"
    assert ping.thread_ts is None and not ping.reply_broadcast
    assert slack.channel(C).messages[draft.ts].visible_text.count("⛔") == 1  # the draft showed it first
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"))
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"), markdown="still waiting")
    await slack.wait_for(lambda: "still waiting" in slack.channel(C).messages[draft.ts].visible_text, 5)
    await quiet(3)
    assert len(app_messages(slack)) == 2 and refused(slack) == []


async def test_a_draft_in_a_thread_pings_with_a_broadcast_reply(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    root = slack.post_as_user(C, "let's track it here")
    assert h.adapter is not None
    key = DraftKey(C, root.ts, OWNER)
    await h.adapter.worker.follow(key)
    h.adapter.worker.touch(key, followed=True)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Confirm access", "in_progress"))
    await slack.wait_for(lambda: app_messages(slack, root.ts), 5)
    await h.put(("Confirm access", "blocked"))
    [_, ping] = await slack.wait_for(lambda: len(app_messages(slack, root.ts)) == 2 and app_messages(slack, root.ts), 5)
    assert ping.thread_ts == root.ts and ping.reply_broadcast
    assert ping.visible_text == "⛔ Needs you — t1: Confirm access"


async def test_a_failed_run_pings_with_the_line_that_ends_it(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Deploy", "in_progress"))
    [draft] = await h.shows("Deploy")
    await h.store.update_activity(OWNER, answer="The deploy broke.")
    await h.store.end_run(OWNER, "r1", RunState.failed)
    [end] = await h.shows("❌ t1 · failed")
    assert end.visible_text.startswith("❌ t1 · failed\n") and "The deploy broke." in end.visible_text
    assert draft.ts in slack.channel(C).deleted


async def test_a_run_that_ends_without_an_answer_keeps_its_end_line(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Fix", "in_progress"))
    [draft] = await h.shows("Fix")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [end] = await h.shows("✅ t1 · 1/2 done")
    assert end.visible_text == "✅ t1 · 1/2 done" and draft.ts in slack.channel(C).deleted


# --- no flash --------------------------------------------------------------------------------


async def test_a_run_shorter_than_the_start_delay_shows_no_draft_but_its_answer(slack, harness) -> None:
    h = await harness(streaming={"startDelay": 40})  # 2 s here
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Look it up", "in_progress"))
    await quiet(10)  # long enough for a draft, shorter than the delay
    await h.put(("Look it up", "completed"))
    await h.store.update_activity(OWNER, answer="It is 42.")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [answer] = await h.shows("It is 42.")
    assert answer.visible_text == "✅ t1 · 1/1 done\n\nIt is 42."
    await quiet(50)
    assert app_messages(slack) == [answer] and not slack.calls_for(C, "chat.delete")


# --- at the bottom ---------------------------------------------------------------------------


async def test_a_message_under_the_draft_then_a_write_reposts_it_below_new_first(slack, harness) -> None:
    h = await harness(streaming={"repostInterval": 100})  # 5 s here
    slack.events_url = f"{h.url}/slack/events"
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Build", "in_progress"))
    [draft] = await h.shows("Build")
    person = slack.post_as_user(C, "how is it going?")
    await slack.wait_for(lambda: any(e["event"]["ts"] == person.ts and status == 200 for e, status in slack.events), 5)
    await h.put(("Build", "completed"), ("Test", "in_progress"))
    [moved] = await h.shows("Test")
    assert moved.ts > person.ts > draft.ts and draft.ts in slack.channel(C).deleted
    calls = [(c.method, c.params.get("ts")) for c in slack.calls_for(C) if c.ok and c.method != "auth.test"][-2:]
    assert calls == [("chat.postMessage", None), ("chat.delete", draft.ts)]
    slack.post_as_user(C, "and now?")
    await quiet(2)
    await h.put(("Build", "completed"), ("Test", "completed"))
    [same] = await h.shows("2/2 complete")
    assert same.ts == moved.ts


async def test_the_apps_own_messages_do_not_count(slack, harness) -> None:
    h = await harness(streaming={"repostInterval": 0})
    slack.events_url = f"{h.url}/slack/events"
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Confirm access", "blocked"))
    [draft, ping] = await slack.wait_for(lambda: len(app_messages(slack)) == 2 and app_messages(slack), 5)
    await slack.wait_for(lambda: any(e["event"]["ts"] == ping.ts for e, _ in slack.events), 5)
    await h.put(("Confirm access", "in_progress"))
    await slack.wait_for(lambda: "▶" in slack.channel(C).messages[draft.ts].visible_text, 5)
    assert not slack.channel(C).deleted


def test_which_message_events_count_as_someone_elses_message_landing() -> None:
    own = {"own_user": "U0BOT", "own_bot": "B0BOT"}
    person = {"type": "message", "channel": C, "user": "U1", "ts": "1700000000.000200", "text": "hi"}
    assert landed(person, **own) == [(C, "0", "1700000000.000200")]
    reply = {**person, "thread_ts": "1700000000.000100"}
    assert landed(reply, **own) == [(C, "1700000000.000100", "1700000000.000200")]
    broadcast = {**reply, "subtype": "thread_broadcast"}
    assert landed(broadcast, **own) == [(C, "1700000000.000100", "1700000000.000200"), (C, "0", "1700000000.000200")]
    other_bot = {**person, "subtype": "bot_message", "bot_id": "B0OTHER"}
    assert landed(other_bot, **own) == [(C, "0", "1700000000.000200")]
    for event in (
        {**person, "user": "U0BOT"}, {**person, "bot_id": "B0BOT"},  # the app's own
        {**person, "subtype": "message_changed"}, {**person, "subtype": "message_deleted"},
        {**person, "ts": "not-a-ts"}, {**person, "type": "reaction_added"}, "junk",
    ):
        assert landed(event, **own) == [], event
    assert landed(person, own_user=None, own_bot=None) == []  # before the app knows who it is
