"""Drafts that behave like a teammate, over the Slack emulator (real HTTP, real Redis,
signed events and commands, pacing on the shared time scale): pings as new messages
(or broadcast thread replies), the line that ends every run, no flash for quick
runs, and the draft kept at the bottom of the channel."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.channels.state import DraftKey
from progresscast.model.view import RunState
from progresscast.testing import SlackAPIEmulator, SlackMessage
from test_slack_adapter import OWNER, SCALE, C, Harness, refused


@pytest.fixture
async def slack(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", str(SCALE))
    async with SlackAPIEmulator(channels=[C]) as emulator:
        yield emulator


@pytest.fixture
async def harness(slack: SlackAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**config: Any) -> Harness:
        h = Harness(slack, redis, **config)
        made.append(h)
        await h.start()
        return h

    yield make
    for h in made:
        await h.stop()


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
