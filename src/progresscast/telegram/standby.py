"""One adapter per bot, in whichever `serve` process holds the bot's lease.

Every `serve` with a bot token runs `run_bots`: for each configured bot it tries the
bot's lease (`lease.Lease`, keyed by the bot id). The holder runs `run_adapter` for the
bot with its fence; the others stand by (said once in the log, with the holder's name)
and try again every second or so. When the holder dies, its lease expires after
`leaseSeconds` and a standby takes over: the drafts' message ids are in Redis, and the
catch-up at start reads every follow again, so every chat converges to its newest
card. A holder that loses its lease (a renew finds another holder) stops its adapter
and stands by; one that stops gracefully releases it, so a standby takes over at once.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, replace
from functools import partial

from redis.asyncio import Redis

from ..channels.standby import while_held
from ..config.settings import Settings
from ..config.telegram import TelegramSettings, bot_id_of
from ..store import keys
from ..store.lease import Fence, Lease
from ..supervise import supervise
from .options import AdapterOptions

log = logging.getLogger("progresscast.telegram")

STANDBY_POLL = 1.0
"""Seconds between a standby's tries at the lease (at most; a shorter lease: a quarter of it)."""


@dataclass(frozen=True)
class TelegramBot:
    """One configured bot: its settings (inheritance applied) and where its state lives."""

    index: int
    """0: `[channels.telegram]`; i: `[[channels.telegram.bots]]` entry i - 1."""
    telegram: TelegramSettings
    bot_id: str

    @property
    def first(self) -> bool:
        return self.index == 0

    @property
    def setting(self) -> str:
        return "channels.telegram" if self.first else f"channels.telegram.bots[{self.index - 1}]"

    @property
    def namespace(self) -> str:
        return keys.tg_namespace(self.bot_id, first=self.first)

    @property
    def group(self) -> str:
        """The bot's consumer group on the change stream (the first bot keeps `telegram`)."""
        return "telegram" if self.first else f"telegram-{self.bot_id}"

    def lease(self, redis: Redis) -> Lease:
        return Lease(redis, keys.tg_lease(self.bot_id), keys.tg_fence(self.bot_id), self.telegram.leaseSeconds)

    def settings_for(self, settings: Settings) -> Settings:
        """`settings` with this bot as `channels.telegram`: what the adapter reads."""
        channels = settings.channels.model_copy(update={"telegram": self.telegram})
        return settings.model_copy(update={"channels": channels})


def bots(settings: Settings) -> list[TelegramBot]:
    """Every configured bot with a token."""
    telegram = settings.channels.telegram
    if telegram is None:
        return []
    return [TelegramBot(i, bot, bot_id_of(bot.token)) for i, bot in enumerate(telegram.every_bot) if bot.token]


async def run_bots(settings: Settings, redis: Redis, *, options: AdapterOptions | None = None) -> None:
    """Serve every bot whose lease this process gets, until cancelled. Each bot runs
    supervised: a failure of one (Redis gone while it takes over) starts that one again."""
    async with asyncio.TaskGroup() as group:
        for bot in bots(settings):
            job = partial(run_bot, settings, redis, bot, options=options)
            group.create_task(supervise(job, f"Telegram bot {bot.bot_id}"), name=f"telegram-bot-{bot.bot_id}")


async def run_bot(settings: Settings, redis: Redis, bot: TelegramBot, *, options: AdapterOptions | None = None) -> None:
    """Stand by until this process holds the bot's lease, run its adapter while it holds
    it, and start over when it is lost. Until cancelled."""
    from .bot import run_adapter

    base = options or AdapterOptions()

    async def job(fence: Fence) -> None:
        fenced = replace(base, namespace=bot.namespace, group=bot.group, fence=fence, setting=bot.setting)
        await run_adapter(bot.settings_for(settings), redis, options=fenced)

    poll = min(STANDBY_POLL, bot.telegram.leaseSeconds / 4)
    await while_held(bot.lease(redis), job, name=f"bot {bot.bot_id}", label=bot.bot_id, poll=poll, log=log)
