"""One reader of the change stream per process, fanned out to every SSE client.

Each viewer holding its own blocking XREAD would hold one Redis connection per open
browser tab; the hub holds one, and hands each subscriber only its owner's events.
Events are refresh hints, so a subscriber whose queue is full simply misses hints it
already has one of — the page re-reads the card anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from redis.asyncio import Redis
from redis.exceptions import RedisError

from .. import events
from ..backoff import Backoff
from ..events import Event
from ..owners import Owner

BACKOFF = Backoff()
"""The one retry policy (backoff.py)."""
log = logging.getLogger("progresscast.gateway")

QUEUE_SIZE = 64


class Subscription:
    def __init__(self, owner: Owner) -> None:
        self.owner = owner
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(QUEUE_SIZE)
        """None means "the hub is closing: end the stream"."""

    def offer(self, event: Event | None) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(event)


class EventHub:
    def __init__(self, redis: Redis, *, block_ms: int = 5_000) -> None:
        self.redis = redis
        self.block_ms = block_ms
        self._subs: set[Subscription] = set()
        self._task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None

    @property
    def subscribers(self) -> int:
        return len(self._subs)

    async def subscribe(self, owner: Owner) -> Subscription:
        """Returns once the hub is reading: any event written after this is delivered."""
        sub = Subscription(owner)
        self._subs.add(sub)
        try:
            if self._task is None or self._task.done():
                loop = asyncio.get_running_loop()
                self._ready = loop.create_future()
                self._task = loop.create_task(self._run(self._ready), name="progresscast-event-hub")
            assert self._ready is not None
            await asyncio.shield(self._ready)
        except BaseException:
            self.unsubscribe(sub)
            raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        self._subs.discard(sub)
        # Nobody listening: stop reading (the next subscriber starts afresh from "now").
        if not self._subs and self._task is not None:
            self._task.cancel()
            self._task = None

    async def close(self) -> None:
        """End every open stream (at shutdown), then stop reading."""
        for sub in list(self._subs):
            sub.offer(None)
        self._subs.clear()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, RedisError):
                await self._task
            self._task = None

    async def _run(self, ready: asyncio.Future[None]) -> None:
        try:
            position = await events.last_id(self.redis)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("hub stopped"))
                ready.exception()  # retrieved: subscribers re-raise it, nobody logs it twice
            raise
        ready.set_result(None)
        failures = 0
        while True:
            try:
                async for event in events.tail(self.redis, start=position, block_ms=self.block_ms):
                    failures = 0
                    if event is None:
                        continue
                    position = event.id
                    for sub in list(self._subs):
                        if sub.owner == event.owner:
                            sub.offer(event)
            except RedisError as exc:
                # Keep the position: after Redis comes back, nothing in between is lost.
                delay = BACKOFF.delay(failures)
                failures += 1
                log.warning("event stream read failed (%s); retrying in %.1f s", exc, delay)
                await asyncio.sleep(delay)
