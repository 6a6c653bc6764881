"""One card followed from Telegram and Slack at once: real python-telegram-bot and real
slack_sdk against their emulators, both adapters on one Redis, at real pacing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.testing import BotAPIEmulator, SlackAPIEmulator
from test_slack_adapter import C
from test_slack_adapter import Harness as SlackHarness
from test_telegram_adapter import PRIVATE
from test_telegram_adapter import Harness as TelegramHarness

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OWNER = Owner("main", "t1")


@pytest.fixture
async def both(redis: Redis) -> AsyncIterator[tuple[TelegramHarness, SlackHarness]]:
    async with BotAPIEmulator() as api, SlackAPIEmulator(channels=[C]) as slack:
        telegram = TelegramHarness(api, redis)
        slack_side = SlackHarness(slack, redis)
        await telegram.start()
        await slack_side.start()
        try:
            await telegram.command(PRIVATE, "/follow t1")
            await slack_side.command("follow t1")
            yield telegram, slack_side
        finally:
            await slack_side.stop()
            await telegram.stop()


def telegram_texts(h: TelegramHarness) -> list[str]:
    return [m.text for m in h.drafts(PRIVATE)]


def slack_texts(h: SlackHarness) -> list[str]:
    return [m.visible_text for m in h.slack.channel(C).visible()]


async def test_both_show_every_revision_end_state(both: tuple[TelegramHarness, SlackHarness]) -> None:
    telegram, slack = both
    steps = ["Reproduce", "Find the query", "Add the index", "Test", "Ship"]
    for done in range(len(steps)):
        plan: list[tuple[str, str]] = [(s, "completed") for s in steps[:done]]
        plan += [(steps[done], "in_progress")] + [(s, "pending") for s in steps[done + 1 :]]
        await telegram.put(*plan)
        want = (f"{done}/{len(steps)} complete", steps[done])
        [tg] = await telegram.shows(PRIVATE, *want)
        [sl] = await slack.shows(*want)
        assert "▶️ " + steps[done] in tg.text and "▶️ " + steps[done] in sl.visible_text
    assert len(telegram.draft_sends(PRIVATE)) == 1 and len(slack.posts()) == 1


async def test_an_answer_is_delivered_once_when_the_next_run_starts_at_once(
    both: tuple[TelegramHarness, SlackHarness],
) -> None:
    telegram, slack = both
    store = telegram.store
    await store.start_run(OWNER, "r1")
    await telegram.put(("Fix", "in_progress"))
    await telegram.shows(PRIVATE, "Fix")
    await slack.shows("Fix")
    await store.update_activity(OWNER, answer="First run: fixed the pager.")
    await telegram.put(("Fix", "completed"))
    # The run ends and the next one starts within one pacing interval (1 s per chat):
    # neither adapter looked in between.
    await store.end_run(OWNER, "r1", RunState.completed)
    await store.start_run(OWNER, "r2")
    await telegram.put(("Ship", "in_progress"))

    def answers(texts: list[str]) -> int:
        return sum("First run: fixed the pager." in t for t in texts)

    await telegram.api.wait_for(lambda: answers(telegram_texts(telegram)) and "Ship" in telegram_texts(telegram)[-1], 10)
    await slack.slack.wait_for(lambda: answers(slack_texts(slack)) and "Ship" in slack_texts(slack)[-1], 10)
    assert answers(telegram_texts(telegram)) == 1 and answers(slack_texts(slack)) == 1
    assert not any("Fix" in t for t in telegram_texts(telegram)) and not any("Fix" in t for t in slack_texts(slack))
    sent: list[Any] = [c for c in slack.slack.calls_for(C, "chat.postMessage") if c.ok]
    assert sum("First run" in c.params.get("text", "") for c in sent) == 1
