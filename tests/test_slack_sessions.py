"""Slack's agent sessions (`[channels.slack] agentSessions`): a follow's thread shows its
session `processing` while a run its agent can stop is live, Slack's own stop button
(`agent_session_stopped`) records the stop as the draft's Stop does — by the same rules —
and the session is `active` again. Real slack_sdk against the Slack emulator, a real Redis."""
# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from progresscast.model.view import RunState
from progresscast.testing import SlackAPIEmulator
from test_slack_adapter import OWNER, C, Harness, fast, harness, slack  # noqa: F401

SET_STATUS = "agents.sessions.setStatus"


async def live(h: Harness) -> str:
    """A live run its agent can stop, followed in a thread of its own: the thread's ts."""
    h.slack.events_url = f"{h.url}/slack/events"
    await h.store.start_run(OWNER, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    reply = await h.command("follow t1")
    assert reply["text"] == "Following agent:main:t1.", reply
    [anchor, plan] = await h.shows("Build", count=2)
    assert plan.thread_ts == anchor.ts
    return anchor.ts


def shows(slack: SlackAPIEmulator, text: str) -> bool:
    return any(text in m.visible_text for m in slack.channel(C).visible())


async def test_a_live_run_sets_the_session_processing_and_slacks_stop_stops_it(
    slack: SlackAPIEmulator, harness: Any
) -> None:
    h: Harness = await harness(richMessages=True, notify=[], agentSessions=True)
    thread = await live(h)
    await slack.wait_for(lambda: slack.session(C, thread) == "processing", 5)

    slack.stop_agent_session(C, thread, user="U0ANA")

    async def stopped() -> bool:
        view = await h.store.view(OWNER)
        return view.stop is not None

    await slack.wait_for(stopped, 5)
    view = await h.store.view(OWNER)
    assert view.stop is not None and (view.stop.by.user, view.stop.by.platform) == ("U0ANA", "slack")
    await slack.wait_for(lambda: shows(slack, "Stopping — U0ANA"), 5)
    await slack.wait_for(lambda: slack.session(C, thread) == "active", 5)
    await h.store.end_run(OWNER, "run-1", RunState.canceled)
    await slack.wait_for(lambda: shows(slack, "stopped by U0ANA"), 5)
    await h.adapter.worker.idle()  # type: ignore[union-attr]
    # Once per change: processing, then active; the run's end changes nothing more.
    assert slack.workspace.session_history == [(C, thread, "processing"), (C, thread, "active")]
    assert all(c.ok for c in slack.calls_for(C, SET_STATUS))


async def test_a_stop_from_a_channel_not_granted_the_session_changes_nothing(
    slack: SlackAPIEmulator, harness: Any, caplog: pytest.LogCaptureFixture
) -> None:
    h: Harness = await harness(richMessages=True, notify=[], agentSessions=True, access="pairing")
    assert h.adapter is not None
    grants = h.adapter.channel.access.store
    code = await grants.issue(C)
    assert code is not None and await grants.approve(code, ["*"]) == C
    thread = await live(h)
    await slack.wait_for(lambda: slack.session(C, thread) == "processing", 5)
    assert await grants.revoke(C)

    caplog.set_level(logging.INFO, logger="progresscast.slack")
    slack.stop_agent_session(C, thread, user="U0EVE")
    await slack.wait_for(lambda: any("stopped in channel" in r.getMessage() and "U0EVE" in r.getMessage()
                                     for r in caplog.records), 5)
    assert (await h.store.view(OWNER)).stop is None
    assert not shows(slack, "Stopping")
    assert slack.session(C, thread) == "processing"  # the run goes on


async def test_without_the_setting_no_session_is_set(slack: SlackAPIEmulator, harness: Any) -> None:
    h: Harness = await harness(richMessages=True, notify=[])
    await live(h)
    # Later paced calls of the live run's draft: a session's call, queued since the first, would be out.
    for n, steps in enumerate(((("Build", "completed"), ("Test", "in_progress")), (("Build", "completed"),
                                                                                   ("Test", "blocked"))), 1):
        await h.put(*steps)
        await slack.wait_for(lambda n=n: len([c for c in slack.calls_for(C, "chat.appendStream") if c.ok]) >= n, 5)
    await h.store.end_run(OWNER, "run-1", RunState.completed)
    await slack.wait_for(lambda: not any(m.streaming for m in slack.channel(C).visible()), 5)
    await h.adapter.worker.idle()  # type: ignore[union-attr]
    assert slack.calls_for(C, SET_STATUS) == [] and slack.workspace.sessions == {}


async def test_the_emulator_checks_set_status_as_slack_does(slack: SlackAPIEmulator) -> None:
    async with httpx.AsyncClient() as client:
        async def call(**params: Any) -> dict[str, Any]:
            reply = await client.post(f"{slack.base_url}{SET_STATUS}", headers={
                "Authorization": f"Bearer {slack.token}"}, json=params)
            body: dict[str, Any] = reply.json()
            return body

        anchor = slack.post_as_user(C, "hello")
        assert (await call(channel_id=C, thread_ts=anchor.ts, status="busy"))["error"] == "invalid_arguments"
        assert (await call(channel_id=C, status="processing"))["error"] == "invalid_arguments"
        assert (await call(channel_id="C0NOPE", thread_ts=anchor.ts, status="processing"))["error"] == (
            "channel_not_found")
        assert (await call(channel_id=C, thread_ts="1.000001", status="processing"))["error"] == "thread_not_found"
        assert (await call(channel_id=C, thread_ts=anchor.ts, status="processing"))["ok"] is True
    assert slack.session(C, anchor.ts) == "processing"
    with pytest.raises(RuntimeError):  # no events_url yet
        slack.stop_agent_session(C, anchor.ts)
