"""One reader per shard stream per process, fanned out to every SSE client.

Each viewer holding its own blocking XREAD would hold one Redis connection per open
browser tab; the hub holds one per shard that has viewers, and hands each subscriber
only its owner's events. Events are refresh hints, so a subscriber whose queue is
full simply misses hints it already has one of — the page re-reads the card anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from functools import partial
from typing import Any

from redis.exceptions import RedisError

from .. import metrics
from ..backoff import Backoff, Retrying
from ..failure_log import FailureLog
from ..model.owners import Owner
from ..stopping import still_wanted
from ..store import events
from ..store.connections import READ_BLOCK_MS
from ..store.events import Event
from ..store.sharding import layout_of
from ..supervise import supervise

BACKOFF = Backoff()
"""The one retry policy (backoff.py)."""
log = logging.getLogger("progresscast.gateway")

QUEUE_SIZE = 64


class Subscription:
    def __init__(self, owner: Owner, stream: str) -> None:
        self.owner = owner
        self.stream = stream
        self.queue: asyncio.Queue[Event | None] = asyncio.Queue(QUEUE_SIZE)
        """None means "the hub is closing: end the stream"."""

    def offer(self, event: Event | None) -> None:
        with contextlib.suppress(asyncio.QueueFull):
            self.queue.put_nowait(event)


def _observe_staleness(event: Event) -> None:
    # A stream id starts with the write's time (ms, Redis' clock).
    written_ms = int(event.id.partition("-")[0])
    metrics.STALENESS.labels("web").observe(max(0.0, time.time() - written_ms / 1000))


class _ShardTail:
    """The reader of one shard stream and the subscribers waiting on it."""

    def __init__(self) -> None:
        self.subs: set[Subscription] = set()
        self.task: asyncio.Task[None] | None = None
        self.ready: asyncio.Future[None] | None = None
        self.position = "0-0"
        """The id of the last event read (kept across restarts of the reader)."""


class EventHub:
    def __init__(self, redis: Any, *, block_ms: int = READ_BLOCK_MS) -> None:
        """`redis`: the client for blocking reads (its socket timeout above `block_ms`)."""
        self.redis = redis
        self.block_ms = block_ms
        self._tails: dict[str, _ShardTail] = {}
        self.failures = FailureLog(log)
        """Where every shard's reader says its failures."""

    @property
    def subscribers(self) -> int:
        return sum(len(t.subs) for t in self._tails.values())

    async def subscribe(self, owner: Owner) -> Subscription:
        """Returns once the hub is reading: any event written after this is delivered."""
        stream = (await layout_of(self.redis)).events_of(owner)
        sub = Subscription(owner, stream)
        tail = self._tails.setdefault(stream, _ShardTail())
        tail.subs.add(sub)
        try:
            if tail.task is None or tail.task.done():
                loop = asyncio.get_running_loop()
                tail.ready = loop.create_future()
                tail.task = loop.create_task(self._run(stream, tail, tail.ready), name=f"event-hub-{stream}")
            assert tail.ready is not None
            await asyncio.shield(tail.ready)
        except BaseException:
            self.unsubscribe(sub)
            raise
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        tail = self._tails.get(sub.stream)
        if tail is None:
            return
        tail.subs.discard(sub)
        # Nobody listening on this shard: stop reading it (the next one starts from "now").
        if not tail.subs:
            if tail.task is not None:
                tail.task.cancel()
            del self._tails[sub.stream]

    async def close(self) -> None:
        """End every open stream (at shutdown), then stop reading."""
        tails, self._tails = list(self._tails.values()), {}
        for tail in tails:
            for sub in list(tail.subs):
                sub.offer(None)
            tail.subs.clear()
            if tail.task is not None:
                tail.task.cancel()
        tasks = [t.task for t in tails if t.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=self.block_ms / 1000 + 1)

    async def _run(self, stream: str, tail: _ShardTail, ready: asyncio.Future[None]) -> None:
        try:
            position = await events.last_id(self.redis, stream)
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError("hub stopped"))
                ready.exception()  # retrieved: subscribers re-raise it, nobody logs it twice
            raise
        ready.set_result(None)
        tail.position = position
        # Supervised: a failure besides Redis' own (handled below) starts the reader
        # again from where it was, rather than leaving every open page without news.
        await supervise(partial(self._read, stream, tail), "the live pages' event reader")

    async def _read(self, stream: str, tail: _ShardTail) -> None:
        # Keep the position across a Redis error: after Redis comes back, nothing in
        # between is lost. Every shard's reader logs through the hub's one failure log.
        retry = Retrying("event stream read failed", log=self.failures, backoff=BACKOFF)
        while True:
            await retry.run(partial(self._tail, stream, tail, retry), retry_on=(RedisError,))

    async def _tail(self, stream: str, tail: _ShardTail, retry: Retrying) -> None:
        async for event in events.tail(self.redis, stream, start=tail.position, block_ms=self.block_ms):
            # Checked at every turn (the tail yields at least once per block time): a
            # cancel a library call swallowed must still end this reader, or it reads on
            # forever with nobody listening and even the event loop cannot close.
            await still_wanted()
            retry.succeeded()
            if event is None:
                continue
            tail.position = event.id
            for sub in list(tail.subs):
                if sub.owner == event.owner:
                    sub.offer(event)
                    _observe_staleness(event)
