"""The Matrix channel on the shared worker: its renderer, client, budgets and settings
plugged into `channels.ChannelWorker` (which does everything else).

A destination is a room (`!…:server`); a thread in it is named by its root event
(`$…`), and "0" stands for none. A room's settings: its `!pc mode` override, else its
`[[channels.matrix.rooms]]` entry, else the account-wide settings.

Who may see what: a room listed in `[[channels.matrix.rooms]]` is granted the
sessions its `sessions` globs match (without `sessions`: its own `follow` list);
with `access = "open"` any room may follow any session.

Budgets: one event a second per room, `callsPerSecond` for the account. A homeserver
limits each user in all rooms together (Synapse's `rc_message`), so its
`M_LIMIT_EXCEEDED` holds back every room for its `retry_after_ms`. The pace of a real
homeserver is real time: these budgets do not follow `PROGRESSCAST_TIME_SCALE`.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass
from fnmatch import fnmatchcase

from redis.asyncio import Redis

from ..channels.pacing import Budgets
from ..channels.state import ChannelState, ChatPrefs, DraftKey, Id
from ..config.settings import Access, MatrixSettings, Mode, RenderSettings, Settings
from ..model.card import CardError
from ..model.owners import Owner, resolve_owner
from ..render.matrix_payload import MatrixRenderers
from ..store import keys
from ..store.lease import Fence
from .client import MatrixClient

log = logging.getLogger("progresscast.matrix")

NO_THREAD = "0"


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


def effective_mode(matrix: MatrixSettings, room_id: str, prefs: ChatPrefs) -> Mode:
    config = matrix.rooms_by_id.get(room_id)
    if prefs.mode is not None:
        return prefs.mode
    if config is not None and config.mode is not None:
        return config.mode
    return matrix.streaming.mode


def allowed(matrix: MatrixSettings, room_id: Id) -> bool:
    """May this room get drafts and change what it follows?"""
    return isinstance(room_id, str) and (matrix.access is Access.open or room_id in matrix.rooms_by_id)


def granted(matrix: MatrixSettings, room_id: str, owner: Owner) -> bool:
    """Is this room granted this owner's session?"""
    if matrix.access is Access.open:
        return True
    room = matrix.rooms_by_id.get(room_id)
    if room is None:
        return False
    if room.sessions is None:
        return owner.session_key in room.follow or owner.display_key in room.follow
    return any(fnmatchcase(owner.session_key, glob) for glob in room.sessions)


class MatrixChannel:
    """`channels.Channel` for one bot account."""

    name = "matrix"

    def __init__(
        self, settings: Settings, redis: Redis, client: MatrixClient, pace: MatrixPace, *, fence: Fence | None = None
    ) -> None:
        matrix = settings.channels.matrix
        if matrix is None:
            raise ValueError("channels.matrix is not configured")
        self.settings = settings
        self.matrix: MatrixSettings = matrix
        self.state = ChannelState(redis, keys.MATRIX, str, fence=fence)
        self.client = client
        self.budgets = pace.budgets()
        self.keep_on_complete = matrix.keepOnComplete
        self.block_chars = matrix.streaming.blockChars

    def allowed(self, chat_id: Id) -> bool:
        return allowed(self.matrix, chat_id)

    async def render_settings(self, room_id: str, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(room_id)
        progress = self.matrix.streaming.progress
        mode = effective_mode(self.matrix, room_id, prefs)
        return RenderSettings(
            mode=mode,
            maxLines=progress.maxLines,
            maxLineChars=progress.maxLineChars,
            checklistLines=self.matrix.streaming.checklist_lines(mode),
        )

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> MatrixRenderers:
        thread = str(key.thread_id) if str(key.thread_id) not in ("", NO_THREAD) else None
        settings = await self.render_settings(str(key.chat_id), prefs)
        return MatrixRenderers(settings, thread, self.settings.templates.dir)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.matrix.rooms[].follow`: subscribed at start-up (idempotent)."""
        agents = self.settings.agents
        out = []
        for room in self.matrix.rooms:
            for session in room.follow:
                try:
                    owner = resolve_owner(session, known_agents=agents.known_set, default_agent=agents.default)
                except CardError as exc:
                    log.warning("room %s: cannot follow %r from the config: %s", room.id, session, exc)
                    continue
                out.append(DraftKey(room.id, NO_THREAD, owner))
        return out

    async def unsupported(self, detail: str) -> None:
        log.warning("the homeserver lacks something a message used: %s", detail)


__all__ = ["NO_THREAD", "MatrixChannel", "MatrixPace", "allowed", "effective_mode", "granted"]
