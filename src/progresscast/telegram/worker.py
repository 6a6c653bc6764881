"""The Telegram channel on the shared worker: its renderer, client, budgets and
settings plugged into `channels.ChannelWorker` (which does everything else)."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from redis.asyncio import Redis
from telegram import Bot

from ..channels.state import ChatPrefs, DraftKey, Id
from ..channels.worker import Bounded, ChannelWorker
from ..config.settings import RenderSettings, Settings, TelegramSettings
from ..model.card import CardError
from ..model.owners import resolve_owner
from ..render.telegram_payload import TelegramRenderers
from .client import TelegramClient
from .follows import TelegramState, allowed, render_settings
from .options import AdapterOptions

log = logging.getLogger("progresscast.telegram")


class TelegramChannel:
    """`channels.Channel` for one bot."""

    name = "telegram"

    def __init__(self, settings: Settings, redis: Redis, bot: Bot, options: AdapterOptions) -> None:
        telegram = settings.channels.telegram
        if telegram is None:
            raise ValueError("channels.telegram is not configured")
        self.settings = settings
        self.telegram: TelegramSettings = telegram
        self.bot = bot
        self.state = TelegramState(redis, options.namespace, fence=options.fence)
        self.client = TelegramClient(bot)
        pace = options.pace
        if telegram.botCallsPerSecond is not None:  # raised (or lowered) on purpose
            pace = replace(pace, bot_rate=telegram.botCallsPerSecond)
        self.budgets = pace.budgets()
        self.keep_on_complete = telegram.keepOnComplete
        self.block_chars = telegram.streaming.blockChars
        self.rich_refused: str | None = None
        """Why the Bot API server rejected rich messages (None: it did not)."""

    async def load(self) -> None:
        self.rich_refused = await self.state.rich_refused(self.bot.id)
        if self.rich_refused:
            log.info("rich messages were refused by this Bot API server (%s): classic HTML", self.rich_refused)

    def allowed(self, chat_id: Id) -> bool:
        return isinstance(chat_id, int) and allowed(self.telegram, chat_id)

    async def render_settings(self, chat_id: int, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(chat_id)
        return render_settings(self.telegram, chat_id, prefs, rich_available=not self.rich_refused)

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> TelegramRenderers:
        return TelegramRenderers(await self.render_settings(int(key.chat_id), prefs), self.settings.templates.dir)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.telegram.chats[].follow`: subscribed at start-up (idempotent)."""
        agents = self.settings.agents
        out = []
        for chat in self.telegram.chats:
            if not chat.follow:
                continue
            if not allowed(self.telegram, chat.id):
                log.warning("chat %s follows sessions in the config but is not in allowedChats", chat.id)
                continue
            for session in chat.follow:
                try:
                    owner = resolve_owner(session, known_agents=agents.known_set, default_agent=agents.default)
                except CardError as exc:
                    log.warning("chat %s: cannot follow %r from the config: %s", chat.id, session, exc)
                    continue
                out.append(DraftKey(chat.id, 0, owner))
        return out

    async def unsupported(self, detail: str) -> None:
        if self.rich_refused is None:
            log.warning(
                "the Bot API server rejected rich messages (%s): falling back to classic HTML for this bot", detail
            )
        self.rich_refused = detail or "rejected"
        await self.state.refuse_rich(self.bot.id, self.rich_refused)


class DraftWorker(ChannelWorker):
    """The Telegram adapter's draft worker."""

    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        bot: Bot,
        *,
        options: AdapterOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.adapter_options = options or AdapterOptions()
        self.telegram_channel = TelegramChannel(settings, redis, bot, self.adapter_options)
        super().__init__(self.telegram_channel, redis, options=self.adapter_options.worker(), clock=clock, log=log)
        self.settings = settings
        self.telegram = self.telegram_channel.telegram
        self.state: TelegramState = self.telegram_channel.state

    @property
    def rich_refused(self) -> str | None:
        return self.telegram_channel.rich_refused

    async def start(self) -> None:
        fence = self.adapter_options.fence
        if fence is not None and fence.number > 1:
            # The bot had a holder before this one, which may have called any chat a
            # moment ago (it released the lease on its way out): its pace still counts.
            self.pacer.as_if_all_called()
        await self.telegram_channel.load()
        await super().start()

    async def render_settings(self, chat_id: int) -> RenderSettings:
        return await self.telegram_channel.render_settings(chat_id)


__all__ = ["Bounded", "DraftWorker", "TelegramChannel"]
