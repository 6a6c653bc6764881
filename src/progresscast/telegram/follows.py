"""The Telegram adapter's state in Redis: the shared chat-channel state
(`channels.state`) under the name `tg` (another bot of `[[channels.telegram.bots]]`:
`tg-<bot id>`). A chat's settings are resolved by `channels.destinations`, like every
platform's."""

from __future__ import annotations

from redis.asyncio import Redis

from ..channels.state.holder import ChannelState
from ..channels.state.ids import DraftKey
from ..channels.state.prefs import ChatPrefs
from ..store import keys
from ..store.lease import Fence


class TelegramState(ChannelState):
    def __init__(self, redis: Redis, namespace: str = keys.TG, *, fence: Fence | None = None) -> None:
        super().__init__(redis, namespace, int, fence=fence)


__all__ = ["ChatPrefs", "DraftKey", "TelegramState"]
