"""The adapter's Bot API transport (aiohttp under python-telegram-bot) against the
emulator: replies, errors and timeouts reach `classify` as PTB's own transport's do,
and a closed fence sends nothing."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import telegram
from telegram.error import BadRequest, NetworkError, RetryAfter, TimedOut

from progresscast.channels.draft.outcome import OutcomeKind
from progresscast.store.lease import Fence
from progresscast.telegram.client import classify
from progresscast.telegram.request import FencedRequest, LeaseLost
from progresscast.testing import BotAPIEmulator

PRIVATE = 1001

pytestmark = [
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Please use:telegram.warnings.PTBUserWarning"),  # do_api_request on purpose
]


@asynccontextmanager
async def bot_on(api: BotAPIEmulator | None, base_url: str = "", **options: Any) -> AsyncIterator[telegram.Bot]:
    """A Bot on our transport; getMe is not called (a call of its own would count)."""
    request = FencedRequest(**options)
    await request.initialize()
    try:
        token = api.token if api is not None else "1:x"
        yield telegram.Bot(token, base_url=api.base_url if api is not None else base_url, request=request)
    finally:
        await request.shutdown()


async def send(bot: telegram.Bot, text: str, **extra: Any) -> Any:
    return await bot.do_api_request("sendMessage", api_kwargs={"chat_id": PRIVATE, "text": text, **extra})


async def test_a_call_goes_through_with_its_parameters_as_the_bot_api_reads_them() -> None:
    async with BotAPIEmulator(private_pace=None) as api, bot_on(api) as bot:
        markup = {"inline_keyboard": [[{"text": "é ✓", "url": "https://example.org/?a=1&b=2"}]]}
        result = await send(bot, "<b>x &amp; ü</b>", parse_mode="HTML", reply_markup=markup)
        assert isinstance(result["message_id"], int)
        assert api.chat(PRIVATE).texts() == ["x & ü"]
        [call] = api.calls_for(PRIVATE)
        assert call.params["reply_markup"] == markup
        assert call.params["chat_id"] == PRIVATE
        # A typed PTB method (its reply parsed into a Message) as well.
        message = await bot.send_message(PRIVATE, "typed", disable_notification=True)
        assert message.text == "typed" and api.chat(PRIVATE).texts()[-1] == "typed"


async def test_a_429_carries_retry_after_to_classify() -> None:
    async with BotAPIEmulator(private_pace=None) as api, bot_on(api) as bot:
        api.fail_next("sendMessage", status=429, retry_after=7)
        with pytest.raises(RetryAfter) as caught:
            await send(bot, "flood")
        outcome = classify(caught.value)
        assert outcome.kind is OutcomeKind.rate_limited and outcome.retry_after == 7
        assert api.chat(PRIVATE).texts() == []


async def test_a_400s_description_reaches_classify() -> None:
    async with BotAPIEmulator(private_pace=None) as api, bot_on(api) as bot:
        sent = await send(bot, "same")
        edit = {"chat_id": PRIVATE, "message_id": sent["message_id"], "text": "same"}
        with pytest.raises(BadRequest, match="not modified") as same:
            await bot.do_api_request("editMessageText", api_kwargs=edit)
        assert classify(same.value).kind is OutcomeKind.not_modified
        with pytest.raises(BadRequest, match="not found") as gone:
            await bot.do_api_request("editMessageText", api_kwargs={**edit, "message_id": 999_999, "text": "x"})
        assert classify(gone.value).kind is OutcomeKind.gone


async def test_a_reply_late_past_the_read_timeout_is_timed_out_and_unsure() -> None:
    async with BotAPIEmulator(private_pace=None) as api, bot_on(api, read_timeout=0.2, write_timeout=0.1) as bot:
        api.timeout_next("sendMessage", delay=1.5)
        started = asyncio.get_running_loop().time()
        with pytest.raises(TimedOut) as caught:
            await send(bot, "maybe")
        assert asyncio.get_running_loop().time() - started < 1.2
        assert classify(caught.value).kind is OutcomeKind.unsure  # it reached the server
        assert api.chat(PRIVATE).texts() == ["maybe"]


async def test_no_free_connection_in_time_is_a_pool_timeout_never_sent() -> None:
    options = {"connection_pool_size": 1, "pool_timeout": 0.1, "read_timeout": 2.0}
    async with BotAPIEmulator(private_pace=None) as api, bot_on(api, **options) as bot:
        api.timeout_next("sendMessage", delay=0.6)
        held = asyncio.create_task(send(bot, "first"))
        await asyncio.sleep(0.1)
        with pytest.raises(TimedOut, match="Pool timeout") as caught:
            await send(bot, "second")
        assert classify(caught.value).kind is OutcomeKind.transient
        await held
        assert api.chat(PRIVATE).texts() == ["first"]


async def test_a_refused_connection_is_a_network_error_never_sent() -> None:
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    async with bot_on(None, f"http://127.0.0.1:{port}/bot") as bot:
        with pytest.raises(NetworkError) as caught:
            await send(bot, "nowhere")
        assert not isinstance(caught.value, TimedOut)
        assert classify(caught.value).kind is OutcomeKind.transient


async def test_a_closed_fence_sends_nothing_even_after_waiting_for_a_connection() -> None:
    fence = Fence()
    fence.number, fence.deadline = 1, float("inf")
    options = {"connection_pool_size": 1, "pool_timeout": 2.0, "read_timeout": 2.0}
    async with BotAPIEmulator(private_pace=None) as api, bot_on(api, fence=fence, **options) as bot:
        api.timeout_next("sendMessage", delay=0.4)
        held = asyncio.create_task(send(bot, "first"))
        await asyncio.sleep(0.1)
        waiting = asyncio.create_task(send(bot, "second"))  # passes the first check, waits for the connection
        await asyncio.sleep(0.1)
        fence.close()
        with pytest.raises(LeaseLost) as caught:
            await waiting
        assert classify(caught.value).kind is OutcomeKind.transient
        await held
        with pytest.raises(LeaseLost):
            await send(bot, "third")
        assert [c.params["text"] for c in api.calls_for(PRIVATE)] == ["first"]
