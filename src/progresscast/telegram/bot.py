"""The Telegram adapter: a python-telegram-bot Application (long polling, or updates
from the webhook through Redis), the chat commands, and the draft worker, run
together on the caller's event loop.

    await run_adapter(settings, redis)      # until cancelled

Commands: `telegram.commands` turns them into the shared handler's invocations
(`channels.commands`); replies go through the chat's lane like drafts.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from redis.asyncio import Redis
from telegram import BotCommand, Update
from telegram.error import BadRequest, InvalidToken, NetworkError, TelegramError
from telegram.ext import Application, ApplicationBuilder, ContextTypes, MessageHandler, filters

from ..backoff import Backoff, retrying
from ..channels.worker import ChannelWorker
from ..config.errors import ConfigError
from ..config.settings import Settings
from ..config.telegram import TelegramSettings, TelegramWebhookSettings
from ..failure_log import FailureLog
from .commands import COMMANDS, TelegramCommands, thread_of
from .options import AdapterOptions
from .presses import TelegramPresses
from .request import FencedRequest
from .webhook import UpdateInbox
from .worker import telegram_worker

UPDATES = [Update.MESSAGE, Update.CALLBACK_QUERY]
"""What the bot asks Telegram for: messages (commands, typed answers) and presses."""

log = logging.getLogger("progresscast.telegram")

def build_application(telegram: TelegramSettings, options: AdapterOptions) -> Application:  # type: ignore[type-arg]
    """The PTB Application: `apiBaseUrl` + token + "/<method>", no job queue, our own
    pacing (no PTB rate limiter: it does not pace single private chats)."""
    if not telegram.token:
        raise ValueError("channels.telegram.token is not set")
    builder: ApplicationBuilder = (  # type: ignore[type-arg]
        Application.builder().token(telegram.token).base_url(telegram.apiBaseUrl).job_queue(None)
    )
    # Our transport (aiohttp, the lease checked first when there is one), not PTB's httpx one.
    builder = builder.request(
        FencedRequest(
            options.fence,
            connection_pool_size=options.pool_size(telegram),
            read_timeout=options.read_timeout,
            write_timeout=options.write_timeout,
            connect_timeout=options.connect_timeout,
            pool_timeout=options.pool_timeout,
        )
    ).get_updates_request(FencedRequest(options.fence, connection_pool_size=1))
    return builder.build()


def _refused_token(exc: InvalidToken, variable: str | None, setting: str = "channels.telegram.token") -> ConfigError:
    where = f"into {variable}" if variable else "into the setting"
    return ConfigError(
        f"{setting}: the Bot API refused the bot token ({exc.message}); copy the token @BotFather gave you {where}"
    )


async def _while_unreachable(backoff: Backoff, what: str, attempt: Callable[[], Awaitable[None]]) -> None:
    """`attempt`, retried with backoff while the Bot API cannot be reached (one policy for
    every start-up call); any other failure is the caller's to translate."""
    # Refusals (BadRequest is a NetworkError in python-telegram-bot): not retried.
    await retrying(
        attempt, f"cannot reach the Bot API{what}", log=log, backoff=backoff,
        retry_on=(NetworkError,), give_up=(InvalidToken, BadRequest),
    )


async def _initialize(
    app: Application,  # type: ignore[type-arg]
    backoff: Backoff,
    variable: str | None = None,
    setting: str = "channels.telegram.token",
) -> None:
    """getMe, retried while the network is down; a bad token stops the adapter."""
    try:
        await _while_unreachable(backoff, "", app.initialize)
    except InvalidToken as exc:
        raise _refused_token(exc, variable, setting) from None


async def _set_webhook(
    app: Application,  # type: ignore[type-arg]
    webhook: TelegramWebhookSettings,
    backoff: Backoff,
    setting: str = "channels.telegram",
) -> None:
    """setWebhook, retried while the network is down; a URL Telegram refuses stops the adapter."""

    async def attempt() -> None:
        await app.bot.set_webhook(webhook.url, secret_token=webhook.secretToken, allowed_updates=UPDATES)

    try:
        await _while_unreachable(backoff, " to set the webhook", attempt)
    except BadRequest as exc:
        raise ConfigError(f"{setting}.webhook: the Bot API refused the webhook ({exc.message})") from None


async def receive_by_webhook(
    app: Application,  # type: ignore[type-arg]
    redis: Redis,
    webhook: TelegramWebhookSettings,
    backoff: Backoff,
    setting: str = "channels.telegram",
) -> UpdateInbox:
    """Set the webhook, then run every update the gateways hand over through the
    Application's handlers, as polling would, until the inbox is closed."""
    inbox = UpdateInbox(redis, app.bot.id)
    await inbox.register(webhook.path)  # before Telegram posts its first update
    await _set_webhook(app, webhook, backoff, setting)

    async def handle(data: dict[str, Any]) -> None:
        update = Update.de_json(data, app.bot)
        if update is not None:
            await app.process_update(update)

    inbox.start(handle, backoff=backoff)
    return inbox


async def run_adapter(settings: Settings, redis: Redis, *, options: AdapterOptions | None = None) -> None:
    """Run the Telegram adapter until cancelled: long polling (or the webhook's updates)
    for commands, the change stream for drafts. State lives in Redis, so a restart
    picks up where it stopped.

    One adapter per bot token at a time: Telegram serves getUpdates to one poller.
    `progresscast serve` makes sure of it with the bot's lease (`telegram.standby`)."""
    telegram = settings.channels.telegram
    if telegram is None or not telegram.token:
        raise ValueError("channels.telegram.token is not set")
    options = options or AdapterOptions()
    # httpx logs every request URL at INFO, and Bot API URLs carry the bot token.
    httpx_log = logging.getLogger("httpx")
    if httpx_log.level == logging.NOTSET:
        httpx_log.setLevel(logging.WARNING)
    app = build_application(telegram, options)
    token_setting = f"{options.setting}.token"
    await _initialize(app, options.backoff, settings.env_name(token_setting), token_setting)
    worker = telegram_worker(settings, redis, app.bot, options=options)
    TelegramCommands(worker).register(app)
    TelegramPresses(worker, app.bot).register(app)
    app.add_handler(MessageHandler(filters.ALL, _heard(worker)), group=-2)
    app.add_error_handler(_log_error)
    started = polling = False
    inbox: UpdateInbox | None = None
    try:
        with contextlib.suppress(Exception):
            await app.bot.set_my_commands([BotCommand(name, text[:256]) for name, text in COMMANDS])
        await worker.start()
        await app.start()
        started = True
        if telegram.webhook is not None:
            inbox = await receive_by_webhook(app, redis, telegram.webhook, options.backoff, options.setting)
            log.info(
                "Telegram adapter running as @%s, updates by webhook at %s", app.bot.username, telegram.webhook.path
            )
        else:
            # start_polling deletes a webhook left set: getUpdates is refused while there is one.
            await app.updater.start_polling(  # type: ignore[union-attr]
                timeout=options.poll_timeout, allowed_updates=UPDATES, drop_pending_updates=False,
                error_callback=_polling_failed,
            )
            polling = True
            log.info("Telegram adapter running as @%s", app.bot.username)
        await asyncio.Event().wait()  # until cancelled
    finally:
        if inbox is not None:
            await inbox.close()
        with contextlib.suppress(Exception):
            if polling:
                await app.updater.stop()  # type: ignore[union-attr]
        await worker.close()
        with contextlib.suppress(Exception):
            if started:
                await app.stop()
        with contextlib.suppress(Exception):
            await app.shutdown()


def _heard(worker: ChannelWorker) -> Callable[[Update, ContextTypes.DEFAULT_TYPE], Coroutine[Any, Any, None]]:
    """Every message the bot sees is someone else's (Telegram never shows a bot its own):
    a draft above it in its chat (or topic) moves to the bottom with its next update."""

    async def heard(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is not None:
            await worker.heard(message.chat_id, thread_of(message), message.message_id)

    return heard


_FAILURES = FailureLog(log)


def _polling_failed(error: TelegramError) -> None:
    # python-telegram-bot retries getUpdates itself every second or two and would log
    # each failure with its chained traceback: one line per kind and minute instead, as
    # at start ("cannot reach the Bot API").
    _FAILURES.warning(
        f"polling failed: {type(error).__name__}", "cannot reach the Bot API to poll for updates (%s: %s); retrying",
        type(error).__name__, error,
    )


async def _log_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    # Once per kind and minute: with Redis down, every update fails the same way.
    error = context.error
    kind = f"update failed: {type(error).__name__}"
    if error is None:
        _FAILURES.error(kind, "handling an update failed")
    else:
        _FAILURES.exception(kind, "handling an update failed: %r", error, error=error)


__all__ = ["COMMANDS", "build_application", "receive_by_webhook", "run_adapter", "thread_of"]
