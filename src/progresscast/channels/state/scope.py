"""What every part of a chat channel's state shares: the Redis, the channel's short name
(the prefix of its keys), how its ids parse, the bot's lease, and which keys this
process lately kept alive for the store's retention."""

from __future__ import annotations

import time
from collections.abc import Callable, Coroutine
from typing import Any

from redis.asyncio import Redis

from ...store import keys
from ...store.lease import Fence
from ...store.retention import retention_ms
from .ids import Id

KEPT_REMEMBERED = 100_000
"""Keys whose last renewal a process remembers (past it, all are forgotten at once)."""


class Scope:
    def __init__(self, redis: Redis, channel: str, parse_id: Callable[[str], Id], fence: Fence | None) -> None:
        self.redis = redis
        self.channel = channel
        self.parse_id = parse_id
        self.fence = fence
        """The bot's lease (None: no lease). Draft writes and deletes check it and are
        conditioned on its number in Redis; follows and overrides (a command's writes)
        check it. Message ids and the rich refusal are facts the server told (a message
        exists, rich messages were rejected), true whoever holds the lease: written
        unchecked, so a call that went out just before a pause is still remembered."""
        self._kept: dict[str, float] = {}
        """When (monotonic) each key's time to live was last renewed here (`keep`)."""
        self._absent: dict[str, float] = {}
        """When (monotonic) `keep` last found a key not made yet: a destination without
        overrides has no prefs key, and asking again on every draft write is a round trip."""

    def id(self, raw: str) -> Id | None:
        """A stored destination or thread id, parsed (None: not one of this channel's)."""
        try:
            return self.parse_id(raw)
        except ValueError:
            return None

    def check_fence(self) -> None:
        if self.fence is not None:
            self.fence.check()

    async def keep(self, *names: str) -> None:
        """These keys were used: they live the retention from now. Renewed at most once
        per tenth of it per key and process, so a busy draft costs no extra round trip."""
        renewal = self.renewal(await retention_ms(self.redis), *names)
        if renewal is not None:
            await renewal

    def renewal(self, ms: int, *names: str) -> Coroutine[Any, Any, None] | None:
        """`keep` with the retention `ms` known: what renews the keys that are due, to
        await beside another write (None: none is due)."""
        if ms <= 0:
            return None
        now = time.monotonic()
        due = [n for n in names if now - max(self._kept.get(n, -1e18), self._absent.get(n, -1e18)) > ms / 10_000]
        return self._renew(ms, now, due) if due else None

    def _bounded(self) -> None:
        if len(self._kept) + len(self._absent) > KEPT_REMEMBERED:
            self._kept.clear()
            self._absent.clear()

    async def _renew(self, ms: int, now: float, due: list[str]) -> None:
        self._bounded()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in due:
                pipe.pexpire(name, ms)
            renewed = await pipe.execute()
        for name, done in zip(due, renewed, strict=True):
            if done:
                self._kept[name] = now
                self._absent.pop(name, None)
            else:  # not made yet: not asked again until it is (`made`), or for a while
                self._absent[name] = now

    def kept(self, *names: str) -> None:
        """These keys were just made or renewed by a script's own write (their time to
        live set with it): `keep` need not renew them for a while."""
        now = time.monotonic()
        for name in names:
            self._kept[name] = now
            self._absent.pop(name, None)

    def missing(self, *names: str) -> None:
        """A read just found these keys not made yet: `keep` does not ask for them until
        they are (`made`), or for a while, as when it found them missing itself."""
        self._bounded()
        now = time.monotonic()
        for name in names:
            self._absent[name] = now

    def made(self, *names: str) -> None:
        """These keys may have just been made: the next `keep` renews them."""
        for name in names:
            self._absent.pop(name, None)

    def destination(self, chat_id: Id) -> tuple[str, ...]:
        """A destination's keys that live while it is used (`keep_destination`)."""
        c = self.channel
        return (
            keys.channel_follows(c, chat_id), keys.channel_prefs(c, chat_id), keys.channel_last_message(c, chat_id),
            keys.channel_sent(c, chat_id),
        )

    async def keep_destination(self, chat_id: Id) -> None:
        """A destination's keys were used (its overrides set, a draft of it changed)."""
        await self.keep(*self.destination(chat_id))


__all__ = ["KEPT_REMEMBERED", "Scope"]
