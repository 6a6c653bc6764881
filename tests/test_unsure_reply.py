"""A one-off reply whose send may or may not have landed is looked for, never sent
again; a probe whose answer says nothing (a server error) is made again after the
one retry policy's pause (`backoff.Retrying`)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import telegram
from redis.asyncio import Redis
from telegram.request import HTTPXRequest

from progresscast.config.settings import Settings
from progresscast.telegram.options import AdapterOptions
from progresscast.telegram.worker import telegram_worker
from progresscast.testing import BotAPIEmulator

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

CHAT = 4999
READ_TIMEOUT = 0.5
"""The client's read timeout: the reply's send is made to outlast it."""
SETTLE = 0.2
"""Seconds after an unsure send before it is looked for."""


@pytest.fixture
async def api() -> AsyncIterator[BotAPIEmulator]:
    async with BotAPIEmulator() as emulator:
        yield emulator


async def test_an_unsure_reply_is_found_though_a_probe_failed(api: BotAPIEmulator, redis: Redis) -> None:
    settings = Settings.model_validate(
        {"agents": {"default": "main"}, "channels": {"telegram": {"token": api.token, "apiBaseUrl": api.base_url}}}
    )
    request = HTTPXRequest(read_timeout=READ_TIMEOUT)
    async with telegram.Bot(api.token, base_url=api.base_url, request=request) as bot:
        worker = telegram_worker(settings, redis, bot, options=AdapterOptions(consumer="test", settle=SETTLE))
        await worker.start()
        try:
            api.timeout_next("sendMessage", delay=READ_TIMEOUT + 0.2, chat_id=CHAT)  # the client gives up: unsure
            api.fail_next("editMessageText", status=500, chat_id=CHAT)  # the first probe: no answer
            worker.say(CHAT, 0, "a reply")

            def probed_twice() -> bool:
                probes = api.calls_for(CHAT, "editMessageText")
                return len(probes) >= 2 and all(p.answered is not None for p in probes)

            await api.wait_for(probed_twice, 10)
        finally:
            await worker.close()
    assert len(api.calls_for(CHAT, "sendMessage")) == 1  # never sent again
    failed, found = api.calls_for(CHAT, "editMessageText")
    assert not failed.ok
    assert found.description is not None and "not modified" in found.description  # found where it landed
    assert [m.text for m in api.chat(CHAT).visible()] == ["a reply"]
