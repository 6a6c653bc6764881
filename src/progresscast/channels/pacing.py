"""Pacing of a channel's API calls: per destination and for the whole bot, served fairly.

A channel supplies its `Budgets`: the interval between two calls to one destination
(Telegram: 1 s in a private chat, 3 s in a group; Slack: ≈ 1 s per channel), how many
calls a second the bot (or workspace) may make in all, and how long a rate-limit
answer is honoured at most. Spacing is strict (no bursts), so a destination is never
refused.

`acquire` is the only way to a slot. A destination first waits until it may be called;
then it queues for the bot-wide slot. When the bot-wide budget binds, slots go to the
queued destinations in a fair order: urgent changes (a step changed state, a run ended,
a message to delete) before the rest (a change of tool lines only), and within each,
the destination that has waited longest for its change first. Content is rendered
only once the slot is granted (the caller decides then), so what goes out is never
older than the newest card at that moment; a destination whose newest card is
already shown never queues, so it costs nothing.

All intervals are multiplied by `timescale.time_scale()` when the budgets are made.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from .. import metrics
from ..timescale import time_scale


@dataclass(frozen=True)
class Budgets:
    """A channel's budgets; `interval(destination)` seconds between calls to one."""

    interval: Callable[[Hashable], float]
    bot_rate: float
    """Calls per second for the whole bot (Telegram ≈ 30) or workspace."""
    retry_after_cap: float = 60.0
    """A rate-limit answer's retry_after is honoured up to this many seconds."""
    scale: float = field(default_factory=time_scale)

    def spacing(self, destination: Hashable) -> float:
        return self.interval(destination) * self.scale

    @property
    def bot_spacing(self) -> float:
        return self.scale / self.bot_rate


class Pacer:
    def __init__(self, budgets: Budgets, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.budgets = budgets
        self.clock = clock
        self._next: dict[Hashable, float] = {}
        self._bot_next = 0.0
        self._queue: list[tuple[int, float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._dispatcher: asyncio.Task[None] | None = None
        self._called_all: float | None = None
        """`clock()` from which every destination counts as just called (`as_if_all_called`)."""

    # --- one destination -----------------------------------------------------------------

    def as_if_all_called(self) -> None:
        """Count every destination as called just now: another process (the previous
        holder of the bot's lease) may have called any of them a moment ago."""
        self._called_all = self.clock()

    def _next_at(self, destination: Hashable) -> float:
        found = self._next.get(destination)
        if found is not None:
            return found
        if self._called_all is None:
            return 0.0
        return self._called_all + self.budgets.spacing(destination)

    def ready_in(self, destination: Hashable) -> float:
        """Seconds until `destination` may be called (0 when it may now)."""
        return max(0.0, self._next_at(destination) - self.clock())

    async def ready(self, destination: Hashable) -> None:
        """Wait until the destination may be called (the slot may move while we sleep: a
        rate-limit answer)."""
        while (wait := self.ready_in(destination)) > 0:
            await asyncio.sleep(wait)

    def hold(self, destination: Hashable, seconds: float) -> float:
        """The channel said "retry after `seconds`": no call to this destination before
        then (capped, and on the time scale like every interval). Returns the seconds held."""
        seconds = min(max(seconds, 0.0), self.budgets.retry_after_cap) * self.budgets.scale
        self._next[destination] = max(self._next_at(destination), self.clock() + seconds)
        return seconds

    def forget(self, destination: Hashable) -> None:
        self._next.pop(destination, None)

    # --- the bot-wide slot ----------------------------------------------------------------

    async def acquire(self, destination: Hashable, *, urgent: bool = True, since: float | None = None) -> None:
        """Wait for a slot for one call to `destination`, and spend it (the destination's
        and one bot-wide). `since`: when the destination began to wait for the change
        it is about to show (older goes first)."""
        began = time.monotonic()
        try:
            await self._acquire(destination, urgent=urgent, since=since)
        finally:
            metrics.PACING_WAIT.observe(time.monotonic() - began)

    async def _acquire(self, destination: Hashable, *, urgent: bool, since: float | None) -> None:
        await self.ready(destination)
        now = self.clock()
        if not self._queue and self._bot_next <= now:
            self._bot_next = now + self.budgets.bot_spacing
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (0 if urgent else 1, now if since is None else since, next(self._order), future)
            heapq.heappush(self._queue, entry)
            if self._dispatcher is None or self._dispatcher.done():
                self._dispatcher = asyncio.create_task(self._dispatch(), name="pacer")
            await future
            # A rate-limit answer may have held the destination while it queued.
            await self.ready(destination)
        self._next[destination] = max(self._next_at(destination), self.clock()) + self.budgets.spacing(destination)

    def give_back(self, destination: Hashable) -> None:
        """A slot was granted but no call was made (the destination already showed the
        newest card): the destination may be called again at once."""
        self._next[destination] = min(self._next_at(destination), self.clock())

    async def _dispatch(self) -> None:
        while self._queue:
            wait = self._bot_next - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)
            _, _, _, future = heapq.heappop(self._queue)
            if future.done():  # its waiter was cancelled
                continue
            self._bot_next = max(self.clock(), self._bot_next) + self.budgets.bot_spacing
            future.set_result(None)

    @property
    def queued(self) -> int:
        return sum(not f.done() for *_, f in self._queue)

    async def close(self) -> None:
        if self._dispatcher is not None:
            self._dispatcher.cancel()
            try:
                await self._dispatcher
            except asyncio.CancelledError:
                pass
        for *_, future in self._queue:
            future.cancel()
        self._queue.clear()


__all__ = ["Budgets", "Pacer"]
