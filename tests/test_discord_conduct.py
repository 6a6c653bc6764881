"""Pings, the end line and the start delay on Discord, over the Discord emulator (real
HTTP, real Redis): the same shared behaviour as Telegram's and Slack's, in Discord's
calls — a ping is a message that notifies, referencing the silent draft."""

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.model.card import CardInput
from progresscast.model.view import RunState
from progresscast.render.discord import SUPPRESS_NOTIFICATIONS
from progresscast.testing import DiscordAPIEmulator
from progresscast.timescale import ENV
from test_discord_adapter import OWNER, SCALE, C, Harness


@pytest.fixture
async def discord(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(ENV, str(SCALE))
    async with DiscordAPIEmulator(channels=[C]) as emulator:
        yield emulator


@pytest.fixture
async def harness(discord: DiscordAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**config: Any) -> Harness:
        config.setdefault("channels", [{"id": C, "sessions": ["*"], "follow": ["t1"]}])
        h = Harness(discord, redis, **config)
        made.append(h)
        await h.start()
        return h

    yield make
    for h in made:
        await h.stop()


async def test_a_blocked_step_pings_once_referencing_the_silent_draft(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.store.start_run(OWNER, "r1")
    await h.store.put(OWNER, _card(("Fetch", "completed"), ("Confirm access", "in_progress")))
    channel = discord.channel(C)
    [draft] = await discord.wait_for(lambda: list(channel.messages.values()) or None, 10)
    assert draft.flags & SUPPRESS_NOTIFICATIONS  # drafts are silent
    await h.store.put(OWNER, _card(("Fetch", "completed"), ("Confirm access", "blocked")))
    [ping] = await discord.wait_for(lambda: [m for m in channel.messages.values() if m.reply_to == draft.id], 10)
    assert not ping.flags & SUPPRESS_NOTIFICATIONS
    assert ping.read().text == "⛔ Needs you — t1: Confirm access" and ping.read().mentions == []
    await h.store.put(OWNER, _card(("Fetch", "completed"), ("Confirm access", "blocked")))  # no news
    await h.store.end_run(OWNER, "r1", RunState.failed)
    [end] = await discord.wait_for(
        lambda: [m for m in channel.messages.values() if m.read().text.startswith("❌")], 10
    )
    assert end.read().text == "❌ t1 · failed · ⛔ Confirm access"
    assert len([m for m in channel.messages.values() if m.reply_to == draft.id]) == 1


def _card(*steps: tuple[str, str]) -> CardInput:
    return CardInput.parse({"plan": [{"step": s, "status": st} for s, st in steps]})
