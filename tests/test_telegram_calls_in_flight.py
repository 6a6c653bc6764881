"""The adapter's connection permit (`WorkerOptions.calls_in_flight`, the Telegram
connection pool's size): however many chats need a call, no more Bot API requests are
open at once than the permit allows, while the Bot API is slow to answer.

The draft worker runs on a real python-telegram-bot `Bot` whose HTTP pool is far larger
than the permit, so only the permit can hold the calls back (in `run_adapter` the pool
has the permit's size, and would hide a permit that is not honoured).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import telegram
from redis.asyncio import Redis
from telegram.request import HTTPXRequest

from progresscast.card import CardInput
from progresscast.channels.state import DraftKey
from progresscast.config import Settings
from progresscast.owners import Owner
from progresscast.store import CardStore
from progresscast.telegram.options import AdapterOptions
from progresscast.telegram.worker import DraftWorker
from progresscast.testing import BotAPIEmulator

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OWNER = Owner("main", "t1")
CHATS = [5000 + i for i in range(8)]
PERMIT = 2
HOLD = 0.5
"""Seconds the emulator holds each answer: well inside the client's read timeout."""


@pytest.fixture
async def api() -> AsyncIterator[BotAPIEmulator]:
    async with BotAPIEmulator() as emulator:
        yield emulator


@pytest.fixture
async def bot(api: BotAPIEmulator) -> AsyncIterator[telegram.Bot]:
    request = HTTPXRequest(connection_pool_size=4 * len(CHATS), read_timeout=5.0)
    async with telegram.Bot(api.token, base_url=api.base_url, request=request) as made:
        yield made


def settings(api: BotAPIEmulator) -> Settings:
    return Settings.model_validate(
        {"agents": {"default": "main"}, "channels": {"telegram": {"token": api.token, "apiBaseUrl": api.base_url}}}
    )


def test_the_permit_is_the_connection_pools_size() -> None:
    assert AdapterOptions(connection_pool_size=PERMIT).worker().calls_in_flight == PERMIT


async def test_no_more_calls_open_at_once_than_the_permit(api: BotAPIEmulator, bot: Any, redis: Redis) -> None:
    worker = DraftWorker(
        settings(api), redis, bot, options=AdapterOptions(connection_pool_size=PERMIT, consumer="test")
    )
    await worker.start()
    try:
        for chat in CHATS:
            key = DraftKey(chat, 0, OWNER)
            assert await worker.follow(key)
            worker.touch(key, followed=True)
        api.timeout_next("sendMessage", len(CHATS), delay=HOLD)  # applied, answered late
        await CardStore(redis).put(OWNER, CardInput.parse({"plan": [{"step": "Reproduce", "status": "in_progress"}]}))

        def answered() -> list[Any]:
            calls = [c for c in api.calls if c.chat_id in CHATS]
            return calls if len(calls) >= len(CHATS) and all(c.answered for c in calls) else []

        await api.wait_for(answered, HOLD * len(CHATS) / PERMIT + 5)
        await worker.idle()
    finally:
        await worker.close()
    calls = [c for c in api.calls if c.chat_id in CHATS]
    assert [c.method for c in calls] == ["sendMessage"] * len(CHATS)  # one send each, none repeated
    assert all(c.ok and c.answered is not None and c.answered - c.at >= HOLD - 0.05 for c in calls)
    assert api.most_in_flight(calls) == PERMIT  # the permit, and all of it
    assert all(any("Reproduce" in m.text for m in api.chat(c).visible()) for c in CHATS)
