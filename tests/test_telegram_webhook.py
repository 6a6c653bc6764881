"""Telegram webhook mode end to end: the Bot API emulator posts users' messages to a
gateway's `/telegram/<path>`, the gateway hands them to the adapter through a real
Redis, and the adapter's command handlers answer — real python-telegram-bot, real
uvicorn gateways, `run_adapter` and `run_gateway` as `serve` runs them."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings
from progresscast.config.settings import Settings
from progresscast.gateway import run_gateway
from progresscast.gateway.telegram_webhook import MAX_UPDATE_BYTES
from progresscast.http.server import address, bind
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.telegram.bot import run_adapter
from progresscast.telegram.options import AdapterOptions
from progresscast.telegram.standby import run_bots
from progresscast.testing import BotAPIEmulator, ShownMessage
from progresscast.timescale import ENV as TIME_SCALE_ENV

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

CHAT = 4242
SECRET = "webhook-s3cret_token"
PATH = "/telegram/hook-1"
BOT_ID = 123456  # the emulator's default token is 123456:…


@pytest.fixture(autouse=True)
def scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "0.05")


@pytest.fixture
async def api() -> AsyncIterator[BotAPIEmulator]:
    async with BotAPIEmulator(webhook_retry_delays=(0.05, 0.1, 0.2)) as emulator:
        yield emulator


def settings_for(api: BotAPIEmulator, *, token: bool = True, webhook: str | None = None, secret: str = SECRET) -> Settings:
    telegram: dict[str, Any] = {"apiBaseUrl": api.base_url, "access": "open"}
    if token:
        telegram["token"] = api.token
    if webhook is not None:
        telegram["webhook"] = {"url": webhook, "secretToken": secret}
    return Settings.model_validate({"agents": {"default": "main"}, "channels": {"telegram": telegram}})


class Running:
    """Gateways and adapters started on the test's loop; cancelled at the end."""

    def __init__(self, api: BotAPIEmulator, redis: Any) -> None:
        self.api = api
        self.redis = redis
        self.tasks: list[asyncio.Task[None]] = []

    def socket(self) -> tuple[Any, str]:
        sock = bind("127.0.0.1:0")
        return sock, address(sock)

    async def gateway(self, settings: Settings, sock: Any) -> None:
        started = asyncio.Event()
        self.tasks.append(asyncio.create_task(run_gateway(settings, self.redis, sock=sock, started=started)))
        await asyncio.wait_for(started.wait(), 10)

    async def adapter(self, settings: Settings, *, ready: str = "setWebhook") -> None:
        before = len(self.api.calls)
        options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0)
        task = asyncio.create_task(run_adapter(settings, self.redis, options=options))
        self.tasks.append(task)
        await self.api.wait_for(lambda: task.done() or any(c.method == ready for c in self.api.calls[before:]), 10)
        if task.done():
            task.result()

    async def stop(self) -> None:
        for task in reversed(self.tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.wait_for(task, 15)

    async def command(self, text: str) -> ShownMessage:
        """A user types `text`; the bot's first message after it."""
        sent = self.api.send_user_message(CHAT, text)["message"]["message_id"]
        return await self.api.wait_for(
            lambda: next((m for m in self.api.chat(CHAT).visible() if m.message_id > sent), None), 10
        )


@pytest.fixture
async def running(api: BotAPIEmulator, redis: Any) -> AsyncIterator[Running]:
    made = Running(api, redis)
    yield made
    await made.stop()


async def one_gateway_with_the_bot(running: Running, api: BotAPIEmulator) -> tuple[Settings, str]:
    sock, base = running.socket()
    settings = settings_for(api, webhook=base + PATH)
    await running.gateway(settings, sock)
    await running.adapter(settings)
    return settings, base


def update(update_id: int, text: str = "/help") -> dict[str, Any]:
    return {
        "update_id": update_id,
        "message": {
            "message_id": 1000 + update_id, "date": 1, "text": text,
            "chat": {"id": CHAT, "type": "private", "first_name": "T"},
            "from": {"id": CHAT, "is_bot": False, "first_name": "T"},
            "entities": [{"type": "bot_command", "offset": 0, "length": len(text.split()[0])}],
        },
    }  # fmt: skip


async def post(url: str, body: Any, secret: str | None = SECRET, **kw: Any) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if secret is not None:
        headers["X-Telegram-Bot-Api-Secret-Token"] = secret
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.post(url, content=content, headers=headers, **kw)


# --- the headline -------------------------------------------------------------------


async def test_follow_by_webhook_then_the_draft_appears(api: BotAPIEmulator, running: Running, redis: Any) -> None:
    _, base = await one_gateway_with_the_bot(running, api)
    assert api.webhook is not None
    assert (api.webhook.url, api.webhook.secret_token, api.webhook.allowed_updates) == (base + PATH, SECRET, ["message", "callback_query"])
    reply = await running.command("/follow s1")
    assert reply.text.startswith("Following agent:main:s1")
    await CardStore(redis).put(Owner("main", "s1"), CardInput.parse({"plan": [{"step": "Reproduce", "status": "in_progress"}]}))
    draft = await api.wait_for(
        lambda: next((m for m in api.chat(CHAT).visible() if m.message_id > reply.message_id), None), 10
    )
    assert "Reproduce" in draft.text
    assert [d.status for d in api.webhook_deliveries] == [200]
    assert not [c for c in api.calls if c.method == "getUpdates"]  # no polling in webhook mode


async def test_a_wrong_or_missing_secret_is_403_and_nothing_is_handed_over(
    api: BotAPIEmulator, running: Running, redis: Any
) -> None:
    _, base = await one_gateway_with_the_bot(running, api)
    for secret in ("wrong", None, SECRET[:-1], SECRET + "x"):
        answer = await post(base + PATH, update(7), secret=secret)
        assert answer.status_code == 403, answer.text
        assert "X-Telegram-Bot-Api-Secret-Token".lower() in answer.json()["error"]["message"].lower()
    assert await redis.xlen(keys.tg_updates(BOT_ID)) == 0
    assert (await post(base + "/telegram/other", update(7))).status_code == 404
    assert (await post(base + PATH, b"{not json")).status_code == 400
    assert (await post(base + PATH, [1, 2])).status_code == 400
    assert (await post(base + PATH, {"update_id": "7"})).json()["error"]["field"] == "update_id"
    big = update(8, "/help " + "x" * MAX_UPDATE_BYTES)
    assert (await post(base + PATH, big)).json()["error"]["code"] == "body_too_large"
    assert await redis.xlen(keys.tg_updates(BOT_ID)) == 0
    assert api.chat(CHAT).visible() == []


@pytest.mark.backends
async def test_a_retried_update_runs_once(api: BotAPIEmulator, running: Running, redis: Any) -> None:
    _, base = await one_gateway_with_the_bot(running, api)
    api.lose_webhook_answers(1)  # Telegram never hears the first 200: it posts the update again
    reply = await running.command("/follow s1")
    await api.wait_for(lambda: len(api.webhook_deliveries) == 2 and api.webhook_deliveries[-1].status == 200)
    first, again = (await post(base + PATH, update(50))), (await post(base + PATH, update(50)))
    assert (first.json(), again.json()) == ({"ok": True, "duplicate": False}, {"ok": True, "duplicate": True})
    help_reply = await api.wait_for(
        lambda: next((m for m in api.chat(CHAT).visible() if "what this bot does" in m.text), None), 10
    )
    # Every update handed over is handled before the next: nothing more can come after these.
    await running.command("/card")
    replies = [m.text for m in api.chat(CHAT).visible()]
    assert sum(t.startswith("Following agent:main:s1") for t in replies) == 1, replies
    assert sum("already follows" in t for t in replies) == 0, replies
    assert sum("what this bot does" in t for t in replies) == 1, replies
    assert reply.message_id < help_reply.message_id
    assert await redis.xlen(keys.tg_updates(BOT_ID)) == 3  # /follow, update 50, /card


async def test_updates_of_the_wrong_shape_are_logged_escaped_and_skipped(
    api: BotAPIEmulator, running: Running, caplog: pytest.LogCaptureFixture
) -> None:
    """Whoever holds the secret (or Telegram itself, tomorrow) posts updates our bot
    library cannot read: each is skipped with one escaped log line, and the bot goes on
    answering the updates after them."""
    _, base = await one_gateway_with_the_bot(running, api)
    forged = "x\nERROR progresscast forged line"
    for i, message in enumerate([forged, {"chat": "nope"}, ["x"]]):
        answer = await post(base + PATH, {"update_id": 900_000 + i, "message": message})
        assert answer.status_code == 200, answer.text
    reply = await running.command("/follow s3")
    assert reply.text.startswith("Following agent:main:s3")
    skipped = [r.getMessage() for r in caplog.records if "skipped update" in r.getMessage()]
    assert len(skipped) == 3, skipped
    assert all("\n" not in line for line in skipped) and "forged line" in skipped[0], skipped


@pytest.mark.backends
async def test_a_gateway_without_the_bot_token_hands_updates_to_the_adapter(
    api: BotAPIEmulator, running: Running
) -> None:
    sock, base = running.socket()
    hook = base + PATH
    await running.gateway(settings_for(api, token=False, webhook=hook), sock)  # the load balancer's choice
    await running.adapter(settings_for(api, webhook=hook))  # its own gateway is not in the URL
    reply = await running.command("/follow s2")
    assert reply.text.startswith("Following agent:main:s2")
    assert [d.status for d in api.webhook_deliveries] == [200]


async def test_polling_still_works_and_deletes_a_leftover_webhook(api: BotAPIEmulator, running: Running) -> None:
    sock, base = running.socket()
    await running.gateway(settings_for(api), sock)
    async with httpx.AsyncClient() as client:  # set earlier, by a webhook-mode run
        answer = await client.post(f"{api.base_url}{api.token}/setWebhook", json={"url": base + PATH})
        assert answer.json()["ok"] is True
    await running.adapter(settings_for(api), ready="getUpdates")
    assert api.webhook is None
    reply = await running.command("/follow s3")
    assert reply.text.startswith("Following agent:main:s3")
    assert api.webhook_deliveries == []


async def test_a_webhook_telegram_refuses_stops_the_adapter_with_one_line(running: Running) -> None:
    async with BotAPIEmulator(local_mode=False) as strict:
        settings = settings_for(strict, webhook="http://127.0.0.1:9/telegram/x")
        with pytest.raises(ConfigError, match=r"^channels\.telegram\.webhook: the Bot API refused the webhook \((?i:.*https)"):
            await run_adapter(settings, running.redis, options=AdapterOptions(consumer="t"))


async def test_two_bots_each_on_its_own_webhook_through_one_gateway(
    api: BotAPIEmulator, running: Running, redis: Any
) -> None:
    second, second_id, second_path = "222222:second-bot_token", 222222, "/telegram/hook-2"
    api.add_bot(second)
    sock, base = running.socket()
    hooks = {"first": base + PATH, "second": base + second_path}
    settings = Settings.model_validate({
        "agents": {"default": "main"},
        "channels": {"telegram": {
            "apiBaseUrl": api.base_url, "token": api.token, "access": "open",
            "webhook": {"url": hooks["first"], "secretToken": SECRET},
            "bots": [{"token": second, "webhook": {"url": hooks["second"], "secretToken": SECRET + "-2"}}],
        }},
    })  # fmt: skip
    await running.gateway(settings, sock)
    options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0)
    running.tasks.append(asyncio.create_task(run_bots(settings, redis, options=options)))
    await api.wait_for(lambda: api.webhook is not None and api.webhook_for(second) is not None, 10)
    assert (api.webhook.url, api.webhook_for(second).url) == (hooks["first"], hooks["second"])  # type: ignore[union-attr]

    # One chat talks to both bots; each bot hears only what was said to it, by its own webhook.
    to_first = api.send_user_message(CHAT, "/follow s1")["message"]["message_id"]
    to_second = api.send_user_message(CHAT, "/follow s2", token=second)["message"]["message_id"]

    def reply(after: int, token: str | None = None) -> ShownMessage | None:
        return next((m for m in api.chat(CHAT, token=token).visible() if m.message_id > after), None)

    first_reply = await api.wait_for(lambda: reply(to_first), 10)
    second_reply = await api.wait_for(lambda: reply(to_second, second), 10)
    assert first_reply.text.startswith("Following agent:main:s1")
    assert second_reply.text.startswith("Following agent:main:s2")
    assert [d.status for d in api.webhook_deliveries] == [200]
    assert [d.status for d in api.webhook_deliveries_for(second)] == [200]
    assert (await redis.xlen(keys.tg_updates(BOT_ID)), await redis.xlen(keys.tg_updates(second_id))) == (1, 1)
    assert not [c for c in api.calls if c.method == "getUpdates"]  # neither bot polls

    store = CardStore(redis)
    await store.put(Owner("main", "s2"), CardInput.parse({"plan": [{"step": "Second", "status": "in_progress"}]}))
    draft = await api.wait_for(lambda: reply(second_reply.message_id, second), 10)
    assert "Second" in draft.text
    await store.put(Owner("main", "s1"), CardInput.parse({"plan": [{"step": "First", "status": "in_progress"}]}))
    draft = await api.wait_for(lambda: reply(first_reply.message_id), 10)
    assert "First" in draft.text
    assert [m.text for m in api.chat(CHAT, token=second).visible()].count(draft.text) == 0


# --- settings -------------------------------------------------------------------------


def load(tmp_path: Path, webhook: str) -> Settings:
    path = tmp_path / "c.toml"
    path.write_text(f"[channels.telegram]\n[channels.telegram.webhook]\n{webhook}\n")
    return load_settings(path)


def test_webhook_settings_read_the_secret_from_the_environment(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("HOOK_SECRET", "abc_DEF-123")
    settings = load(tmp_path, 'url = "https://example.org/telegram/a/b"\nsecretToken = "env:HOOK_SECRET"')
    hook = settings.channels.telegram.webhook  # type: ignore[union-attr]
    assert hook is not None and (hook.secretToken, hook.path) == ("abc_DEF-123", "/telegram/a/b")
    assert settings_for_default(tmp_path).channels.telegram.webhook is None  # type: ignore[union-attr]


def settings_for_default(tmp_path: Path) -> Settings:
    path = tmp_path / "d.toml"
    path.write_text('[channels.telegram]\ntoken = "1:x"\n')
    return load_settings(path)


def test_an_unset_secret_variable_is_named_by_require_env(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("HOOK_SECRET", raising=False)
    settings = load(tmp_path, 'url = "https://example.org/telegram/a"\nsecretToken = "env:HOOK_SECRET"')
    with pytest.raises(ConfigError, match=r"channels\.telegram\.webhook\.secretToken: the environment variable HOOK_SECRET"):
        settings.require_env()


@pytest.mark.parametrize(
    ("webhook", "message"),
    [
        ('url = "ftp://example.org/telegram/a"\nsecretToken = "s"', r"webhook\.url: 'ftp://.*' must be an http\(s\) URL"),
        ('url = "https://example.org/hook"\nsecretToken = "s"', r"webhook\.url: .*path starts with /telegram/"),
        ('url = "https://example.org/telegram/"\nsecretToken = "s"', r"webhook\.url: "),
        ('url = "https://example.org/telegram/a?x=1"\nsecretToken = "s"', r"webhook\.url: "),
        ('url = "https://example.org/telegram/a"\nsecretToken = "a+b"', r"webhook\.secretToken: must be 1-256 characters"),
        ('url = "https://example.org/telegram/a"\nsecretToken = ""', r"webhook\.secretToken: must be 1-256"),
        (f'url = "https://example.org/telegram/a"\nsecretToken = "{"a" * 257}"', r"webhook\.secretToken: must be 1-256"),
        ('url = "https://example.org/telegram/a"', r"webhook\.secretToken: is required"),
    ],
)
def test_bad_webhook_settings_are_one_line_naming_the_setting(tmp_path: Path, webhook: str, message: str) -> None:
    with pytest.raises(ConfigError, match=r"^config .*: channels\.telegram\." + message) as caught:
        load(tmp_path, webhook)
    assert "\n" not in str(caught.value)


@pytest.mark.backends
async def test_an_adapter_that_wakes_late_never_moves_the_cursor_back(redis: Any) -> None:
    """The old adapter stalls in an update (a pause past its lease) while the new one
    handles what came after and stops; when the old one goes on, the cursor stays where
    the new one left it, so what the new one handled is not handled again."""
    from progresscast.telegram.webhook import UpdateInbox

    bot_id = 4242
    cursor_key = keys.tg_updates_cursor(bot_id)
    old, new = UpdateInbox(redis, bot_id), UpdateInbox(redis, bot_id)
    stalled, go_on = asyncio.Event(), asyncio.Event()
    handled: dict[str, list[int]] = {"old": [], "new": []}

    async def old_handles(update: dict[str, Any]) -> None:
        handled["old"].append(update["update_id"])
        stalled.set()
        await go_on.wait()

    async def new_handles(update: dict[str, Any]) -> None:
        handled["new"].append(update["update_id"])

    async def until(condition: Any) -> None:
        async with asyncio.timeout(10):
            while True:
                value = condition()
                if asyncio.iscoroutine(value):
                    value = await value
                if value:
                    return
                await asyncio.sleep(0.01)

    async def cursor_is(entry_id: str) -> bool:
        return bool(await redis.get(cursor_key) == entry_id)

    async def newest() -> str:
        [(entry_id, _)] = await redis.xrevrange(keys.tg_updates(bot_id), count=1)
        return str(entry_id)

    await old.hand_over({"update_id": 1})
    old.start(old_handles)
    try:
        await asyncio.wait_for(stalled.wait(), 5)
        for update_id in (2, 3):
            await old.hand_over({"update_id": update_id})
        new.start(new_handles)
        third = await newest()
        await until(lambda: cursor_is(third))
        await new.close()
        go_on.set()
        await old.hand_over({"update_id": 4})
        await until(lambda: handled["old"][-1:] == [4])
    finally:
        await old.close()
        await new.close()
    assert handled == {"old": [1, 4], "new": [1, 2, 3]}
    assert await redis.get(cursor_key) == await newest()

