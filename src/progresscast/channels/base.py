"""What every platform's `Channel` (channel.py) is made of besides its client and its
renderers: its `[channels.<platform>]` section, the access policy kept under its
name, its draft state, its budgets, and a destination's settings and the config's
follows resolved by `destinations.py`. A platform subclasses `PlatformChannel` and
adds `renderers`, `rich_refused`, `load` and `unsupported`.

`EvenPace` is the budgets of a platform that gives every destination the same
interval (Discord, Slack, Matrix; Telegram paces groups apart from private chats).
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from typing import ClassVar, Generic, TypeVar

from redis.asyncio import Redis

from ..config.base import PlatformSettings, RenderSettings
from ..config.settings import Settings
from .chat.access import AccessPolicy, AccessStore
from .chat.destinations import RenderSettingsCache, config_follows
from .pacing import Budgets
from .state.holder import ChannelState
from .state.ids import DraftKey, Id
from .state.prefs import ChatPrefs

S = TypeVar("S", bound=PlatformSettings)


@dataclass(frozen=True)
class EvenPace:
    destination_interval: float = 1.0
    """Seconds between two calls to one destination."""
    bot_rate: float = 1.0
    """Calls a second for the whole bot, app or account."""
    retry_after_cap: float = 60.0
    """A rate-limit answer's retry_after is honoured up to this many seconds."""
    held_together: bool = False
    """A rate-limit answer holds back every destination (`Budgets.held_together`)."""
    real_time: bool = False
    """The pace of a real server, not scaled by `PROGRESSCAST_TIME_SCALE`."""

    def budgets(self) -> Budgets:
        def interval(_: Hashable) -> float:
            return self.destination_interval

        scale = {"scale": 1.0} if self.real_time else {}
        return Budgets(
            interval=interval, bot_rate=self.bot_rate, retry_after_cap=self.retry_after_cap,
            held_together=self.held_together, **scale,
        )


class PlatformChannel(Generic[S]):
    """The parts of `channels.Channel` every platform has alike."""

    name: ClassVar[str]
    """The `channels.<platform>` name: grants and pairing codes are kept under it."""
    no_thread: ClassVar[Id]
    log: ClassVar[logging.Logger]

    def __init__(
        self, settings: Settings, redis: Redis, section: S | None, state: ChannelState, budgets: Budgets,
        *, setting: str = "",
    ) -> None:
        """`section`: `settings.channels.<name>`; `setting`: where it is configured, for
        messages (default `channels.<name>`)."""
        if section is None:
            raise ValueError(f"channels.{self.name} is not configured")
        self.settings = settings
        self.platform: S = section
        self._render_settings = RenderSettingsCache(section)
        self.access = AccessPolicy(self.name, section, settings.agents, AccessStore(redis, self.name), setting=setting)
        self.state = state
        self.budgets = budgets
        self.keep_on_complete = section.keepOnComplete
        self.block_chars = section.streaming.blockChars

    async def rich_refused(self) -> str | None:
        """Why the server refused rich drafts lately (None: it did not)."""
        return None

    async def render_settings(self, chat_id: Id, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs.of(chat_id)
        return self._render_settings.get(chat_id, prefs, rich_available=not await self.rich_refused())

    async def config_follows(self) -> list[DraftKey]:
        """The destination tables' `follow`: subscribed at start-up (idempotent)."""
        return config_follows(self.platform, self.settings.agents, no_thread=self.no_thread, log=self.log)

    def thread_of(self, key: DraftKey) -> str | None:
        """The draft's thread (None: it is in the destination itself)."""
        thread = str(key.thread_id)
        return thread if thread not in ("", str(self.no_thread)) else None


__all__ = ["EvenPace", "PlatformChannel"]
