"""A destination's overrides, set there with its mode and rich commands."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from ...config.base import Mode
from ...store import keys
from .ids import Id
from .scope import Scope


@dataclass(frozen=True)
class ChatPrefs:
    """Overrides set in the destination with its mode/rich commands (None: not set)."""

    mode: Mode | None = None
    rich: bool | None = None


def prefs_of(raw: dict[str, str]) -> ChatPrefs:
    """The overrides as stored (the prefs hash; a mode no longer known: not set)."""
    return _prefs(raw.get("mode"), raw.get("rich"))


@lru_cache(maxsize=64)
def _prefs(mode: str | None, rich: str | None) -> ChatPrefs:
    # One object per stored value (a handful), not one per destination: the render
    # settings' cache keeps every destination's prefs.
    return ChatPrefs(
        mode=Mode(mode) if mode is not None and mode in Mode.__members__ else None,
        rich=None if rich is None else rich == "1",
    )


class Prefs:
    """Every destination's overrides (`ChatPrefs`)."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    def _key(self, chat_id: Id) -> str:
        return keys.channel_prefs(self.scope.channel, chat_id)

    async def of(self, chat_id: Id) -> ChatPrefs:
        return prefs_of(cast("dict[str, str]", await self.scope.redis.hgetall(self._key(chat_id))))

    def queue_of(self, chat_id: Id, pipe: Any) -> None:
        """`of`, queued on a pipeline (`prefs_of` reads its reply)."""
        pipe.hgetall(self._key(chat_id))

    async def set_mode(self, chat_id: Id, mode: Mode) -> None:
        await self._set(chat_id, "mode", mode.value)

    async def set_rich(self, chat_id: Id, rich: bool) -> None:
        await self._set(chat_id, "rich", "1" if rich else "0")

    async def _set(self, chat_id: Id, field: str, value: str) -> None:
        self.scope.check_fence()
        await self.scope.redis.hset(self._key(chat_id), field, value)
        self.scope.made(self._key(chat_id))
        await self.scope.keep_destination(chat_id)


__all__ = ["ChatPrefs", "Prefs", "prefs_of"]
