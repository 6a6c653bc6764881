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
from dataclasses import dataclass

from redis.asyncio import Redis

from ..channels.base import EvenPace, PlatformChannel
from ..channels.state.holder import ChannelState
from ..channels.state.ids import DraftKey
from ..channels.state.prefs import ChatPrefs
from ..config.matrix import MatrixSettings
from ..config.settings import Settings
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
class MatrixPace(EvenPace):
    """One event a second per room and for the account; an `M_LIMIT_EXCEEDED` holds
    back every room, and a real homeserver's pace is real time."""

    retry_after_cap: float = 600.0
    held_together: bool = True
    real_time: bool = True


class MatrixChannel(PlatformChannel[MatrixSettings]):
    """`channels.Channel` for one bot account."""

    name = PLATFORM
    no_thread = NO_THREAD
    log = log

    def __init__(
        self, settings: Settings, redis: Redis, client: MatrixClient, pace: MatrixPace, *, fence: Fence | None = None
    ) -> None:
        # Event ids say nothing of which came later: someone else's message is heard by
        # when it was posted (`MatrixSync`), and compared with when a draft was sent.
        state = ChannelState(redis, keys.MATRIX, str, fence=fence, ordered_ids=False)
        super().__init__(settings, redis, settings.channels.matrix, state, pace.budgets())
        self.client = client

    async def load(self) -> None:
        pass  # nothing remembered across starts besides what the worker reads

    async def rich_refused(self) -> str | None:
        return ONE_LOOK

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> MatrixRenderers:
        settings = await self.render_settings(str(key.chat_id), prefs)
        return MatrixRenderers(settings, self.thread_of(key), self.settings.templates.dir)

    async def unsupported(self, detail: str) -> None:
        log.warning("the homeserver lacks something a message used: %s", detail)


__all__ = ["NO_THREAD", "ONE_LOOK", "PLATFORM", "MatrixChannel", "MatrixPace"]
