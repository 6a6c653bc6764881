"""What a channel worker is asked to look at: the change stream, the catch-up over every
follow, the follows ended from outside, and the pruning of expired destinations.

One consumer in the channel's group reads change events; an event only says which owner
changed, so a batch is coalesced to its owners and every draft following them is
*touched* (handed to its destination's lane)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass, field
from functools import partial
from typing import Protocol

from redis.asyncio import Redis

from ..backoff import Retrying
from ..stopping import still_wanted
from ..store.events import EventGroup, coalesce
from ..store.retention import SWEEP_EVERY_MAX, retention_ms, sweep_every
from ..supervise import spawn
from .lane.context import WorkerContext
from .state.ids import DraftKey

FOLLOWS_AT_ONCE = 100
"""The config's follows stored side by side at start-up."""


class Touch(Protocol):
    """`ChannelWorker.touch`: hand a draft to its lane; False when the destination may
    not have it."""

    def __call__(
        self,
        key: DraftKey,
        *,
        followed: bool = False,
        looked_at: Callable[[], None] | None = None,
        activity_only: bool | None = None,
    ) -> bool: ...


@dataclass(eq=False)
class Intake:
    ctx: WorkerContext
    redis: Redis
    _: KW_ONLY
    touch: Touch
    follow: Callable[[DraftKey], Awaitable[bool]]
    hand_ended: Callable[[DraftKey], None]
    """Hand a follow ended from outside to its lane (once)."""
    _catch_up: asyncio.Task[None] | None = field(default=None, init=False)
    _events: asyncio.Task[None] | None = field(default=None, init=False)
    _pruner: asyncio.Task[None] | None = field(default=None, init=False)
    _closing: bool = field(default=False, init=False)
    _ended_checked: float = field(default=0.0, init=False)

    def start(self, group: EventGroup) -> None:
        self._closing = False  # a worker stopped by `close` may be started again
        name = self.ctx.channel.name
        self._events = spawn(
            partial(self._consume, group), f"reading the {name} change stream",
            name=f"{name}-events", failures=self.ctx.failures, backoff=self.ctx.options.backoff,
        )
        self._pruner = spawn(
            self._pruning, f"pruning the {name} destinations", name=f"{name}-prune",
            failures=self.ctx.failures, backoff=self.ctx.options.backoff,
        )
        self.catch_up(config=True)

    async def close(self) -> None:
        self._closing = True
        if self._catch_up is not None:
            self._catch_up.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._catch_up
            self._catch_up = None
        for task in (self._events, self._pruner):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._events = self._pruner = None

    def catch_up(self, *, config: bool = False) -> None:
        """Look at every followed draft once more, in the background (a restart catches up
        with what changed while it was down); `config`: subscribe the config's follows first."""
        if self._catch_up is not None:
            self._catch_up.cancel()
        self._catch_up = spawn(
            partial(self._catching_up, config), f"the {self.ctx.channel.name} catch-up",
            name=f"{self.ctx.channel.name}-catch-up", failures=self.ctx.failures, backoff=self.ctx.options.backoff,
        )

    async def _catching_up(self, config: bool) -> None:
        # At most `catch_up` drafts handed to their lanes and not yet looked at: with
        # 10,000 follows, Redis sees a steady queue, and the bot polls from the start.
        slots = asyncio.Semaphore(self.ctx.options.catch_up)

        handed: set[DraftKey] = set()

        async def hand(key: DraftKey, *, followed: bool = False) -> None:
            if key in handed:  # a config follow is among the stored ones: once is enough
                return
            handed.add(key)
            await slots.acquire()
            if not self.touch(key, followed=followed, looked_at=slots.release):
                slots.release()

        async def look() -> None:
            nonlocal config
            if config:
                # Stored side by side: their reads and writes leave together (one round
                # trip for many, `CoalescingRedis`), not one follow's four after another's.
                follows = await self.ctx.channel.config_follows()
                for at in range(0, len(follows), FOLLOWS_AT_ONCE):
                    some = follows[at:at + FOLLOWS_AT_ONCE]
                    for key, new in zip(some, await asyncio.gather(*map(self.follow, some)), strict=True):
                        if new:
                            await hand(key, followed=True)
                config = False
            for key in await self.ctx.state.follows.all():
                await hand(key)
            await self.ended()

        # Redis down at start-up: looked at again after the one backoff.
        retry = Retrying("reading the follows failed", log=self.ctx.failures, backoff=self.ctx.options.backoff)
        await retry.run(look)

    async def _consume(self, group: EventGroup) -> None:
        retry = Retrying("reading the change stream failed", log=self.ctx.failures, backoff=self.ctx.options.backoff)
        while not self._closing:
            await retry.run(lambda: self._batch(group))

    async def _batch(self, group: EventGroup) -> None:
        """Read one batch of changes and touch every draft following them."""
        try:
            events = await group.read(count=200, block_ms=1000)
        except Exception as exc:
            if "NOGROUP" in str(exc) or "no longer exists" in str(exc):
                # The stream or the group is gone (a flushed or restarted Redis without
                # persistence): create them again and look at every draft once more,
                # since the events in between are lost.
                self.ctx.log.warning("the change stream or its consumer group is gone: recreating it")
                with contextlib.suppress(Exception):
                    await group.ensure()
                    self.catch_up()
            raise
        if events:
            changed = coalesce(events)
            owners = list(changed)
            # Who follows the owners, and the batch acknowledged: one round trip.
            # Acknowledged before the touches, which only hand drafts to lanes in
            # memory (a restart's catch-up looks at every draft anyway).
            async with self.redis.pipeline(transaction=False) as pipe:
                self.ctx.state.follows.queue_followers(pipe, owners)
                group.queue_ack(pipe, events)
                replies = await pipe.execute()
            group.acked(events)
            for key in self.ctx.state.follows.followers_from(owners, replies[: len(owners)]):
                self.touch(key, activity_only=changed[key.owner])
        if time.monotonic() - self._ended_checked >= 1.0:
            await self.ended()

    async def _pruning(self) -> None:
        """Destinations whose follows expired leave the set read at start-up (retention.py)."""
        while True:
            ms = await retention_ms(self.redis)
            await still_wanted()  # before a long wait: a Redis call may have lost the cancel (stopping.py)
            await asyncio.sleep(sweep_every(ms) if ms > 0 else SWEEP_EVERY_MAX)
            if ms > 0:
                await self.ctx.state.follows.prune_destinations()

    async def ended(self) -> None:
        """Hand the follows ended from outside (a revoked grant) to their lanes, which
        delete their drafts. Looked at about once a second."""
        self._ended_checked = time.monotonic()
        for key in await self.ctx.state.follows.ended():
            self.hand_ended(key)


__all__ = ["Intake"]
