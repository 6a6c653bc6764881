"""One card followed from Telegram, Slack and Discord at once: the three adapters on one
Redis, each against its emulator over HTTP, end showing the same card."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from progresscast.discord.register import register
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.testing import BotAPIEmulator, DiscordAPIEmulator, SlackAPIEmulator
from progresscast.timescale import ENV
from test_discord_adapter import C as DISCORD_CHANNEL
from test_discord_adapter import Harness as DiscordHarness
from test_slack_adapter import C as SLACK_CHANNEL
from test_slack_adapter import Harness as SlackHarness
from test_telegram_adapter import PRIVATE
from test_telegram_adapter import Harness as TelegramHarness

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OWNER = Owner("main", "t1")
ROW = re.compile(r"^(✅|▶️|⬜|⛔|⏭️|⏸️) (.+)$")

Three = tuple[TelegramHarness, SlackHarness, DiscordHarness]


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "0.05")


@pytest.fixture
async def three(redis: Redis) -> AsyncIterator[Three]:
    async with (
        BotAPIEmulator() as api,
        SlackAPIEmulator(channels=[SLACK_CHANNEL]) as slack,
        DiscordAPIEmulator(channels=[DISCORD_CHANNEL]) as discord,
    ):
        telegram = TelegramHarness(api, redis)
        slack_side = SlackHarness(slack, redis)
        discord_side = DiscordHarness(discord, redis)
        await register(discord_side.settings.channels.discord, guild=discord.guild_id)  # type: ignore[arg-type]
        for side in (telegram, slack_side, discord_side):
            await side.start()
        try:
            await telegram.command(PRIVATE, "/follow t1")
            await slack_side.command("follow t1")
            await discord_side.command("follow t1")
            yield telegram, slack_side, discord_side
        finally:
            for side in (discord_side, slack_side, telegram):
                await side.stop()


def rows(text: str) -> list[str]:
    """The checklist as a reader sees it: each step row's icon and words (Slack shows
    its list items with a bullet)."""
    return [line.strip().removeprefix("• ") for line in text.split("\n") if ROW.match(line.strip().removeprefix("• "))]


async def test_one_card_ends_identical_in_all_three(three: Three) -> None:
    telegram, slack, discord = three
    await telegram.store.start_run(OWNER, "r1")
    steps = ["Reproduce", "Skip the flaky benchmark", "Write the migration", "Get DBA approval", "Ship"]
    statuses = ["completed", "skipped", "in_progress", "blocked", "pending"]
    for k in range(1, len(steps) + 1):  # the card grows a step at a time
        await telegram.put(*zip(steps[:k], statuses[:k], strict=True))
    want = "2/5 complete"  # skipped counts as done
    [tg] = await telegram.shows(PRIVATE, want, "Ship")
    [sl] = await slack.shows(want, "Ship")
    [dc] = await discord.shows(want, "Ship")
    shown = {"telegram": rows(tg.text), "slack": rows(sl.visible_text), "discord": rows(dc.read().text)}
    expected = ["✅ Reproduce", "⏭️ Skip the flaky benchmark", "▶️ Write the migration", "⛔ Get DBA approval", "⬜ Ship"]
    assert shown == {"telegram": expected, "slack": expected, "discord": expected}, shown
    assert len(telegram.draft_sends(PRIVATE)) == 1 and len(slack.posts()) == 1 and len(discord.creates()) == 1
    await telegram.store.update_activity(OWNER, answer="Shipped: the index is in.")
    await telegram.put(*[(s, "completed") for s in steps])
    await telegram.store.end_run(OWNER, "r1", RunState.completed)
    [tg_answer] = await telegram.shows(PRIVATE, "Shipped: the index is in.")
    [sl_answer] = await slack.shows("Shipped: the index is in.")
    [dc_answer] = await discord.shows("Shipped: the index is in.")
    assert tg_answer.text == sl_answer.visible_text == dc_answer.read().text == "Shipped: the index is in."
