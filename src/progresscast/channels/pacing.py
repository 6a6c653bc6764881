"""Pacing of a channel's API calls: per destination and for the whole bot, served fairly.

A channel supplies its `Budgets`: the interval between two calls to one destination
(Telegram: 1 s in a private chat, 3 s in a group; Slack: ≈ 1 s per channel), how many
calls a second the bot (or workspace) may make in all, and how long a rate-limit
answer is honoured at most. A destination's spacing is strict (no bursts), so it is
never refused. The bot-wide slots follow their ideal times: when the event loop wakes
late (busy with writes), the slots that fell due meanwhile are granted at once rather
than lost, up to `catch_up` seconds' worth — a burst no larger than that, which the
channel's bot-wide allowance absorbs. When the calls leave (`leaving`) they are counted
again, as the platform counts them: no sliding second (on the time scale) holds more
than `bot_rate` calls, so a catch-up spreads the late calls instead of bunching them.

`acquire` is the only way to a slot. A destination first waits until it may be called;
then it queues for the bot-wide slot. When the bot-wide budget binds, slots go to the
queued destinations in a fair order: urgent changes (a step changed state, a run ended,
a message to delete) before the rest (a change of tool lines only), and within each,
the destination that has waited longest for its change first. Content is rendered
only once the slot is granted (the caller decides then), and again when the call then
waited to leave (`reread_after`) and its draft changed meanwhile, so what goes out is
never older than the newest card the caller heard of; a destination whose newest card
is already shown never queues, so it costs nothing.

All intervals are multiplied by `timescale.time_scale()` when the budgets are made.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections import deque
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
    held_together: bool = False
    """A rate-limit answer holds back every destination, not only the one it answered:
    the server limits the account (Matrix homeservers limit each user, in every room)."""
    catch_up: float = 0.2
    """Bot-wide slots that fell due while the event loop was busy are granted late, at
    once, up to this many seconds' worth of them (older ones are gone)."""
    leave_margin: float = 0.05
    """`leaving` keeps `bot_rate` calls to a second and this much more: a call reaches the
    platform a little after it leaves (the request is built, the loop may be busy), and
    not equally late each time, so calls spaced exactly by when they left could arrive
    more than `bot_rate` to a second as the platform counts them."""
    reread_after: float = 0.01
    """A draft decided before its call waited longer than this to leave, and touched
    meanwhile, is read, decided and rendered again (`DraftProcessor._at_slot`): shorter
    waits cost no second read."""
    scale: float = field(default_factory=time_scale)

    def spacing(self, destination: Hashable) -> float:
        return self.interval(destination) * self.scale

    @property
    def bot_spacing(self) -> float:
        # The grants keep the pace the calls may leave at (`leave_margin`): granted any
        # faster, granted calls would queue at `leaving`, each holding a call in flight.
        return self.scale * (1 + self.leave_margin) / self.bot_rate

    @property
    def catch_up_seconds(self) -> float:
        return self.catch_up * self.scale

    @property
    def reread_seconds(self) -> float:
        return self.reread_after * self.scale


@dataclass(slots=True)
class Departure:
    """When a call left (`Pacer.leaving`), and how long it waited to (seconds). A call
    that does more before it is sent (`leaving(..., sent=False)`) is counted among the
    bot's calls when it is (`Pacer.sent`), or given up (`Pacer.stayed`)."""

    at: float
    waited: float
    pending: bool = False


class Pacer:
    def __init__(self, budgets: Budgets, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.budgets = budgets
        self.clock = clock
        self._next: dict[Hashable, float] = {}
        self._bot_next = 0.0
        self._leave_next = 0.0
        """When the bot's next call may leave (`leaving`)."""
        self._left: deque[float] = deque(maxlen=max(1, int(budgets.bot_rate)))
        """When the bot's last `bot_rate` calls were sent (in order)."""
        self._pending = 0
        """Calls that left but are not sent yet (`leaving(..., sent=False)`): each is
        counted as sent now by every call that leaves meanwhile."""
        self._leave_turn = asyncio.Lock()
        self._queue: list[tuple[int, float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        """Fires when the queue's next bot-wide slot is due (None: nothing queued)."""
        self._called_all: float | None = None
        """`clock()` from which every destination counts as just called (`as_if_all_called`)."""
        self._held_all = 0.0
        """`clock()` before which no destination is called (a rate limit of the account)."""

    # --- one destination -----------------------------------------------------------------

    def as_if_all_called(self) -> None:
        """Count every destination as called just now: another process (the previous
        holder of the bot's lease) may have called any of them a moment ago."""
        self._called_all = self.clock()

    def _next_at(self, destination: Hashable) -> float:
        found = self._next.get(destination)
        if found is None:
            found = 0.0 if self._called_all is None else self._called_all + self.budgets.spacing(destination)
        return max(found, self._held_all)

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
        if self.budgets.held_together:
            self._held_all = max(self._held_all, self.clock() + seconds)
        self._next[destination] = max(self._next_at(destination), self.clock() + seconds)
        return seconds

    async def leaving(self, destination: Hashable, *, sent: bool = True) -> Departure:
        """A call to `destination` is about to leave: when, and how long it waited to.
        Slots are spaced when they are granted, but the calls granted together by a
        catch-up would leave together, and the platform counts by arrival. So the bot's
        calls are spaced again by when they leave — the same budget and `catch_up` as
        the grants, and no sliding second holding more than `bot_rate` — and the
        destination's next slot is one spacing from the moment its call left. A draft
        that waited here longer than `reread_after` and changed meanwhile is read and
        rendered again (`DraftProcessor`); `stayed` when it then makes no call.

        `sent=False`: the caller does more before the call is sent (a write-ahead, a
        read), which may take uneven time. The call is counted when it is sent (`sent`),
        and until then as sent at every moment, so no sliding second of the calls as
        they are sent holds more than `bot_rate`, however long that took."""
        began = now = self.clock()
        # Each call takes its place in the spacing as it comes, and waits for it on its
        # own: a wait under the lock below would hand the lock on one call per turn of
        # the event loop, which a busy loop makes slower than the budget's pace.
        at = max(self._leave_next, now - self.budgets.catch_up_seconds)
        self._leave_next = at + self.budgets.bot_spacing
        if at > now:
            await asyncio.sleep(at - now)
        window = self.budgets.scale * (1 + self.budgets.leave_margin)
        async with self._leave_turn:  # the hard limits: one call at a time, judged when it really leaves
            held = False
            while True:
                now = self.clock()
                at = max(now, self._held_all)
                room = self._left.maxlen - self._pending  # type: ignore[operator]  # set in __init__
                if room <= 0:  # the whole budget is between leaving and sent: wait for one
                    at = max(at, now + self.budgets.bot_spacing)
                elif len(self._left) >= room:
                    # the call `bot_rate` calls back (those not sent yet counted as now)
                    # was sent a second (scaled) before this one: no sliding second holds
                    # more than the budget, catch-up included
                    at = max(at, self._left[-room] + window)
                if at <= now:
                    break
                held = True
                await asyncio.sleep(at - now)  # a stalled loop wakes late: judged again
            if sent:
                self._left.append(now)
            else:
                self._pending += 1
            if held:  # by a rate limit or a full window: the spacing goes on from now
                self._leave_next = max(self._leave_next, now + self.budgets.bot_spacing)
        self._next[destination] = max(self._next_at(destination), self.clock() + self.budgets.spacing(destination))
        return Departure(now, now - began, pending=not sent)

    def sent(self, departure: Departure) -> None:
        """The call of a `leaving(..., sent=False)` is sent now: counted from now."""
        if departure.pending:
            departure.pending = False
            self._pending -= 1
            self._left.append(self.clock())

    def stayed(self, destination: Hashable, departure: Departure) -> None:
        """A call counted by `leaving` did not go after all (the draft, read again after
        its wait to leave, needed none; or it failed before it was sent): its place among
        the bot's calls is freed, and its grant given back (`give_back`)."""
        if departure.pending:
            departure.pending = False
            self._pending -= 1
        else:
            with contextlib.suppress(ValueError):  # pushed out by later calls already
                self._left.remove(departure.at)
        floor = self.clock() - self.budgets.catch_up_seconds
        self._leave_next = max(floor, self._leave_next - self.budgets.bot_spacing)
        self.give_back(destination)

    def forget(self, destination: Hashable) -> None:
        self._next.pop(destination, None)

    # --- the bot-wide slot ----------------------------------------------------------------

    def free(self, destination: Hashable) -> bool:
        """Is a slot for `destination` free this moment (it may be called and nobody
        queues for the bot)? What `take` spends; a timed re-render asks it first."""
        return not self._queue and self._bot_next <= self.clock() and self.ready_in(destination) <= 0

    def take(self, destination: Hashable) -> bool:
        """Spend a slot for one call to `destination` if one is free this moment (the
        destination may be called and nobody queues for the bot): no wait, so what the
        caller read just before is as new as a read at the slot. False: `acquire`."""
        if not self.free(destination):
            return False
        now = self.clock()
        self._bot_next = now + self.budgets.bot_spacing
        self._next[destination] = max(self._next_at(destination), now) + self.budgets.spacing(destination)
        metrics.PACING_WAIT.observe(0.0)
        return True

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
            # Nobody waits: the slot is taken now (slots nobody wanted are not owed).
            self._bot_next = now + self.budgets.bot_spacing
        else:
            future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            entry = (0 if urgent else 1, now if since is None else since, next(self._order), future)
            heapq.heappush(self._queue, entry)
            self._arm()
            try:
                await future
            except asyncio.CancelledError:
                if future.done() and not future.cancelled():
                    self._refund()  # granted, then cancelled before it could call
                raise
            # A rate-limit answer may have held the destination while it queued.
            await self.ready(destination)
        self._next[destination] = max(self._next_at(destination), self.clock()) + self.budgets.spacing(destination)

    def give_back(self, destination: Hashable) -> None:
        """A slot was granted but no call was made (the destination already showed the
        newest card): the destination may be called again at once, and the bot-wide
        slot goes to the next one waiting."""
        self._next[destination] = min(self._next_at(destination), self.clock())
        self._refund()

    def _refund(self) -> None:
        """An unused bot-wide slot: the next one comes one spacing earlier (not before
        what `catch_up` allows), and whoever waits for it is woken for it."""
        floor = self.clock() - self.budgets.catch_up_seconds
        self._bot_next = max(floor, self._bot_next - self.budgets.bot_spacing)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._arm()

    def _arm(self) -> None:
        """A timer for the queue's next bot-wide slot, unless one is set. Every change
        that can make a slot due (a new waiter, a refund, a grant) arms it, so a due
        slot never waits for some later event."""
        if self._timer is not None or not self._queue:
            return
        delay = max(0.0, self._bot_next - self.clock())
        self._timer = asyncio.get_running_loop().call_later(delay, self._grant)

    def _grant(self) -> None:
        """The timer fired: its slot is due. Grant it, and every further slot that is due
        by now (the loop may have woken late), best-placed waiter first."""
        self._timer = None
        now = self.clock()
        floor = now - self.budgets.catch_up_seconds
        due = True  # the slot the timer was set for
        while self._queue and (due or self._bot_next <= now):
            _, _, _, future = heapq.heappop(self._queue)
            if future.done():  # its waiter was cancelled
                continue
            self._bot_next = max(self._bot_next, floor) + self.budgets.bot_spacing
            future.set_result(None)
            due = False
        self._arm()

    @property
    def queued(self) -> int:
        return sum(not f.done() for *_, f in self._queue)

    def bot_ready_in(self) -> float:
        """Seconds until the next bot-wide slot (0 when one is free now)."""
        return max(0.0, self._bot_next - self.clock())

    async def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        for *_, future in self._queue:
            future.cancel()
        self._queue.clear()


__all__ = ["Budgets", "Departure", "Pacer"]
