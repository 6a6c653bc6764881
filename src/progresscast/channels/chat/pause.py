"""Destinations that refuse the bot for good, paused.

A destination that answers a call with a refusal for good (`OutcomeKind.forbidden`:
Telegram's 403 "bot was blocked by the user" / "kicked" / "not a member", Slack's
`channel_not_found` / `not_in_channel` / `is_archived`, Discord's 50001 Missing Access /
50013 Missing Permissions / 10003 Unknown Channel) gets no calls until it speaks again
(an update or a command from it: `resume`), or until a backoff of minutes, up to an
hour, lets one call through as a probe. Its follows are kept: once it answers again
its drafts catch up. Kept in Redis (`keys.channel_paused`, what `/metrics` counts) and in
memory (read on every draft: no round trip); the adapter holding the bot writes both.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from redis.asyncio import Redis

from ...backoff import Backoff
from ...store import keys
from ...timescale import time_scale
from ..state.ids import Id

PROBE_BACKOFF = Backoff(base=120.0, cap=3600.0)
"""After the n-th refusal in a row, one probe after 2ⁿ · 2 minutes, at most an hour."""


class Pauses:
    def __init__(self, redis: Redis, namespace: str, clock: Callable[[], float]) -> None:
        self.redis = redis
        self.key = keys.channel_paused(namespace)
        self.clock = clock
        self._paused: dict[Id, tuple[float, int]] = {}
        """Destination → (when a probe may go, epoch seconds; refusals in a row)."""

    async def load(self, parse_id: Callable[[str], Id]) -> None:
        raw = cast("dict[str, str]", await self.redis.hgetall(self.key))
        for destination, value in raw.items():
            at, _, count = value.partition(" ")
            try:
                self._paused[parse_id(destination)] = (float(at), int(count or 1))
            except ValueError:
                continue

    def __len__(self) -> int:
        return len(self._paused)

    def paused(self, destination: Id) -> bool:
        return destination in self._paused

    def wait(self, destination: Id) -> float:
        """Seconds until a call may go to the destination (0: now — it is not paused, or
        its probe is due)."""
        entry = self._paused.get(destination)
        return 0.0 if entry is None else max(0.0, entry[0] - self.clock())

    def take_probe(self, destination: Id) -> bool:
        """May a call go now? A paused destination whose probe is due lets this one call
        through, and the next waits another backoff (unless this one is answered)."""
        entry = self._paused.get(destination)
        if entry is None:
            return True
        at, count = entry
        now = self.clock()
        if now < at:
            return False
        self._paused[destination] = (now + self._backoff(count), count)
        return True

    async def pause(self, destination: Id) -> float:
        """The destination refused the bot: no calls for a backoff. Returns its seconds."""
        _, count = self._paused.get(destination, (0.0, 0))
        delay = self._backoff(count)
        self._paused[destination] = (self.clock() + delay, count + 1)
        await self.redis.hset(self.key, str(destination), f"{self.clock() + delay:.3f} {count + 1}")
        return delay

    async def resume(self, destination: Id) -> bool:
        """The destination spoke or answered: calls may go again. False: it was not paused."""
        if self._paused.pop(destination, None) is None:
            return False
        await self.redis.hdel(self.key, str(destination))
        return True

    @staticmethod
    def _backoff(count: int) -> float:
        return PROBE_BACKOFF.delay(count) * time_scale()


__all__ = ["PROBE_BACKOFF", "Pauses"]
