"""The Telegram channel on the shared worker: its renderer, client, budgets and
settings plugged into `channels.ChannelWorker` (which does everything else).

    worker = telegram_worker(settings, redis, bot, options=options)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import replace

from redis.asyncio import Redis
from telegram import Bot

from ..channels.access import AccessPolicy, AccessStore
from ..channels.destinations import RenderSettingsCache, config_follows
from ..channels.state import ChatPrefs, DraftKey, Id
from ..channels.worker import ChannelWorker
from ..config.settings import RenderSettings, Settings, TelegramSettings
from ..render.telegram_payload import TelegramRenderers
from .client import TelegramClient
from .follows import TelegramState
from .options import AdapterOptions

log = logging.getLogger("progresscast.telegram")

PLATFORM = "telegram"
"""The name grants and pairing codes are kept under: one for every bot (a grant is the chat's)."""


class TelegramChannel:
    """`channels.Channel` for one bot."""

    name = PLATFORM
    no_thread: Id = 0

    def __init__(self, settings: Settings, redis: Redis, bot: Bot, options: AdapterOptions) -> None:
        telegram = settings.channels.telegram
        if telegram is None:
            raise ValueError("channels.telegram is not configured")
        self.settings = settings
        self.telegram: TelegramSettings = telegram
        self.platform: TelegramSettings = telegram
        self._render_settings = RenderSettingsCache(telegram)
        self.access = AccessPolicy(
            PLATFORM, telegram, settings.agents, AccessStore(redis, PLATFORM), setting=options.setting
        )
        self.bot = bot
        self.state = TelegramState(redis, options.namespace, fence=options.fence)
        self.client = TelegramClient(bot)
        pace = options.pace
        if telegram.botCallsPerSecond is not None:  # raised (or lowered) on purpose
            pace = replace(pace, bot_rate=telegram.botCallsPerSecond)
        self.budgets = pace.budgets()
        self.keep_on_complete = telegram.keepOnComplete
        self.block_chars = telegram.streaming.blockChars
        self._rich_refused: str | None = None
        """Why the Bot API server rejected rich messages (None: it did not)."""

    async def load(self) -> None:
        self._rich_refused = await self.state.rich_refused(self.bot.id)
        if self._rich_refused:
            log.info("rich messages were refused by this Bot API server (%s): classic HTML", self._rich_refused)

    async def rich_refused(self) -> str | None:
        return self._rich_refused

    async def render_settings(self, chat_id: Id, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(chat_id)
        return self._render_settings.get(chat_id, prefs, rich_available=not self._rich_refused)

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> TelegramRenderers:
        return TelegramRenderers(await self.render_settings(key.chat_id, prefs), self.settings.templates.dir)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.telegram.chats[].follow`: subscribed at start-up (idempotent)."""
        return config_follows(self.telegram, self.settings.agents, no_thread=self.no_thread, log=log)

    async def unsupported(self, detail: str) -> None:
        if self._rich_refused is None:
            log.warning(
                "the Bot API server rejected rich messages (%s): falling back to classic HTML for this bot", detail
            )
        self._rich_refused = detail or "rejected"
        await self.state.refuse_rich(self.bot.id, self._rich_refused)


def telegram_worker(
    settings: Settings,
    redis: Redis,
    bot: Bot,
    *,
    options: AdapterOptions | None = None,
    clock: Callable[[], float] = time.time,
) -> ChannelWorker:
    """The shared worker on one bot's channel."""
    options = options or AdapterOptions()
    worker = ChannelWorker(
        TelegramChannel(settings, redis, bot, options), redis, options=options.worker(), clock=clock, log=log
    )
    fence = options.fence
    if fence is not None and fence.number > 1:
        # The bot had a holder before this one, which may have called any chat a
        # moment ago (it released the lease on its way out): its pace still counts.
        worker.pacer.as_if_all_called()
    return worker


__all__ = ["PLATFORM", "TelegramChannel", "telegram_worker"]
