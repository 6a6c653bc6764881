"""The Telegram adapter: a python-telegram-bot Application (long polling, or updates
from the webhook through Redis), the chat commands, and the draft worker, run
together on the caller's event loop.

    await run_adapter(settings, redis)      # until cancelled

Commands: /follow SESSION [AGENT], /unfollow [SESSION], /card,
/mode progress|partial|block|off, /rich on|off, /help. Replies are plain text and go
through the chat's lane like drafts, so they count against the chat's pace.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from redis.asyncio import Redis
from telegram import BotCommand, Message, Update
from telegram.error import BadRequest, InvalidToken, NetworkError
from telegram.ext import Application, ApplicationBuilder, CommandHandler, ContextTypes, MessageHandler, filters

from ..backoff import Backoff
from ..channels.state import DraftKey
from ..config.settings import ConfigError, Mode, Settings, TelegramSettings, TelegramWebhookSettings
from ..failure_log import FailureLog
from ..model.card import CardError, clean_text, escape_lone_surrogates
from ..model.owners import Owner, resolve_owner
from ..render.telegram_payload import telegram_draft, telegram_snapshot
from ..stopping import still_wanted
from ..store.cards import CardStore
from .client import FencedRequest
from .follows import TelegramState, allowed, effective_mode, wants_rich
from .options import AdapterOptions
from .webhook import UpdateInbox
from .worker import DraftWorker

log = logging.getLogger("progresscast.telegram")

COMMANDS = [
    ("follow", "SESSION [AGENT] — show this session's progress card here"),
    ("unfollow", "[SESSION] — stop following (all sessions without an argument)"),
    ("card", "show the followed cards again at the bottom of the chat"),
    ("mode", "progress|partial|block|off — what the draft shows"),
    ("rich", "on|off — rich messages with checkboxes"),
    ("help", "what this bot does and what this chat follows"),
]

MODES_SHOWN = (Mode.progress, Mode.partial, Mode.block, Mode.off)
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def echo_safe(text: str) -> str:
    """Text fit to send back into a chat: no bidi or invisible characters, no controls,
    a lone surrogate as its escape (no encoder accepts one: the reply would never go)."""
    return escape_lone_surrogates(_CONTROLS.sub("", clean_text(text)))


USAGE = {
    "follow": "Usage: /follow SESSION [AGENT]",
    "unfollow": "Usage: /unfollow [SESSION [AGENT]]",
    "mode": "Usage: /mode progress|partial|block|off",
    "rich": "Usage: /rich on|off",
}

Handler = Callable[[Update, ContextTypes.DEFAULT_TYPE], Coroutine[Any, Any, None]]


def thread_of(message: Message) -> int:
    """The forum topic a message belongs to (0: none). Replies in ordinary groups carry a
    message_thread_id too; only topic messages make it a topic."""
    if message.is_topic_message and message.message_thread_id:
        return int(message.message_thread_id)
    return 0


class Commands:
    def __init__(self, settings: Settings, worker: DraftWorker) -> None:
        assert settings.channels.telegram is not None
        self.settings = settings
        self.telegram: TelegramSettings = settings.channels.telegram
        self.worker = worker
        self.state: TelegramState = worker.state
        self.store: CardStore = worker.store

    def register(self, app: Application) -> None:  # type: ignore[type-arg]
        # Group -1 runs before the commands: every message id seen is a mark for probing.
        app.add_handler(MessageHandler(filters.ALL, self._saw), group=-1)
        for name, handler in (
            ("follow", self.follow),
            ("unfollow", self.unfollow),
            ("card", self.card),
            ("mode", self.mode),
            ("rich", self.rich),
        ):
            app.add_handler(CommandHandler(name, self._guarded(handler)))
        app.add_handler(CommandHandler(["help", "start"], self.help))

    # --- plumbing ------------------------------------------------------------------------

    async def _saw(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is not None and allowed(self.telegram, message.chat_id):
            await self.state.saw_message(message.chat_id, message.message_id)

    def _guarded(self, handler: Handler) -> Handler:
        """allowedChats: any other chat gets a polite refusal, and nothing is stored."""

        async def guarded(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
            message = update.effective_message
            if message is None:
                return
            if not allowed(self.telegram, message.chat_id):
                self.reply(
                    message,
                    "Sorry, this bot is not enabled for this chat. Ask its operator to add "
                    f"chat id {message.chat_id} to {self.worker.adapter_options.setting}.allowedChats.",
                )
                return
            await handler(update, context)

        return guarded

    def reply(self, message: Message, text: str) -> None:
        # Replies echo what the chat typed (a session key, an agent id): cleaned like card
        # text, so a U+202E cannot turn the bot's own words around.
        self.worker.say(message.chat_id, thread_of(message), echo_safe(text))

    def _owner(self, args: list[str]) -> Owner:
        agents = self.settings.agents
        return resolve_owner(
            args[0], args[1] if len(args) > 1 else None, known_agents=agents.known_set, default_agent=agents.default
        )

    @staticmethod
    def _problem(exc: CardError) -> str:
        """The field and the rule, as the store names them: `agentId 'x' is not …`."""
        return f"{exc.field} {exc.rule}" if exc.field else exc.rule

    # --- commands ------------------------------------------------------------------------

    async def follow(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        assert message is not None
        args = context.args or []
        if not 1 <= len(args) <= 2:
            self.reply(message, USAGE["follow"])
            return
        try:
            owner = self._owner(args)
        except CardError as exc:
            self.reply(message, f"Sorry, I can't follow {args[0]}: {self._problem(exc)}.")
            return
        key = DraftKey(message.chat_id, thread_of(message), owner)
        added = await self.worker.follow(key)
        view = await self.store.view(owner)
        mode = effective_mode(self.telegram, message.chat_id, await self.state.prefs(message.chat_id))
        name = owner.display_key
        if not added:
            text = f"This chat already follows {name}."
        elif view.empty:
            text = f"Following {name}. Its progress card will show here when the agent writes one."
        else:
            text = f"Following {name}."
        if mode is Mode.off:
            text += " Live cards are off in this chat (/mode off): only final answers are sent."
        self.reply(message, text)
        self.worker.touch(key, followed=added)

    async def unfollow(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        assert message is not None
        args = context.args or []
        current = await self.state.follows(message.chat_id, thread_of(message))
        if len(args) > 2:
            self.reply(message, USAGE["unfollow"])
            return
        if args:
            try:
                owner = self._owner(args)
            except CardError as exc:
                self.reply(message, f"Sorry, {args[0]} is not a session I can follow: {self._problem(exc)}.")
                return
            targets = [k for k in current if k.owner == owner]
            if not targets:
                self.reply(message, f"This chat does not follow {owner.display_key}.")
                return
        else:
            targets = current
            if not targets:
                self.reply(message, "This chat follows no session.")
                return
        for key in targets:
            await self.state.unfollow(key)
            self.worker.touch(key)  # the lane removes the live draft
        names = ", ".join(k.owner.display_key for k in targets)
        self.reply(message, f"Stopped following {names}.")

    async def card(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        assert message is not None
        follows = await self.state.follows(message.chat_id, thread_of(message))
        if not follows:
            self.reply(message, "This chat follows no session. Use /follow SESSION [AGENT].")
            return
        render = await self.worker.render_settings(message.chat_id)
        templates_dir = self.settings.templates.dir
        nothing = []
        for key in follows:
            view = await self.store.view(key.owner)
            if render.mode is Mode.off:
                # No live draft in this chat: a one-off snapshot of the progress card.
                payload = telegram_snapshot(view, render, templates_dir=templates_dir)
                if payload is None:
                    nothing.append(key.owner.display_key)
                else:
                    self.worker.send_once(key.chat_id, key.thread_id, payload)
            elif telegram_draft(view, render, templates_dir=templates_dir) is None:
                nothing.append(key.owner.display_key)
            else:
                self.worker.touch(key, fresh=True)
        if nothing:
            self.reply(message, f"Nothing to show yet for {', '.join(nothing)}.")

    async def mode(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        assert message is not None
        args = context.args or []
        if len(args) != 1 or args[0].lower() not in Mode.__members__:
            now = effective_mode(self.telegram, message.chat_id, await self.state.prefs(message.chat_id))
            modes = ", ".join(m.value for m in MODES_SHOWN)
            wrong = f"{args[0]} is not a mode; the modes are {modes}. " if len(args) == 1 else ""
            self.reply(message, f"{wrong}{USAGE['mode']} (now: {now.value}).")
            return
        mode = Mode(args[0].lower())
        await self.state.set_mode(message.chat_id, mode)
        self.reply(message, f"Mode for this chat: {mode.value}.")
        await self._touch_chat(message.chat_id)

    async def rich(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        assert message is not None
        args = [a.lower() for a in context.args or []]
        if len(args) != 1 or args[0] not in ("on", "off"):
            self.reply(message, USAGE["rich"])
            return
        on = args[0] == "on"
        await self.state.set_rich(message.chat_id, on)
        text = f"Rich messages {'on' if on else 'off'} for this chat."
        if on and self.worker.rich_refused:
            text += " This bot's Bot API server does not support them, so drafts stay classic HTML."
        self.reply(message, text)
        await self._touch_chat(message.chat_id)

    async def help(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None:
            return
        lines = ["progresscast shows an AI agent's progress card here, in one message kept up to date."]
        lines += [f"/{name} {text}" for name, text in COMMANDS]
        if allowed(self.telegram, message.chat_id):
            follows = await self.state.follows(message.chat_id, thread_of(message))
            prefs = await self.state.prefs(message.chat_id)
            mode = effective_mode(self.telegram, message.chat_id, prefs)
            rich = wants_rich(self.telegram, message.chat_id, prefs) and not self.worker.rich_refused
            followed = ", ".join(k.owner.display_key for k in follows) or "nothing"
            lines.append("")
            lines.append(f"Here: following {followed}; mode {mode.value}; rich messages {'on' if rich else 'off'}.")
        else:
            lines.append("")
            lines.append("This chat is not enabled for this bot.")
        self.reply(message, "\n".join(lines))

    async def _touch_chat(self, chat_id: int) -> None:
        for key in await self.state.follows(chat_id):
            self.worker.touch(key)


def build_application(telegram: TelegramSettings, options: AdapterOptions) -> Application:  # type: ignore[type-arg]
    """The PTB Application: `apiBaseUrl` + token + "/<method>", no job queue, our own
    pacing (no PTB rate limiter: it does not pace single private chats)."""
    if not telegram.token:
        raise ValueError("channels.telegram.token is not set")
    builder: ApplicationBuilder = (  # type: ignore[type-arg]
        Application.builder().token(telegram.token).base_url(telegram.apiBaseUrl).job_queue(None)
    )
    if options.fence is None:
        builder = (
            builder.connection_pool_size(options.connection_pool_size)
            .read_timeout(options.read_timeout)
            .write_timeout(options.write_timeout)
            .connect_timeout(options.connect_timeout)
            .pool_timeout(options.pool_timeout)
        )
    else:
        # The same transports python-telegram-bot would build, checking the lease first.
        builder = builder.request(
            FencedRequest(
                options.fence,
                connection_pool_size=options.connection_pool_size,
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
    failures = 0
    while True:
        still_wanted()
        try:
            await attempt()
            return
        except (InvalidToken, BadRequest):
            raise  # refusals (BadRequest is a NetworkError in python-telegram-bot): not retried
        except NetworkError as exc:
            delay = backoff.delay(failures)
            failures += 1
            log.warning("cannot reach the Bot API%s (%s); retrying in %.0f s", what, exc, delay)
            await asyncio.sleep(delay)


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
        await app.bot.set_webhook(webhook.url, secret_token=webhook.secretToken, allowed_updates=[Update.MESSAGE])

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
    worker = DraftWorker(settings, redis, app.bot, options=options)
    Commands(settings, worker).register(app)
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
                timeout=options.poll_timeout, allowed_updates=[Update.MESSAGE], drop_pending_updates=False
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


def _heard(worker: DraftWorker) -> Handler:
    """Every message the bot sees is someone else's (Telegram never shows a bot its own):
    a draft above it in its chat (or topic) moves to the bottom with its next update."""

    async def heard(update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is not None:
            await worker.heard(message.chat_id, thread_of(message), message.message_id)

    return heard


_FAILURES = FailureLog(log)


async def _log_error(update: object, context: ContextTypes.DEFAULT_TYPE) -> None:
    # Once per kind and minute: with Redis down, every update fails the same way.
    error = context.error
    kind = f"update failed: {type(error).__name__}"
    if error is None:
        _FAILURES.error(kind, "handling an update failed")
    else:
        _FAILURES.exception(kind, "handling an update failed: %r", error, error=error)


__all__ = ["COMMANDS", "Commands", "build_application", "receive_by_webhook", "run_adapter", "thread_of"]
