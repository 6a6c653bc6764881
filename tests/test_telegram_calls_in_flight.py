"""The adapter's connection permit (`WorkerOptions.calls_in_flight`, the Telegram
connection pool's size): however many chats need a call, no more Bot API requests are
open at once than the permit allows, while the Bot API is slow to answer.

The draft worker runs on a real python-telegram-bot `Bot` whose HTTP pool is far larger
than the permit, so only the permit can hold the calls back (in `run_adapter` the pool
has the permit's size, and would hide a permit that is not honoured).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import AsyncIterator

import pytest
import telegram
from redis.asyncio import Redis
from telegram.request import HTTPXRequest

from progresscast.channels.state.ids import DraftKey
from progresscast.channels.worker import ChannelWorker
from progresscast.config.settings import Settings
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.telegram.options import AdapterOptions
from progresscast.telegram.worker import telegram_worker
from progresscast.testing import BotAPIEmulator, Call

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OWNER = Owner("main", "t1")
CHATS = [5000 + i for i in range(8)]
REPLIED = 4999
"""A chat that gets a command reply, and follows nothing."""
PERMIT = 2
HOLD = 0.5
"""Seconds the emulator holds each answer: well inside the client's read timeout."""
READ_TIMEOUT = HOLD + 0.3
"""The client's read timeout where a send is made to time out."""
SETTLE = 0.3
"""Seconds after an unsure send before it is looked for."""


@pytest.fixture
async def api() -> AsyncIterator[BotAPIEmulator]:
    async with BotAPIEmulator() as emulator:
        yield emulator


def settings(api: BotAPIEmulator) -> Settings:
    return Settings.model_validate(
        {"agents": {"default": "main"}, "channels": {"telegram": {"token": api.token, "apiBaseUrl": api.base_url}}}
    )


@contextlib.asynccontextmanager
async def following(
    api: BotAPIEmulator, redis: Redis, *, read_timeout: float = 5.0, settle: float = 3.0
) -> AsyncIterator[ChannelWorker]:
    """The draft worker with a permit of `PERMIT`, on a client pool far larger, and every
    chat of `CHATS` following `OWNER`."""
    request = HTTPXRequest(connection_pool_size=4 * len(CHATS), read_timeout=read_timeout)
    async with telegram.Bot(api.token, base_url=api.base_url, request=request) as bot:
        options = AdapterOptions(connection_pool_size=PERMIT, consumer="test", settle=settle)
        worker = telegram_worker(settings(api), redis, bot, options=options)
        await worker.start()
        try:
            for chat in CHATS:
                key = DraftKey(chat, 0, OWNER)
                assert await worker.follow(key)
                worker.touch(key, followed=True)
            yield worker
        finally:
            await worker.close()


async def write_card(redis: Redis) -> None:
    await CardStore(redis).put(OWNER, CardInput.parse({"plan": [{"step": "Reproduce", "status": "in_progress"}]}))


def draft_calls(api: BotAPIEmulator) -> list[Call]:
    return [c for c in api.calls if c.chat_id in CHATS]


def all_answered(calls: list[Call], at_least: int) -> bool:
    return len(calls) >= at_least and all(c.answered is not None for c in calls)


def test_the_permit_is_the_connection_pools_size() -> None:
    assert AdapterOptions(connection_pool_size=PERMIT).worker().calls_in_flight == PERMIT


def test_by_default_the_pool_carries_the_bot_wide_budget_at_a_distant_round_trip(api: BotAPIEmulator) -> None:
    """Each call holds a connection for its round trip: a pool sized for Telegram's 30 a
    second would cap a raised budget at a fraction of it when the Bot API is far away
    (16 connections at 0.15 s: ≈ 100 calls a second of 1,000)."""
    options = AdapterOptions()
    assert options.pool_size(None) == 16  # 30 a second × 0.3 s is fewer: the floor
    raised = settings(api).channels.telegram
    assert raised is not None
    raised = raised.model_copy(update={"botCallsPerSecond": 1000.0})
    assert options.pool_size(raised) == 300
    assert options.worker(raised).calls_in_flight == 300
    assert AdapterOptions(connection_pool_size=PERMIT).pool_size(raised) == PERMIT  # set on purpose: kept


async def test_no_more_calls_open_at_once_than_the_permit(api: BotAPIEmulator, redis: Redis) -> None:
    async with following(api, redis):
        api.timeout_next("sendMessage", len(CHATS), delay=HOLD)  # applied, answered late
        await write_card(redis)
        await api.wait_for(lambda: all_answered(draft_calls(api), len(CHATS)), HOLD * len(CHATS) / PERMIT + 5)
    calls = draft_calls(api)
    assert [c.method for c in calls] == ["sendMessage"] * len(CHATS)  # one send each, none repeated
    assert all(c.ok and c.answered is not None and c.answered - c.at >= HOLD - 0.05 for c in calls)
    assert api.most_in_flight(calls) == PERMIT  # the permit, and all of it
    assert all(any("Reproduce" in m.text for m in api.chat(c).visible()) for c in CHATS)


async def test_the_probes_for_an_unsure_reply_wait_for_the_permit(api: BotAPIEmulator, redis: Redis) -> None:
    """A reply whose send timed out is looked for with probes; they take the permit too,
    though every draft call holds it meanwhile."""
    async with following(api, redis, read_timeout=READ_TIMEOUT, settle=SETTLE) as worker:
        api.timeout_next("sendMessage", delay=READ_TIMEOUT + 0.2, chat_id=REPLIED)  # the client gives up: unsure
        api.timeout_next("sendMessage", len(CHATS), delay=HOLD)
        worker.say(REPLIED, 0, "a reply")
        await write_card(redis)

        def answered() -> bool:
            probes = api.calls_for(REPLIED, "editMessageText")
            return all_answered(draft_calls(api), len(CHATS)) and all_answered(probes, 1)

        await api.wait_for(answered, HOLD * len(CHATS) / PERMIT + 5)
    [send] = api.calls_for(REPLIED, "sendMessage")
    [probe] = api.calls_for(REPLIED, "editMessageText")
    assert probe.description is not None and "not modified" in probe.description  # found where it landed
    drafts = draft_calls(api)
    # The probe was due while drafts still queued for the permit.
    assert drafts[-1].at > send.at + READ_TIMEOUT + SETTLE + HOLD
    # The unsure send is left out: its client gave up (and let go of the permit) while
    # the emulator still held the answer.
    assert api.most_in_flight([*drafts, probe]) == PERMIT


async def test_at_start_up_the_first_drafts_fill_the_permit_not_the_catch_ups_queue(
    api: BotAPIEmulator, redis: Redis
) -> None:
    """A draft handed over at start-up is looked at until its call is answered: a
    catch-up queue shorter than the permit would cap the first drafts at a distant Bot
    API (32 ÷ 0.15 s ≈ 200 a second, whatever the budget)."""
    permit, queue, chats = 6, 2, [6000 + i for i in range(12)]
    await write_card(redis)
    config = {
        "agents": {"default": "main"},
        "channels": {"telegram": {
            "token": api.token, "apiBaseUrl": api.base_url,
            "chats": [{"id": chat, "follow": [OWNER.session_key]} for chat in chats],
        }},
    }
    api.timeout_next("sendMessage", len(chats), delay=HOLD)  # applied, answered late
    request = HTTPXRequest(connection_pool_size=4 * len(chats))
    async with telegram.Bot(api.token, base_url=api.base_url, request=request) as bot:
        options = AdapterOptions(connection_pool_size=permit, catch_up=queue, consumer="test")
        worker = telegram_worker(Settings.model_validate(config), redis, bot, options=options)
        await worker.start()
        try:
            sends = lambda: [c for c in api.calls if c.chat_id in chats and c.method == "sendMessage"]  # noqa: E731
            await api.wait_for(lambda: all_answered(sends(), len(chats)), HOLD * len(chats) / queue + 5)
        finally:
            await worker.close()
    assert api.most_in_flight(sends()) == permit


async def test_a_draft_that_waits_to_leave_goes_with_the_card_written_meanwhile(
    api: BotAPIEmulator, redis: Redis
) -> None:
    """A draft decided at its slot whose call then waits to leave (the bot's sliding
    second is full) is read again before it goes when a change came meanwhile: its one
    message shows the newer card, not the older one and then an edit."""
    chat = 7001
    key = DraftKey(chat, 0, OWNER)
    async with telegram.Bot(api.token, base_url=api.base_url, request=HTTPXRequest()) as bot:
        worker = telegram_worker(settings(api), redis, bot, options=AdapterOptions(consumer="test"))
        await worker.start()
        try:
            assert await worker.follow(key)
            worker.touch(key, followed=True)
            pacer = worker.pacer
            pacer._left.extend([time.monotonic()] * pacer._left.maxlen)  # the bot's second is full
            store = CardStore(redis)
            await store.put(OWNER, CardInput.parse({"plan": [{"step": "Older", "status": "in_progress"}]}))
            await api.wait_for(pacer._leave_turn.locked, 10)  # its call waits to leave
            await store.put(OWNER, CardInput.parse({"plan": [{"step": "Newer", "status": "in_progress"}]}))
            await api.wait_for(lambda: api.calls_for(chat, "sendMessage"), 10)
        finally:
            await worker.close()
    [send] = api.calls_for(chat, "sendMessage")
    assert "Newer" in str(send.params.get("text")), send.params
