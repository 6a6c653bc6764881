"""A loopback Telegram Bot API server for tests, shipped like Starlette's TestClient.

    async with BotAPIEmulator() as api:
        bot = telegram.Bot(api.token, base_url=api.base_url)
        await bot.initialize()                      # getMe
        api.send_user_message(42, "/follow ticket-1")
        ...
        await api.wait_for(lambda: api.chat(42).visible())
        assert api.chat(42).texts() == ["..."]

It serves ``/bot<token>/<method>`` over real HTTP (uvicorn on 127.0.0.1, a free
port) so the code under test runs its real HTTP client, and it behaves like
Telegram where tests care: HTML parsed with Telegram's rules, the 4,096-character
limit, "message is not modified", flood limits answered with 429 and
``retry_after``. Tests can inject failures (:meth:`fail_next`,
:meth:`timeout_next`, or a random share of all calls: :meth:`fail_randomly`), act as users (:meth:`send_user_message`,
:meth:`delete_by_user`) and read what every chat shows (:meth:`chat`), which
calls were made (:attr:`calls`) and how many were open at once (:meth:`most_in_flight`).

Webhooks: after ``setWebhook`` the users' messages are POSTed to the webhook URL
(with ``X-Telegram-Bot-Api-Secret-Token``, retried while the answer is not 2xx) instead
of being kept for ``getUpdates``, which then answers 409 until ``deleteWebhook``. Like
a local Bot API server (``--local``), it accepts http URLs on any port unless made with
``local_mode=False``. :attr:`webhook_deliveries` lists every POST and its answer.

Several bots: :meth:`add_bot` serves another token on the same server (its own chats,
updates, pacing and webhook: each bot's updates are POSTed to its own webhook, and only
a bot with a webhook set has getUpdates refused); the methods that concern one bot
take ``token=`` (default: the first), and the webhook's properties (the first bot's)
have a ``_for(token)`` twin. Several clients of one bot can be told apart by giving
each its own :meth:`base_url_for` (recorded as :attr:`Call.instance`).
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Unpack

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ._faults import Fault, FaultSettings, RandomFaults, description_of, take_fault
from ._loopback import LoopbackServer
from ._pacing import BOT_PACE, GROUP_PACE, PRIVATE_PACE, Pace, Pacer
from ._params import chat_id_of, read_params
from ._state import ApiError, Call, ChatState, not_found, refusal
from ._telegram import PACED, CallbackQuery, FakeTelegram, Handler
from ._webhook import Delivery, Webhook, WebhookSender

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "123456:TEST-token_for-progresscast"


class _EscapedJSON(JSONResponse):
    """Answers with non-ASCII as JSON escapes (as JSON allows), so a test can hand the bot
    text holding a lone surrogate (`\\ud800`), which no UTF-8 encoder would send."""

    def render(self, content: Any) -> bytes:
        return json.dumps(content, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")


@dataclass(frozen=True)
class ServedBot:
    """One bot the emulator serves: its state, its flood limits and its webhook's sender."""

    telegram: FakeTelegram
    pacer: Pacer
    webhook_sender: WebhookSender


class BotAPIEmulator(LoopbackServer):
    """An emulated Bot API for one bot (or more: :meth:`add_bot`); use as
    ``async with BotAPIEmulator(token=...) as api``.

    Pacing: a private chat gets ``private_pace`` (default: a burst of 3, then 1 call per
    second), a group ``group_pace`` (a burst of 20, then 20 per minute), the bot as a
    whole ``bot_pace`` (30 per second); pass None to switch a limit off. ``count``
    chooses how "message is too long" counts: "utf16" (strict, default) or
    "codepoints" (what TDLib itself counts). ``latency``: seconds every answer takes
    (a server far from Telegram's data centres: real round trips are 0.02–0.3 s); the
    call lands on arrival and its answer is held, each call on its own, none waiting
    for another's.
    """

    name = "Bot API emulator"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        private_pace: Pace | None = PRIVATE_PACE,
        group_pace: Pace | None = GROUP_PACE,
        bot_pace: Pace | None = BOT_PACE,
        timeout_delay: float = 6.0,
        count: str = "utf16",
        bot_username: str = "progresscast_test_bot",
        port: int = 0,
        local_mode: bool = True,
        webhook_retry_delays: Sequence[float] = (0.2, 0.5, 1.0, 2.0),
        webhook_timeout: float = 5.0,
        fault_rate: float = 0.0,
        fault_seed: int = 0,
        latency: float = 0.0,
    ) -> None:
        if latency < 0:
            raise ValueError(f"latency: must be 0 or more seconds, not {latency!r}")
        self.latency = latency
        """Seconds every answer is held (the round trip of a distant server)."""
        self._paces = (private_pace, group_pace, bot_pace)
        self._count = count
        self._local_mode = local_mode
        self._webhook_retry_delays = tuple(webhook_retry_delays)
        self._webhook_timeout = webhook_timeout
        self.bots: dict[str, ServedBot] = {}
        """Every bot served, by token (the first is the one made with the emulator)."""
        first = self._serve(FakeTelegram(token, bot_username=bot_username, count=count, local_mode=local_mode))
        self.telegram, self.pacer, self.webhook_sender = first.telegram, first.pacer, first.webhook_sender
        self.timeout_delay = timeout_delay
        """Default hold of :meth:`timeout_next`: past python-telegram-bot's 5 s read timeout."""
        self.calls: list[Call] = []
        self._faults: list[Fault] = []
        self.random_faults: RandomFaults | None = None
        """The random fault mode (:meth:`fail_randomly`), None when off."""
        if fault_rate:
            self.fail_randomly(fault_rate, seed=fault_seed)
        super().__init__(
            Starlette(
                routes=[
                    Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                    Route("/i/{instance}/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                ]
            )
        )
        self._port = port
        """0: a free port, chosen at start."""

    def add_bot(self, token: str, *, bot_username: str | None = None) -> FakeTelegram:
        """Serve one more bot (its id is the number before ':' in the token)."""
        if token in self.bots:
            raise ValueError("the emulator serves this token already")
        username = bot_username or f"progresscast_test_bot_{len(self.bots) + 1}"
        served = self._serve(FakeTelegram(token, bot_username=username, count=self._count, local_mode=self._local_mode))
        if self._task is not None:  # added while serving: its webhook works at once
            served.webhook_sender.start()
        return served.telegram

    def _serve(self, telegram: FakeTelegram) -> ServedBot:
        sender = WebhookSender(
            telegram, retry_delays=self._webhook_retry_delays, timeout=self._webhook_timeout, on_change=self._notify
        )
        served = self.bots[telegram.token] = ServedBot(telegram, Pacer(*self._paces), sender)
        return served

    def _served(self, token: str | None) -> ServedBot:
        return self.bots[token or self.telegram.token]

    def bot(self, token: str | None = None) -> FakeTelegram:
        return self._served(token).telegram

    # --- lifecycle -------------------------------------------------------------------------

    async def start(self) -> BotAPIEmulator:
        """Serve on a free port — or, after :meth:`stop`, on the same one again.

        Stopping and starting again emulates Telegram being unreachable for a while:
        chats, calls and faults are kept.
        """
        for served in self.bots.values():
            served.telegram.closing.clear()
        await super().start()
        for served in self.bots.values():
            served.webhook_sender.start()
        return self

    async def stop(self) -> None:
        # Wake long polls and held answers first, so that shutdown does not wait for them.
        for served in self.bots.values():
            served.telegram.closing.set()
            served.telegram.updates.wake()
        for served in self.bots.values():
            await served.webhook_sender.stop()
        await super().stop()

    @property
    def token(self) -> str:
        return self.telegram.token

    @property
    def base_url(self) -> str:
        """What python-telegram-bot takes as ``base_url`` (the token is appended to it)."""
        return f"{self.url}/bot"

    def base_url_for(self, instance: str) -> str:
        """A ``base_url`` whose calls are recorded with ``Call.instance == instance``."""
        return f"{self.url}/i/{instance}/bot"

    @property
    def bot_user(self) -> dict[str, Any]:
        return self.telegram.bot_user

    @property
    def rich_supported(self) -> bool:
        """False emulates a server before Bot API 10.1: sendRichMessage is 404 ``Not Found``, and
        ``rich_message`` is an unknown parameter, ignored like every unknown parameter — so an
        editMessageText that carries only it answers "Bad Request: message text is empty"."""
        return self.telegram.rich_supported

    @rich_supported.setter
    def rich_supported(self, value: bool) -> None:
        self.telegram.rich_supported = value

    # --- what tests look at ----------------------------------------------------------------

    def chat(self, chat_id: int, *, token: str | None = None) -> ChatState:
        """What a chat shows: ``.messages`` (id → ShownMessage), ``.visible()``, ``.texts()``."""
        return self.bot(token).chat(chat_id)

    def calls_for(self, chat_id: int, method: str | None = None, *, token: str | None = None) -> list[Call]:
        """Calls made to one chat (optionally of one method, by one bot), in order."""
        return [
            c
            for c in self.calls
            if c.chat_id == chat_id and (method is None or c.method == method) and (token is None or c.token == token)
        ]

    def most_in_flight(self, calls: Iterable[Call] | None = None) -> int:
        """The most of ``calls`` (default: all) the emulator was answering at one moment,
        from each call's arrival to its answer leaving (a held one: until now). A client
        that keeps at most N requests open is never seen with more."""
        edges = []
        for call in self.calls if calls is None else calls:
            edges.append((call.at, 1))
            edges.append((call.answered if call.answered is not None else time.monotonic(), -1))
        most = now = 0
        for _, step in sorted(edges):  # at a tie an answer leaves before the next arrives
            now += step
            most = max(most, now)
        return most

    @property
    def webhook(self) -> Webhook | None:
        """The first bot's :meth:`webhook_for`."""
        return self.webhook_for()

    def webhook_for(self, token: str | None = None) -> Webhook | None:
        """The webhook setWebhook set for a bot (url, secret_token, allowed_updates), if any."""
        return self.bot(token).webhook

    @property
    def webhook_deliveries(self) -> list[Delivery]:
        """The first bot's :meth:`webhook_deliveries_for`."""
        return self.webhook_deliveries_for()

    def webhook_deliveries_for(self, token: str | None = None) -> list[Delivery]:
        """Every POST of a bot's updates to its webhook, in order: the update id and the
        HTTP status answered."""
        return self._served(token).webhook_sender.deliveries

    def lose_webhook_answers(self, times: int = 1, *, token: str | None = None) -> None:
        """The next ``times`` POSTs to a bot's webhook reach it, but their answers are lost:
        Telegram takes them as failed and posts the same update again."""
        self._served(token).webhook_sender.lose_answers += times

    # --- what users do ---------------------------------------------------------------------

    def send_user_message(
        self,
        chat_id: int,
        text: str,
        *,
        chat_type: str | None = None,
        message_thread_id: int | None = None,
        user_id: int | None = None,
        first_name: str = "Tester",
        username: str | None = None,
        token: str | None = None,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        """A user writes ``text`` in a chat (`reply_to`: as a reply to that message); returns
        the Update that getUpdates (or the webhook) will deliver.

        ``chat_type`` defaults from the id (positive: private; below -10^12: supergroup; else
        group); ``user_id`` defaults to the chat id in a private chat. ``/commands`` get
        ``bot_command`` entities; a thread id in a supergroup makes it a forum topic message.
        """
        update = self.bot(token).user_message(
            chat_id, text, chat_type=chat_type, message_thread_id=message_thread_id, user_id=user_id,
            first_name=first_name, username=username, reply_to=reply_to,
        )
        self._notify()
        return update

    def press(
        self, chat_id: int, message_id: int, button: str | int, *, user_id: int | None = None,
        first_name: str = "Tester", username: str | None = None, token: str | None = None, forged: bool = False,
    ) -> str:
        """A user presses a button of a bot message: `button` is its text, its place (0 =
        the first), or its `callback_data`. Returns the callback query's id (its answer:
        `callback(id)`). `forged`: `button` is callback data the message does not carry, as
        a modified client or a replay would send."""
        telegram = self.bot(token)
        chat = telegram.chat(chat_id)
        msg = chat.messages.get(message_id)
        buttons = [b for row in ((msg.reply_markup or {}).get("inline_keyboard", []) if msg else []) for b in row]
        if isinstance(button, int):
            if not 0 <= button < len(buttons):
                raise KeyError(f"message {message_id} has {len(buttons)} buttons, not a button {button}")
            data = buttons[button].get("callback_data")
        else:
            data = next((b.get("callback_data") for b in buttons if b.get("text") == button), button)
        sender = user_id if user_id is not None else (chat_id if chat.type == "private" else 424242)
        update = telegram.press(
            chat_id, message_id, str(data), user_id=sender, first_name=first_name, username=username, forged=forged
        )
        self._notify()
        return str(update["callback_query"]["id"])

    def callback(self, query_id: str, *, token: str | None = None) -> CallbackQuery:
        """A press and how the bot answered it (`answered`, `text`)."""
        return self.bot(token).callbacks[query_id]

    def delete_by_user(self, chat_id: int, message_id: int, *, token: str | None = None) -> None:
        """A user deletes a message: later edits answer "message to edit not found"."""
        chat = self.bot(token).chat(chat_id)
        if message_id not in chat.messages:
            raise KeyError(f"chat {chat_id} shows no message {message_id}")
        chat.deleted[message_id] = chat.messages.pop(message_id)
        self._notify()

    # --- fault injection -------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        *,
        status: int = 500,
        description: str | None = None,
        retry_after: int | None = None,
        times: int = 1,
        chat_id: int | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` (to ``chat_id`` if given) with an error.

        Nothing is applied. A 429 defaults to ``Too Many Requests: retry after N`` with
        ``parameters.retry_after`` N (``retry_after`` or 5).
        """
        self._check_method(method)
        parameters = None
        if status == 429 or retry_after is not None:
            retry_after = retry_after if retry_after is not None else 5
            parameters = {"retry_after": retry_after}
        if description is None:
            description = description_of(status, retry_after)
        self._faults.append(Fault(method.lower(), chat_id, times, status, description, parameters))

    def timeout_next(
        self,
        method: str,
        times: int = 1,
        *,
        apply: bool = True,
        delay: float | None = None,
        land_after: float = 0.0,
        chat_id: int | None = None,
    ) -> None:
        """Hold the answer to the next ``times`` calls of ``method`` for ``delay`` seconds.

        With ``apply=True`` the call takes effect (without pacing) — it reached Telegram,
        the client just never heard back; with ``apply=False`` it is dropped.
        ``land_after`` makes an applied call take effect only that many seconds after it
        arrived (a request still in flight at the server when the client gave up); the
        answer is still held ``delay`` seconds in all. ``delay`` defaults to
        :attr:`timeout_delay`; make it longer than the client's read timeout.
        """
        self._check_method(method)
        hold = self.timeout_delay if delay is None else delay
        self._faults.append(
            Fault(method.lower(), chat_id, times, delay=hold, apply=apply, land_after=max(0.0, land_after))
        )

    def clear_faults(self) -> None:
        """Forget the named faults still pending and switch the random fault mode off."""
        self._faults.clear()
        self.random_faults = None

    def fail_randomly(self, rate: float, **settings: Unpack[FaultSettings]) -> RandomFaults:
        """Fail ``rate`` (0 to 1) of the calls to ``methods`` (default: those that act on a
        chat) with a mix, drawn from ``seed``, of 500/502, timeouts and 429 — answered as
        Telegram answers them. The settings (``seed``, ``methods``, ``mix``, ``applied``,
        ``max_retry_after``, ``hold``) are :class:`RandomFaults`'s; a timeout's ``hold``
        defaults to :attr:`timeout_delay`. Named faults (:meth:`fail_next`,
        :meth:`timeout_next`) go first. ``rate`` 0 switches the mode off. Returns the
        mode; its ``drawn`` counts what it injected.
        """
        faults = RandomFaults(rate, **settings)
        if "methods" in settings:
            for method in faults.methods:
                self._check_method(method)
        self.random_faults = faults if rate > 0 else None
        return faults

    def _check_method(self, method: str) -> None:
        # A misspelt method would never match and the test would pass for the wrong reason.
        if method.lower() not in self.telegram.methods:
            raise ValueError(f"the emulator has no method {method!r}")

    # --- serving ---------------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> JSONResponse:
        call = Call(request.path_params["method"], None, {})
        call.instance = request.path_params.get("instance")
        self.calls.append(call)
        hold = 0.0
        try:
            call.params = await read_params(request)
            call.chat_id = chat_id_of(call.params)
            handler = self._route(call, request.path_params["token"])
            fault = self._take_fault(call.method, call.chat_id)
            if fault is not None:
                call.injected = True
                if fault.delay is None:
                    raise ApiError(fault.status, fault.description, fault.parameters)
                call.timed_out, hold = True, fault.delay
                if not fault.apply:
                    raise ApiError(504, "Gateway Timeout: dropped (an injected timeout)")
                if fault.land_after:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self.telegram.closing.wait(), timeout=fault.land_after)
                    hold = max(0.0, hold - fault.land_after)
            # A random timeout that reached Telegram counts against the flood limits (over
            # them it is refused, with an answer the client never hears); a named one not.
            paced = fault is None or fault.paced
            call.result = await self._run(handler, call, paced=paced)
            call.applied = call.method in PACED
            body: dict[str, Any] = {"ok": True, "result": call.result}
        except ApiError as e:
            call.status, call.description = e.status, e.description
            body = e.envelope()
        except ClientDisconnect:
            # The client went away mid-request (a killed process): Telegram never saw a
            # whole call, so none is recorded, and nobody hears the answer.
            self.calls.remove(call)
            return JSONResponse({}, status_code=400)
        except Exception:  # a bug of the emulator: answer like Telegram's 500, keep the traceback
            log.exception("Bot API emulator failed on %s", call.method)
            error = ApiError(500, "Internal Server Error")
            call.status, call.description, body = error.status, error.description, error.envelope()
        self._notify()
        hold += self.latency
        if hold:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.telegram.closing.wait(), timeout=hold)
        call.answered = time.monotonic()
        if hold:
            self._notify()
        return _EscapedJSON(body, status_code=call.status)

    def _route(self, call: Call, token: str) -> Handler:
        if token not in self.bots:
            raise ApiError(401, "Unauthorized")
        call.token = token
        found = self.bots[token].telegram.lookup(call.method)
        if found is None:
            raise not_found()
        call.method, handler = found
        return handler

    def _take_fault(self, method: str, chat_id: int | None) -> Fault | None:
        fault = take_fault(self._faults, lambda named: named.matches(method, chat_id))
        if fault is not None:
            return fault
        if self.random_faults is not None:
            return self.random_faults.draw(method, chat_id, self.timeout_delay)
        return None

    async def _run(self, handler: Handler, call: Call, *, paced: bool) -> Any:
        chat_id = call.chat_id
        if call.method in PACED and chat_id is not None:  # a chat that refuses the bot: 403, unpaced
            known = self._served(call.token).telegram.chats.get(chat_id)
            if known is not None and (refused_by := refusal(known)) is not None:
                raise refused_by
        paced = paced and call.method in PACED and chat_id is not None
        if paced:
            assert chat_id is not None
            served = self._served(call.token)
            pacer = served.pacer
            refused = pacer.take(chat_id, served.telegram.chat(chat_id).type, call.at)
            if refused is not None:
                call.limit = refused.limit
                retry = refused.retry_after
                raise ApiError(429, f"Too Many Requests: retry after {retry}", {"retry_after": retry})
        try:
            result = handler(call.params)
            if inspect.isawaitable(result):
                result = await result
        except ApiError:
            if paced:
                assert chat_id is not None
                pacer.give_back(chat_id)
            raise
        return result

