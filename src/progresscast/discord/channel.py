"""The Discord channel on the shared worker: its renderer, client, budgets and settings
plugged into `channels.ChannelWorker` (which does everything else).

A destination is a Discord channel or a thread (a thread is a channel of its own, with
its own id and its own rate-limit bucket): the thread part of a draft's key is always
"0". A destination's settings (`channels/destinations.py`): its `/progresscast mode`
and `/progresscast rich` override, else its `[[channels.discord.channels]]` entry, else
the bot's settings. Which sessions it may follow is the shared access policy
(`channels/access.py`, under the name `discord`): a table's `sessions`, an
`allowedChannels` entry, or an approved pairing code.

Budgets: Discord's documented ceilings — at most 5 message calls (create, edit,
delete) per channel in any 5 seconds, strictly spaced, and 50 requests a second for the
bot — under what its `X-RateLimit-*` headers say (`rest.py` tracks them: a call its
bucket would refuse comes back as `rate_limited` without being made).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass

from redis.asyncio import Redis

from ..channels.access import AccessPolicy, AccessStore
from ..channels.destinations import RenderSettingsCache, config_follows
from ..channels.pacing import Budgets
from ..channels.state import ChannelState, ChatPrefs, DraftKey, Id
from ..config.settings import DiscordSettings, RenderSettings, Settings
from ..render.discord_payload import DiscordRenderers
from ..store import keys
from .client import DiscordClient

log = logging.getLogger("progresscast.discord")

PLATFORM = "discord"
"""The `channels.<platform>` name: grants and pairing codes are kept under it."""
NO_THREAD = "0"


@dataclass(frozen=True)
class DiscordPace:
    channel_interval: float = 1.0
    """Seconds between two message calls to one channel: 5 in any 5 seconds."""
    bot_rate: float = 50.0
    """Requests a second for the whole bot (Discord's global limit)."""
    retry_after_cap: float = 60.0

    def budgets(self) -> Budgets:
        def interval(_: Hashable) -> float:
            return self.channel_interval

        return Budgets(interval=interval, bot_rate=self.bot_rate, retry_after_cap=self.retry_after_cap)


class DiscordChannel:
    """`channels.Channel` for one Discord bot."""

    name = PLATFORM
    no_thread: Id = NO_THREAD

    def __init__(
        self, settings: Settings, redis: Redis, client: DiscordClient, pace: DiscordPace | None = None
    ) -> None:
        discord = settings.channels.discord
        if discord is None:
            raise ValueError("channels.discord is not configured")
        self.settings = settings
        self.discord: DiscordSettings = discord
        self.platform: DiscordSettings = discord
        self._render_settings = RenderSettingsCache(discord)
        self.access = AccessPolicy(PLATFORM, discord, settings.agents, AccessStore(redis, PLATFORM))
        self.state = ChannelState(redis, keys.DISCORD, str)
        self.client = client
        self.budgets = (pace or DiscordPace()).budgets()
        self.keep_on_complete = discord.keepOnComplete
        self.block_chars = discord.streaming.blockChars

    async def load(self) -> None:
        pass  # nothing is switched off for the bot (see `unsupported`)

    async def rich_refused(self) -> str | None:
        return None  # Components V2 refused for one payload is that payload's fallback

    async def render_settings(self, channel_id: Id, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(channel_id)
        return self._render_settings.get(channel_id, prefs)

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> DiscordRenderers:
        return DiscordRenderers(await self.render_settings(key.chat_id, prefs), self.settings.templates.dir)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.discord.channels[].follow`: subscribed at start-up (idempotent)."""
        return config_follows(self.discord, self.settings.agents, no_thread=NO_THREAD, log=log)

    async def unsupported(self, detail: str) -> None:
        # Components V2 refused for a payload is `refused_content` (its fallback); nothing
        # a Discord call uses is switched off for the bot.
        log.warning("Discord refused a feature: %s", detail)


__all__ = ["NO_THREAD", "PLATFORM", "DiscordChannel", "DiscordPace"]
