"""The Telegram channel on the shared worker: its renderer, client, budgets and
settings plugged into `channels.ChannelWorker` (which does everything else).

    worker = telegram_worker(settings, redis, bot, options=options)
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from redis.asyncio import Redis
from telegram import Bot

from ..channels.base import PlatformChannel
from ..channels.state.ids import DraftKey
from ..channels.state.prefs import ChatPrefs
from ..channels.worker import ChannelWorker
from ..config.settings import Settings
from ..config.telegram import TelegramSettings
from ..render.telegram_payload import TelegramRenderers
from .client import TelegramClient
from .follows import TelegramState
from .options import AdapterOptions

log = logging.getLogger("progresscast.telegram")

PLATFORM = "telegram"
"""The name grants and pairing codes are kept under: one for every bot (a grant is the chat's)."""


class TelegramChannel(PlatformChannel[TelegramSettings]):
    """`channels.Channel` for one bot."""

    name = PLATFORM
    no_thread = 0
    log = log
    state: TelegramState

    def __init__(self, settings: Settings, redis: Redis, bot: Bot, options: AdapterOptions) -> None:
        telegram = settings.channels.telegram
        super().__init__(
            settings, redis, telegram, TelegramState(redis, options.namespace, fence=options.fence),
            options.paced(telegram).budgets(),
            setting=options.setting,
        )
        self.bot = bot
        self.client = TelegramClient(bot)
        self._rich_refused: str | None = None
        """Why the Bot API server rejected rich messages (None: it did not)."""

    async def load(self) -> None:
        self._rich_refused = await self.state.bot.rich_refused(self.bot.id)
        if self._rich_refused:
            log.info("rich messages were refused by this Bot API server (%s): classic HTML", self._rich_refused)

    async def rich_refused(self) -> str | None:
        return self._rich_refused

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> TelegramRenderers:
        return TelegramRenderers(await self.render_settings(key.chat_id, prefs), self.settings.templates.dir)

    async def unsupported(self, detail: str) -> None:
        if self._rich_refused is None:
            log.warning(
                "the Bot API server rejected rich messages (%s): falling back to classic HTML for this bot", detail
            )
        self._rich_refused = detail or "rejected"
        await self.state.bot.refuse_rich(self.bot.id, self._rich_refused)


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
        TelegramChannel(settings, redis, bot, options), redis, options=options.worker(settings.channels.telegram),
        clock=clock, log=log,
    )
    fence = options.fence
    if fence is not None and fence.number > 1:
        # The bot had a holder before this one, which may have called any chat a
        # moment ago (it released the lease on its way out): its pace still counts.
        worker.pacer.as_if_all_called()
    return worker


__all__ = ["PLATFORM", "TelegramChannel", "telegram_worker"]
