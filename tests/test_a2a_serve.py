"""`serve` with `[[a2a.agents]]`: a task started after serve is up shows in a Telegram
draft on the Bot API emulator; the agent going away and back is survived."""

from __future__ import annotations

import asyncio
import logging

import pytest
from redis.asyncio import Redis

from a2a_agent import Agent, status
from a2a_updates import ts
from progresscast.agents.a2a.apply import UpdateApplier
from progresscast.agents.a2a.follow import Follower, agent_client
from progresscast.agents.a2a.watch import agent_key
from progresscast.config.settings import Settings
from progresscast.serve import serve
from progresscast.store import keys
from progresscast.testing import BotAPIEmulator

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

PRIVATE = 4242


async def test_serve_follows_a_configured_agent_into_a_telegram_draft(
    redis_url: str, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    script = [
        status(at=ts(1), plan=[{"label": "Read the ticket", "state": "active"}, {"label": "Fix the bug", "state": "pending"}],
               text="Reading"),
        status(at=ts(2), plan=[{"label": "Read the ticket", "state": "done"}, {"label": "Fix the bug", "state": "active"}],
               text="Fixing"),
        status("TASK_STATE_INPUT_REQUIRED", at=ts(3), text="Which branch?"),
    ]
    caplog.set_level(logging.INFO, "progresscast.agents.a2a")
    first = await Agent(script).start()
    agent = first
    async with BotAPIEmulator() as api:
        settings = Settings.model_validate({
            "agents": {"default": "main", "known": ["main", "research"]},
            "gateway": {"listen": "127.0.0.1:0"},
            "channels": {"telegram": {"token": api.token, "apiBaseUrl": api.base_url, "access": "open"}},
            "a2a": {"agents": [{"url": first.url, "agentId": "research", "contexts": ["ctx-*"]}], "pollSeconds": 0.05,
                    "backoffMaxSeconds": 0.2},
        })
        serving = asyncio.create_task(serve(settings, redis_url))
        try:
            await api.wait_for(lambda: any(c.method == "getUpdates" for c in api.calls), 10)
            api.send_user_message(PRIVATE, "/follow ctx-serve research")
            await api.wait_for(lambda: any("ctx-serve" in m.text for m in api.chat(PRIVATE).visible()), 10)
            await api.wait_for(lambda: "/rpc" in first.cutter.requests, 10)  # serve is listing tasks

            # The agent goes away (serve notices) and comes back on the same port.
            await first.stop()
            await api.wait_for(lambda: any("ListTasks failed" in r.getMessage() for r in caplog.records), 10)
            agent = await Agent(script, port=first.port).start()
            await api.wait_for(lambda: "/rpc" in agent.cutter.requests, 10)

            # A task started after serve is up, by someone else.
            def draft_shows(*needles: str):
                return lambda: next((m for m in api.chat(PRIVATE).visible() if all(n in m.text for n in needles)), None)

            async with agent_client(agent.url) as client:
                starter = Follower(client, UpdateApplier(redis, agent_id="main", known_agents=frozenset({"main"}),
                                                         default_agent="main"))
                start = asyncio.create_task(starter.send("fix it", context_id="ctx-serve"))
                try:
                    await api.wait_for(draft_shows("Fix the bug", "Waiting for input: Which branch?"), 15)
                finally:
                    start.cancel()
                    await asyncio.gather(start, return_exceptions=True)
        finally:
            serving.cancel()
            # a stop that hangs fails
            await asyncio.wait_for(asyncio.gather(serving, return_exceptions=True), 20)
            await asyncio.wait_for(agent.stop(), 20)
    # named exactly: KEYS with a pattern searches one node of a Cluster
    cursor = keys.a2a_agent_cursor(agent_key(settings.a2a.agents[0], settings))
    assert (await redis.get(cursor)) == ts(3)
