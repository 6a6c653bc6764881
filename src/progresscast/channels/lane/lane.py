"""A destination's lane: the one task that calls it (while it has work), one-off
messages first, then the drafts touched there in turn. What it does with each is its
host's (`ChannelWorker`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ...model.timing import MINUTE
from ...render.payload import Payload
from ...supervise import spawn
from ..draft.outcome import MessageId
from ..state.ids import DraftKey, Id
from .context import WorkerContext
from .draft_read import Settled

WhenSettled = Callable[[MessageId | None], Awaitable[None]]
"""What a sender does once its one-off message is settled: given its id, or None
when it was not delivered (`ChannelWorker.say`)."""


@dataclass(frozen=True)
class OneOff:
    """A one-off message through the destination's lane: a command reply, or a snapshot."""

    thread_id: Id
    text: str | None = None
    payload: Payload | None = None
    then: WhenSettled | None = None
    """Called in the lane once the message is settled (never while it is still to be
    retried)."""
    urgent: bool = True
    """False for answers to destinations without a grant: queued behind urgent drafts
    when the bot-wide budget binds, and nothing is stored of them (strangers make no keys)."""
    reply_to: MessageId | None = None
    """Sent as a reply to this message (an ask replies to the live draft); it notifies."""
    edit: MessageId | None = None
    """Not a new message: this message edited to `payload` (an ask that ended)."""


ActivityOnly = bool | None
"""What the change events said of a touched draft: True when only its owner's activity
changed, False when more did; None when nothing says (a command, a timer, the catch-up),
and the draft is read before it queues for its slot."""


def _merged(old: ActivityOnly, new: ActivityOnly) -> ActivityOnly:
    """Two touches of a draft not yet looked at, as one."""
    return None if old is None or new is None else old and new


def _restart(
    timers: dict[DraftKey, asyncio.TimerHandle], key: DraftKey, delay: float, due: Callable[[DraftKey], None]
) -> None:
    """Call `due(key)` in `delay` seconds instead of when `timers` had it due."""
    old = timers.pop(key, None)
    if old is not None:
        old.cancel()
    timers[key] = asyncio.get_running_loop().call_later(delay, due, key)


class LaneHost(Protocol):
    """What a lane asks of the worker that made it (besides the context all parts share)."""

    async def deliver(self, lane: Lane, item: OneOff) -> None: ...

    async def process(self, key: DraftKey, activity_only: ActivityOnly = None) -> float | None: ...

    def backoff(self, destination: Id) -> float: ...

    def looked_at(self, key: DraftKey) -> None: ...

    def lane_ended(self, lane: Lane) -> None: ...


class Lane:
    """What calls a destination, one call at a time: replies first, then touched drafts
    in turn, in one task that runs while there is work."""

    def __init__(self, ctx: WorkerContext, host: LaneHost, destination: Id) -> None:
        self.ctx = ctx
        self.host = host
        self.destination = destination
        self.pending: dict[DraftKey, ActivityOnly] = {}
        """Drafts to look at, in turn, and what their touches said changed."""
        self.outbox: list[OneOff] = []
        """A list, not a deque: usually empty, and an empty deque is ≈ 760 bytes (an
        empty list 56) — per chat at 10,000 chats."""
        self.timers: dict[DraftKey, asyncio.TimerHandle] = {}
        self.ticks: dict[DraftKey, asyncio.TimerHandle] = {}
        """Per settled draft of a live run: when its times are next looked at (`tick`)."""
        self.seen: Settled = {}
        """Per draft: the stored state and the inputs (`inputs_of`) it was last settled
        with (`SettledWith`) — what it shows then needs no new decision. Memory only, gone with the lane."""
        self.closed = False
        self.task: asyncio.Task[None] | None = None
        """Runs while the lane has work, and ends when it has none (`wake` starts the
        next): 10,000 idle lanes then hold no task, coroutines or futures."""
        self._rested = asyncio.get_running_loop().time()
        """When (loop time) the lane last ran out of work (`expire`)."""

    def touch(self, key: DraftKey, activity_only: ActivityOnly = None) -> None:
        self.pending[key] = _merged(self.pending[key], activity_only) if key in self.pending else activity_only
        self.wake()

    def later(self, key: DraftKey, delay: float) -> None:
        _restart(self.timers, key, delay, self._due)

    def _due(self, key: DraftKey) -> None:
        self.timers.pop(key, None)
        self.touch(key)

    def tick(self, key: DraftKey, delay: float) -> None:
        """Look at a settled draft again in `delay` seconds for its times alone (the run's
        next minute): not counted as work (`idle`), and skipped while the chat is busy."""
        _restart(self.ticks, key, delay, self._tick_due)

    def _tick_due(self, key: DraftKey) -> None:
        self.ticks.pop(key, None)
        if self.closed:
            return
        if self.pending or self.outbox or not self.ctx.pacer.free(self.destination):
            # The chat's budget is busy: its times wait for the next minute (anything
            # else the draft shows meanwhile brings them along).
            self.tick(key, MINUTE)
            return
        self.touch(key, True)  # as a tool line: never urgent, read at its slot

    def say(self, item: OneOff) -> None:
        self.outbox.append(item)
        self.wake()

    def wake(self) -> None:
        """Start the lane's task unless it runs (it looks at everything touched before it ends)."""
        if (self.task is None or self.task.done()) and not self.closed:
            # Supervised: what fails around a draft is caught in the loop, and anything
            # else starts the lane again (its pending drafts kept) rather than leaving the
            # chat mute.
            name = self.ctx.channel.name
            self.task = spawn(
                self._run, f"a {name} chat's lane", name=f"{name}-chat-{self.destination}",
                failures=self.ctx.failures, backoff=self.ctx.options.backoff,
            )

    def expire(self, now: float) -> None:
        """End the lane if it has rested `lane_idle` by `now` (loop time) with nothing to
        come; `ChannelWorker.lane` makes a new one on demand. The worker's sweep calls
        this: one timer for every lane, not one each (10,000 timers are ≈ 5 MB)."""
        if self.closed or (self.task is not None and not self.task.done()):
            return
        if now - self._rested >= self.ctx.options.lane_idle and self.idle and not self.ticks:
            self.closed = True
            self.host.lane_ended(self)

    @property
    def idle(self) -> bool:
        return not self.pending and not self.outbox and not self.timers

    async def _run(self) -> None:
        host = self.host
        while not self.closed and (self.pending or self.outbox):
            if self.outbox:
                try:
                    await host.deliver(self, self.outbox.pop(0))
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis down: drop the reply rather than stall the chat
                    self.ctx.failures.exception(
                        f"message failed: {type(exc).__name__}", "a message to chat %r failed", self.destination
                    )
                continue
            key = next(iter(self.pending))
            activity_only = self.pending.pop(key)
            try:
                delay = await host.process(key, activity_only)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down, a renderer bug: log, and look again later
                self.ctx.failures.exception(
                    f"draft failed: {type(exc).__name__}", "draft %r in chat %r failed", key.owner.display_key,
                    key.chat_id,
                )
                delay = host.backoff(self.destination)
            if delay is not None and delay <= 0:
                self.pending[key] = None  # after the chat's other drafts, read first
                continue
            host.looked_at(key)  # done with it for now: the next follow may be looked at
            if delay is not None:
                self.later(key, delay)
        # Out of work: the task ends. No await since the check: nothing touched is missed
        # (a touch from now on starts the next task).
        self.task = None
        self._rested = asyncio.get_running_loop().time()

    async def close(self) -> None:
        # The flag as well as the cancel: a library call may swallow a CancelledError
        # (Python 3.11's wait_for race), and the loop must still end.
        self.closed = True
        for timer in (*self.timers.values(), *self.ticks.values()):
            timer.cancel()
        self.timers.clear()
        self.ticks.clear()
        task, self.task = self.task, None
        if task is None:
            return
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass


__all__ = ["ActivityOnly", "Lane", "LaneHost", "OneOff", "WhenSettled"]
