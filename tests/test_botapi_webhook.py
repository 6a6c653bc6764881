"""The Bot API emulator's webhook, driven by real python-telegram-bot: setWebhook's
checks, getUpdates refused while a webhook is set, and updates POSTed like Telegram
posts them (secret header, retried until 2xx, given up on after the last try)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import telegram
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from telegram.error import BadRequest, Conflict

from progresscast.testing import BotAPIEmulator

PRIVATE = 1001
CONFLICT = "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"


@dataclass
class Receiver:
    """A webhook endpoint: records each POST; answers the statuses in `answers` first, then 200."""

    url: str = ""
    answers: list[int] = field(default_factory=list)
    posts: list[tuple[dict[str, str], Any]] = field(default_factory=list)

    async def endpoint(self, request: Request) -> JSONResponse:
        self.posts.append((dict(request.headers), json.loads(await request.body())))
        status = self.answers.pop(0) if self.answers else 200
        return JSONResponse({}, status_code=status)


@contextlib.asynccontextmanager
async def serving(*receivers: Receiver) -> AsyncIterator[None]:
    """One server with a webhook path per receiver (`/telegram/hook`, `/telegram/hook-2`, …)."""
    paths = ["/telegram/hook", *(f"/telegram/hook-{i}" for i in range(2, len(receivers) + 1))]
    app = Starlette(routes=[Route(path, got.endpoint, methods=["POST"]) for path, got in zip(paths, receivers, strict=True)])
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    for path, got in zip(paths, receivers, strict=True):
        got.url = f"http://127.0.0.1:{sock.getsockname()[1]}{path}"
    server = uvicorn.Server(uvicorn.Config(app, lifespan="off", log_config=None, log_level="warning"))
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    got = Receiver()
    async with serving(got):
        yield got


@pytest.fixture
async def api() -> AsyncIterator[BotAPIEmulator]:
    async with BotAPIEmulator(private_pace=None, webhook_retry_delays=(0.05, 0.1, 0.2)) as emulator:
        yield emulator


@pytest.fixture
async def bot(api: BotAPIEmulator) -> AsyncIterator[telegram.Bot]:
    async with telegram.Bot(api.token, base_url=api.base_url) as b:
        yield b


async def raw_call(api: BotAPIEmulator, method: str, **params: Any) -> tuple[int, dict[str, Any]]:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{api.base_url}{api.token}/{method}", json=params)
    return answer.status_code, answer.json()


async def test_get_updates_is_409_while_a_webhook_is_set(api: BotAPIEmulator, bot: telegram.Bot, receiver) -> None:
    assert await bot.set_webhook(receiver.url, secret_token="s3cret") is True
    status, body = await raw_call(api, "getUpdates", timeout=0)
    assert (status, body) == (409, {"ok": False, "error_code": 409, "description": CONFLICT})
    with pytest.raises(Conflict):
        await bot.get_updates(timeout=0)
    await bot.delete_webhook()
    assert await bot.get_updates(timeout=0) == ()


@pytest.mark.parametrize(
    ("params", "description"),
    [
        ({"url": "http://example.org/telegram/x"}, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"),
        (
            {"url": "https://example.org:8080/telegram/x"},
            "Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443",
        ),
        ({"url": "not a url"}, "Bad Request: invalid webhook URL specified"),
        ({"url": "https://example.org/x", "secret_token": "a" * 257}, "Bad Request: secret token is too long"),
        ({"url": "https://example.org/x", "secret_token": "a+b="}, "Bad Request: secret token contains unallowed characters"),
    ],
)
async def test_set_webhook_checks_like_telegram(params: dict[str, Any], description: str) -> None:
    async with BotAPIEmulator(local_mode=False) as api:
        status, body = await raw_call(api, "setWebhook", **params)
        assert (status, body["description"]) == (400, description)
        assert api.webhook is None
        _, info = await raw_call(api, "getWebhookInfo")
        assert info["result"]["url"] == ""


async def test_local_mode_takes_http_on_any_port_and_keeps_the_settings(api: BotAPIEmulator, bot, receiver) -> None:
    await bot.set_webhook(receiver.url, secret_token="a" * 256, allowed_updates=["message"])
    assert api.webhook is not None
    assert (api.webhook.url, api.webhook.secret_token, api.webhook.allowed_updates) == (
        receiver.url, "a" * 256, ["message"],
    )
    info = await bot.get_webhook_info()
    assert (info.url, info.allowed_updates, info.pending_update_count) == (receiver.url, ("message",), 0)
    await bot.set_webhook(receiver.url)  # allowed_updates left out: the previous ones stay
    assert api.webhook.allowed_updates == ["message"]
    await bot.set_webhook("")  # an empty url removes the webhook
    assert api.webhook is None


async def test_user_messages_are_posted_with_the_secret_header(api: BotAPIEmulator, bot, receiver) -> None:
    await bot.set_webhook(receiver.url, secret_token="s3cret-token_1")
    first = api.send_user_message(PRIVATE, "/follow s1")
    second = api.send_user_message(PRIVATE, "hello")
    await api.wait_for(lambda: len(receiver.posts) == 2)
    assert [body for _, body in receiver.posts] == [first, second]  # in order
    assert {headers["x-telegram-bot-api-secret-token"] for headers, _ in receiver.posts} == {"s3cret-token_1"}
    assert receiver.posts[0][0]["content-type"] == "application/json"
    await api.wait_for(lambda: api.telegram.updates.first() is None)
    with pytest.raises(Conflict):
        await bot.get_updates(timeout=0)


async def test_a_refused_post_is_retried_until_2xx(api: BotAPIEmulator, bot, receiver) -> None:
    await bot.set_webhook(receiver.url, secret_token="s")
    receiver.answers = [403, 500]
    update = api.send_user_message(PRIVATE, "/help")
    await api.wait_for(lambda: api.telegram.updates.first() is None)
    assert [body["update_id"] for _, body in receiver.posts] == [update["update_id"]] * 3
    assert [d.status for d in api.webhook_deliveries] == [403, 500, 200]
    info = await bot.get_webhook_info()
    assert info.last_error_message == "Wrong response from the webhook: 500 Internal Server Error"


async def test_an_update_is_given_up_after_the_last_try(api: BotAPIEmulator, bot, receiver) -> None:
    await bot.set_webhook(receiver.url)
    receiver.answers = [503] * 4  # one try and three retries
    api.send_user_message(PRIVATE, "lost")
    later = api.send_user_message(PRIVATE, "next")
    await api.wait_for(lambda: api.telegram.updates.first() is None)
    assert [d.status for d in api.webhook_deliveries] == [503] * 4 + [200]
    assert receiver.posts[-1][1] == later


async def test_a_lost_answer_makes_telegram_post_the_same_update_again(api: BotAPIEmulator, bot, receiver) -> None:
    await bot.set_webhook(receiver.url)
    api.lose_webhook_answers(1)
    update = api.send_user_message(PRIVATE, "/card")
    await api.wait_for(lambda: api.telegram.updates.first() is None)
    assert [body for _, body in receiver.posts] == [update, update]


async def test_updates_wait_for_get_updates_after_delete_webhook(api: BotAPIEmulator, bot) -> None:
    # A webhook nobody answers at: the update stays pending while it is retried, then
    # deleteWebhook hands what is pending to getUpdates.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/telegram/x"
    slow = BotAPIEmulator(private_pace=None, webhook_retry_delays=(5.0,))
    async with slow, telegram.Bot(slow.token, base_url=slow.base_url) as b:
        await b.set_webhook(url)
        update = slow.send_user_message(PRIVATE, "/help")
        await slow.wait_for(lambda: slow.webhook_deliveries)
        assert slow.webhook_deliveries[0].status is None
        assert (await b.get_webhook_info()).pending_update_count == 1
        await b.delete_webhook()
        got = await b.get_updates(timeout=0)
        assert [u.update_id for u in got] == [update["update_id"]]


async def test_set_webhook_with_a_bad_url_is_refused_by_ptb(api: BotAPIEmulator, bot) -> None:
    with pytest.raises(BadRequest, match="(?i)invalid webhook URL specified"):
        await bot.set_webhook("ftp://example.org/x")


# --- several bots ---------------------------------------------------------------------

SECOND = "222222:second-bot_token"


async def test_each_bot_posts_to_its_own_webhook_and_only_a_hooked_bot_refuses_get_updates(
    api: BotAPIEmulator, bot: telegram.Bot
) -> None:
    api.add_bot(SECOND)
    first_hook, second_hook = Receiver(), Receiver()
    async with serving(first_hook, second_hook), telegram.Bot(SECOND, base_url=api.base_url) as second:
        await bot.set_webhook(first_hook.url, secret_token="first")
        # The second bot has no webhook: it polls, and its users' messages wait for getUpdates.
        waiting = api.send_user_message(PRIVATE, "/help", token=SECOND)
        got = await second.get_updates(timeout=0)
        assert [u.update_id for u in got] == [waiting["update_id"]]
        with pytest.raises(Conflict):
            await bot.get_updates(timeout=0)
        assert (await second.get_webhook_info()).url == ""
        assert api.webhook_for(SECOND) is None and api.webhook_deliveries_for(SECOND) == []

        await second.set_webhook(second_hook.url, secret_token="second")
        with pytest.raises(Conflict):
            await second.get_updates(timeout=0)
        to_first = api.send_user_message(PRIVATE, "/follow a")
        to_second = api.send_user_message(PRIVATE, "/follow b", token=SECOND)
        await api.wait_for(lambda: first_hook.posts and len(second_hook.posts) == 2)
        # The update left pending by getUpdates (never confirmed) goes out first.
        assert [body for _, body in second_hook.posts] == [waiting, to_second]
        assert [body for _, body in first_hook.posts] == [to_first]
        assert {h["x-telegram-bot-api-secret-token"] for h, _ in first_hook.posts} == {"first"}
        assert {h["x-telegram-bot-api-secret-token"] for h, _ in second_hook.posts} == {"second"}
        assert [d.update_id for d in api.webhook_deliveries_for(SECOND)] == [waiting["update_id"], to_second["update_id"]]
        assert [d.update_id for d in api.webhook_deliveries] == [to_first["update_id"]]
        assert (await second.get_webhook_info()).url == second_hook.url
        assert (await bot.get_webhook_info()).url == first_hook.url

        api.lose_webhook_answers(1, token=SECOND)  # only the second bot's next answer is lost
        again = api.send_user_message(PRIVATE, "/card", token=SECOND)
        once = api.send_user_message(PRIVATE, "/card")
        await api.wait_for(lambda: len(second_hook.posts) == 4 and len(first_hook.posts) == 2)
        assert [body for _, body in second_hook.posts[2:]] == [again] * 2
        assert [body for _, body in first_hook.posts[1:]] == [once]
        assert (await second.get_webhook_info()).last_error_message == "Read timeout expired"
        assert (await bot.get_webhook_info()).last_error_message is None

        await second.delete_webhook()  # the first bot keeps its webhook
        assert await second.get_updates(timeout=0) == ()
        with pytest.raises(Conflict):
            await bot.get_updates(timeout=0)
        later = api.send_user_message(PRIVATE, "/help")
        await api.wait_for(lambda: len(first_hook.posts) == 3)
        assert first_hook.posts[-1][1] == later and len(second_hook.posts) == 4


async def test_a_bot_added_while_serving_and_its_webhook_survive_a_restart(api: BotAPIEmulator) -> None:
    api.add_bot(SECOND)
    hook = Receiver()
    async with serving(hook), telegram.Bot(SECOND, base_url=api.base_url) as second:
        await second.set_webhook(hook.url)
        before = api.send_user_message(PRIVATE, "one", token=SECOND)
        await api.wait_for(lambda: hook.posts)
        await api.stop()
        await api.start()
        after = api.send_user_message(PRIVATE, "two", token=SECOND)
        await api.wait_for(lambda: len(hook.posts) == 2)
    assert [body for _, body in hook.posts] == [before, after]
    assert api.webhook_deliveries == []


async def test_an_added_bot_checks_its_webhook_like_the_first() -> None:
    async with BotAPIEmulator(local_mode=False) as strict:
        strict.add_bot(SECOND)
        async with httpx.AsyncClient() as client:
            answer = await client.post(f"{strict.base_url}{SECOND}/setWebhook", json={"url": "http://example.org/x"})
        assert answer.json()["description"] == "Bad Request: bad webhook: An HTTPS URL must be provided for webhook"
        assert strict.webhook_for(SECOND) is None
