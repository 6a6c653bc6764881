"""The Discord channel on the shared worker: its renderer, client, budgets and settings
plugged into `channels.ChannelWorker` (which does everything else).

A destination is a Discord channel or a thread (a thread is a channel of its own, with
its own id and its own rate-limit bucket): the thread part of a draft's key is always
"0". A destination's settings (`channels/chat/destinations.py`): its `/progresscast mode`
and `/progresscast rich` override, else its `[[channels.discord.channels]]` entry, else
the bot's settings. Which sessions it may follow is the shared access policy
(`channels/chat/access.py`, under the name `discord`): a table's `sessions`, an
`allowedChannels` entry, or an approved pairing code.

Budgets: Discord's documented ceilings — at most 5 message calls (create, edit,
delete) per channel in any 5 seconds, strictly spaced, and 50 requests a second for the
bot — under what its `X-RateLimit-*` headers say (`rest.py` tracks them: a call its
bucket would refuse comes back as `rate_limited` without being made).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from redis.asyncio import Redis

from ..channels.base import EvenPace, PlatformChannel
from ..channels.state.holder import ChannelState
from ..channels.state.ids import DraftKey
from ..channels.state.prefs import ChatPrefs
from ..config.discord import DiscordSettings
from ..config.settings import Settings
from ..render.discord_payload import DiscordRenderers
from ..store import keys
from .client import DiscordClient

log = logging.getLogger("progresscast.discord")

PLATFORM = "discord"
"""The `channels.<platform>` name: grants and pairing codes are kept under it."""
NO_THREAD = "0"


@dataclass(frozen=True)
class DiscordPace(EvenPace):
    """At most 5 message calls to a channel in any 5 seconds, strictly spaced: one a
    second; 50 requests a second for the whole bot (Discord's global limit)."""

    bot_rate: float = 50.0


class DiscordChannel(PlatformChannel[DiscordSettings]):
    """`channels.Channel` for one Discord bot."""

    name = PLATFORM
    no_thread = NO_THREAD
    log = log

    def __init__(
        self, settings: Settings, redis: Redis, client: DiscordClient, pace: DiscordPace | None = None
    ) -> None:
        super().__init__(
            settings, redis, settings.channels.discord, ChannelState(redis, keys.DISCORD, str),
            (pace or DiscordPace()).budgets(),
        )
        self.client = client

    async def load(self) -> None:
        pass  # nothing is switched off for the bot (see `unsupported`)

    async def rich_refused(self) -> str | None:
        return None  # Components V2 refused for one payload is that payload's fallback

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> DiscordRenderers:
        return DiscordRenderers(await self.render_settings(key.chat_id, prefs), self.settings.templates.dir)

    async def unsupported(self, detail: str) -> None:
        # Components V2 refused for a payload is `refused_content` (its fallback); nothing
        # a Discord call uses is switched off for the bot.
        log.warning("Discord refused a feature: %s", detail)


__all__ = ["NO_THREAD", "PLATFORM", "DiscordChannel", "DiscordPace"]
