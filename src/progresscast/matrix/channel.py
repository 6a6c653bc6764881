"""The Matrix channel on the shared worker: its renderer, client, budgets and settings
plugged into `channels.ChannelWorker` (which does everything else).

A destination is a room (`!…:server`); a thread in it is named by its root event
(`$…`), and "0" stands for none. A room's settings are resolved as every platform's
(`channels.destinations`): its `!pc mode` override, else its `[[channels.matrix.rooms]]`
table, else the account-wide settings. Matrix drafts have one look (an HTML notice):
there are no rich drafts to switch on.

Who may see what is every platform's access by grant (`channels.access`, kept under
the name `matrix`): a room's table grants its `sessions` globs (without them: its own
`follow` list), an approved pairing code grants what the operator gave it, and
`access` says what any other room gets (`pairing` unless set).

Budgets: one event a second per room, `callsPerSecond` for the account. A homeserver
limits each user in all rooms together (Synapse's `rc_message`), so its
`M_LIMIT_EXCEEDED` holds back every room for its `retry_after_ms`. The pace of a real
homeserver is real time: these budgets do not follow `PROGRESSCAST_TIME_SCALE`.
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
from ..config.settings import MatrixSettings, RenderSettings, Settings
from ..render.matrix_payload import MatrixRenderers
from ..store import keys
from ..store.lease import Fence
from .client import MatrixClient

log = logging.getLogger("progresscast.matrix")

NO_THREAD = "0"
PLATFORM = "matrix"
"""The name grants and pairing codes are kept under (`progresscast pairing … matrix`)."""
ONE_LOOK = "Matrix drafts have one look"
"""What `rich_refused` answers: there is no rich draft to switch to."""


@dataclass(frozen=True)
class MatrixPace:
    room_interval: float = 1.0
    calls_per_second: float = 1.0
    retry_after_cap: float = 600.0

    def budgets(self) -> Budgets:
        def interval(_: Hashable) -> float:
            return self.room_interval

        return Budgets(
            interval=interval, bot_rate=self.calls_per_second, retry_after_cap=self.retry_after_cap,
            held_together=True, scale=1.0,
        )


class MatrixChannel:
    """`channels.Channel` for one bot account."""

    name = PLATFORM
    no_thread: Id = NO_THREAD

    def __init__(
        self, settings: Settings, redis: Redis, client: MatrixClient, pace: MatrixPace, *, fence: Fence | None = None
    ) -> None:
        matrix = settings.channels.matrix
        if matrix is None:
            raise ValueError("channels.matrix is not configured")
        self.settings = settings
        self.matrix: MatrixSettings = matrix
        self.platform: MatrixSettings = matrix
        self._render_settings = RenderSettingsCache(matrix)
        self.access = AccessPolicy(PLATFORM, matrix, settings.agents, AccessStore(redis, PLATFORM))
        self.state = ChannelState(redis, keys.MATRIX, str, fence=fence)
        self.client = client
        self.budgets = pace.budgets()
        self.keep_on_complete = matrix.keepOnComplete
        self.block_chars = matrix.streaming.blockChars

    async def load(self) -> None:
        pass  # nothing remembered across starts besides what the worker reads

    async def rich_refused(self) -> str | None:
        return ONE_LOOK

    async def render_settings(self, chat_id: Id, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(chat_id)
        return self._render_settings.get(chat_id, prefs, rich_available=False)

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> MatrixRenderers:
        thread = str(key.thread_id) if str(key.thread_id) not in ("", NO_THREAD) else None
        settings = await self.render_settings(str(key.chat_id), prefs)
        return MatrixRenderers(settings, thread, self.settings.templates.dir)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.matrix.rooms[].follow`: subscribed at start-up (idempotent)."""
        return config_follows(self.matrix, self.settings.agents, no_thread=NO_THREAD, log=log)

    async def unsupported(self, detail: str) -> None:
        log.warning("the homeserver lacks something a message used: %s", detail)


__all__ = ["NO_THREAD", "ONE_LOOK", "PLATFORM", "MatrixChannel", "MatrixPace"]
