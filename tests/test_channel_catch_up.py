"""Start-up with many follows, quiet failures, and the bot-wide budget setting.

The adapter end to end (real python-telegram-bot against the Bot API emulator, a real
Redis); the failure log with a controlled clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.channels.state.ids import DraftKey
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings
from progresscast.config.settings import Settings
from progresscast.failure_log import FailureLog
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.sharding import layout_of
from progresscast.telegram.bot import run_adapter
from progresscast.telegram.follows import TelegramState
from progresscast.telegram.options import AdapterOptions
from progresscast.testing import BotAPIEmulator

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

FIRST_CHAT = 5000


def settings_for(api: BotAPIEmulator, chats: int, **telegram: Any) -> Settings:
    return Settings.model_validate(
        {
            "channels": {
                "telegram": {
                    "token": api.token,
                    "apiBaseUrl": api.base_url,
                    "chats": [{"id": FIRST_CHAT + i, "follow": [f"s{i}"]} for i in range(chats)],
                    **telegram,
                }
            }
        }
    )


async def write_cards(redis: Redis, chats: int) -> None:
    store = CardStore(redis)
    card = CardInput.parse({"plan": [{"step": "Work", "status": "in_progress"}]})
    for i in range(chats):
        await store.put(Owner("main", f"s{i}"), card)


@contextlib.asynccontextmanager
async def adapter(settings: Settings, redis: Redis, options: AdapterOptions) -> AsyncIterator[asyncio.Task[None]]:
    task = asyncio.create_task(run_adapter(settings, redis, options=options))
    try:
        yield task
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), 15)


def first_drafts(api: BotAPIEmulator, chats: int) -> list[float]:
    """When each chat got its first draft (an empty list until every chat has one)."""
    out = []
    for i in range(chats):
        sends = [c.at for c in api.calls_for(FIRST_CHAT + i, "sendMessage") if c.ok]
        if not sends:
            return []
        out.append(sends[0])
    return out


async def connected_clients(url: str) -> int:
    probe = Redis.from_url(url)
    try:
        info = await probe.info("clients")
        return int(info["connected_clients"]) - 1  # not this probe
    finally:
        await probe.aclose()


async def test_a_restart_looks_at_many_follows_through_a_bounded_queue_and_polls_at_once(
    redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # counts the server's connections: runs on a Redis of its own (the embedded one)
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.05")  # the adapter's pacing at 1/20 of real time
    chats, catch_up = 150, 4
    await write_cards(redis, chats)
    state = TelegramState(redis)  # followed before the restart: in Redis, not in the config
    for i in range(chats):
        await state.follows.add(DraftKey(FIRST_CHAT + i, 0, Owner("main", f"s{i}")))
    async with BotAPIEmulator(private_pace=None, group_pace=None, bot_pace=None) as api:
        before = await connected_clients(redis_url)
        options = AdapterOptions(consumer="test", catch_up=catch_up)
        async with adapter(settings_for(api, 0), redis, options) as task:
            shown = await api.wait_for(lambda: task.done() or first_drafts(api, chats), 30)
            assert not task.done(), task
            opened = await connected_clients(redis_url) - before
    # The pool keeps every connection it opened: at most the queue's width, plus one
    # blocking reader per shard stream, the long poll's bookkeeping and a command or two.
    shards = (await layout_of(redis)).shards
    assert opened <= catch_up + shards + 5, f"{opened} Redis connections for {chats} follows"
    first_poll = min(c.at for c in api.calls if c.method == "getUpdates")
    # Polling does not wait for the follows: it starts before half of the drafts are shown.
    assert first_poll < sorted(shown)[chats // 2], "polling waited for the follows to be looked at"


async def test_the_bot_wide_budget_is_a_setting(redis: Redis) -> None:
    chats = 10
    await write_cards(redis, chats)
    async with BotAPIEmulator(bot_pace=None) as api:
        options = AdapterOptions(consumer="test")
        async with adapter(settings_for(api, chats, botCallsPerSecond=10), redis, options) as task:
            shown = await api.wait_for(lambda: task.done() or first_drafts(api, chats), 15)
            assert not task.done(), task
    # ten first drafts at 10 calls a second: nine gaps of 0.1 s (30/s would take 0.3 s)
    assert max(shown) - min(shown) >= 0.8


def test_the_bot_wide_budget_must_be_positive(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[channels.telegram]\ntoken = "x"\nbotCallsPerSecond = 0\n')
    with pytest.raises(ConfigError, match="botCallsPerSecond"):
        load_settings(config)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_kind_of_failure_is_logged_once_per_interval_with_how_many_more(caplog: pytest.LogCaptureFixture) -> None:
    clock = Clock()
    log = FailureLog(logging.getLogger("test.failures"), 60.0, clock=clock)
    with caplog.at_level(logging.WARNING, logger="test.failures"):
        for chat in range(1000):
            log.warning("transient call", "chat %s: network error; retrying", chat)
        log.warning("flood control", "chat %s: flood control", 7)
        clock.now += 59
        log.warning("transient call", "chat %s: network error; retrying", 1000)
        clock.now += 1
        log.warning("transient call", "chat %s: network error; retrying", 1001)
    lines = [r.getMessage() for r in caplog.records]
    assert lines == [
        "chat 0: network error; retrying",
        "chat 7: flood control",
        "chat 1001: network error; retrying (and 1000 more like it in the last 60 s)",
    ]


def test_an_exception_line_keeps_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    log = FailureLog(logging.getLogger("test.failures"), 60.0, clock=Clock())
    with caplog.at_level(logging.ERROR, logger="test.failures"):
        for _ in range(3):
            try:
                raise ConnectionError("Redis is down")
            except ConnectionError:
                log.exception("draft failed: ConnectionError", "draft %s failed", "main:t1")
    assert len(caplog.records) == 1
    assert caplog.records[0].exc_info is not None
