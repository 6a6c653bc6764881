"""The Discord channel on the shared worker: its renderer, client, budgets and settings
plugged into `channels.ChannelWorker` (which does everything else).

A destination is a Discord channel or a thread (a thread is a channel of its own, with
its own id and its own rate-limit bucket): the thread part of a draft's key is always
"0". A destination's settings: its `/progresscast mode` and `/progresscast rich`
override, else its `[[channels.discord.channels]]` entry, else the bot's settings.

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

from ..channels.pacing import Budgets
from ..channels.state import ChannelState, ChatPrefs, DraftKey, Id
from ..config.settings import Access, DiscordSettings, Mode, RenderSettings, Settings
from ..model.card import CardError
from ..model.owners import resolve_owner
from ..render.discord_payload import DiscordRenderers
from .client import DiscordClient

log = logging.getLogger("progresscast.discord")

NAME = "discord"
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


def effective_mode(discord: DiscordSettings, channel_id: str, prefs: ChatPrefs) -> Mode:
    config = discord.channels_by_id.get(channel_id)
    if prefs.mode is not None:
        return prefs.mode
    if config is not None and config.mode is not None:
        return config.mode
    return discord.streaming.mode


def wants_rich(discord: DiscordSettings, channel_id: str, prefs: ChatPrefs) -> bool:
    config = discord.channels_by_id.get(channel_id)
    if prefs.rich is not None:
        return prefs.rich
    if config is not None and config.richMessages is not None:
        return config.richMessages
    return discord.richMessages


def allowed(discord: DiscordSettings, channel_id: Id) -> bool:
    """May this destination run commands and get drafts at all?"""
    if not isinstance(channel_id, str):
        return False
    return discord.access is Access.open or channel_id in discord.channels_by_id


class _OwnAccess:
    """A stopgap until Discord takes the shared access policy (`channels.access`): what
    the shared worker asks of access, answered from Discord's own allowlist|open."""

    def __init__(self, discord: DiscordSettings) -> None:
        self.discord = discord

    def announce(self, log: logging.Logger) -> None:
        pass  # the adapter says at start what `open` means

    def drafts_allowed(self, destination: Id) -> bool:
        return allowed(self.discord, destination)


class DiscordChannel:
    """`channels.Channel` for one Discord bot."""

    name = NAME

    def __init__(
        self, settings: Settings, redis: Redis, client: DiscordClient, pace: DiscordPace | None = None
    ) -> None:
        discord = settings.channels.discord
        if discord is None:
            raise ValueError("channels.discord is not configured")
        self.settings = settings
        self.discord: DiscordSettings = discord
        self.state = ChannelState(redis, NAME, str)
        self.client = client
        self.budgets = (pace or DiscordPace()).budgets()
        self.keep_on_complete = discord.keepOnComplete
        self.block_chars = discord.streaming.blockChars
        self.access = _OwnAccess(discord)

    async def load(self) -> None:
        pass

    def allowed(self, chat_id: Id) -> bool:
        return allowed(self.discord, chat_id)

    async def render_settings(self, channel_id: str, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(channel_id)
        progress = self.discord.streaming.progress
        mode = effective_mode(self.discord, channel_id, prefs)
        return RenderSettings(
            mode=mode,
            maxLines=progress.maxLines,
            maxLineChars=progress.maxLineChars,
            checklistLines=self.discord.streaming.checklist_lines(mode),
            rich=wants_rich(self.discord, channel_id, prefs),
        )

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> DiscordRenderers:
        return DiscordRenderers(await self.render_settings(str(key.chat_id), prefs), self.settings.templates.dir)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.discord.channels[].follow`: subscribed at start-up (idempotent)."""
        agents = self.settings.agents
        out = []
        for channel in self.discord.channels:
            for session in channel.follow:
                try:
                    owner = resolve_owner(session, known_agents=agents.known_set, default_agent=agents.default)
                except CardError as exc:
                    log.warning("channel %s: cannot follow %r from the config: %s", channel.id, session, exc)
                    continue
                out.append(DraftKey(channel.id, NO_THREAD, owner))
        return out

    async def unsupported(self, detail: str) -> None:
        # Components V2 refused for a payload is `refused_content` (its fallback); nothing
        # a Discord call uses is switched off for the bot.
        log.warning("Discord refused a feature: %s", detail)


__all__ = ["NAME", "NO_THREAD", "DiscordChannel", "DiscordPace", "allowed", "effective_mode", "wants_rich"]
