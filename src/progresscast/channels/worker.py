"""From the change stream to paced draft updates, for any chat channel.

The worker reads what changed (`intake.py`: the change stream, a catch-up over every
follow) and touches every draft following it. Each destination has a lane (`lane.py`, one
task): it takes touched drafts in turn and makes the next call each needs
(`processing.py`: read, decide, wait for a slot, render, call, store), and sends
one-off messages before them (`lane/one_off.py`); what a reply means besides the draft's
state is `lane/reply_effects.py`.

Only the lane changes a draft's state (commands ask it to, through `touch`), so the
load–decide–call–store sequence of one draft never races with itself. Everything a
later decision depends on is stored with the draft (`DraftState`); what is kept in
memory only is bookkeeping whose loss changes nothing but a log line or a wait.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from functools import partial

from redis.asyncio import Redis

from ..failure_log import FailureLog
from ..model.view import View
from ..render.payload import Payload
from ..store.cards import CardStore
from ..store.events import EventGroup, GroupReading
from ..store.lease import FenceClosed
from ..timescale import time_scale
from .asks import AskMessages, Presses
from .channel import Channel
from .chat.pause import Pauses
from .draft.decide import on_follow
from .draft.outcome import MessageId
from .draft.state import DraftState
from .intake import Intake
from .lane.context import WorkerContext
from .lane.draft_read import DraftRead, Settled
from .lane.lane import ActivityOnly, Lane, OneOff, WhenSettled
from .lane.one_off import OneOffSender
from .lane.processing import DraftProcessor, DraftRequest
from .lane.reply_effects import ReplyEffects
from .pacing import Pacer
from .state.ids import DraftKey, Id
from .worker_options import WorkerOptions


class ChannelWorker:
    def __init__(
        self,
        channel: Channel,
        redis: Redis,
        *,
        options: WorkerOptions | None = None,
        clock: Callable[[], float] = time.time,
        log: logging.Logger | None = None,
    ) -> None:
        self.channel = channel
        self.redis = redis
        self.options = options or WorkerOptions()
        self.clock = clock
        self.log = log or logging.getLogger(f"progresscast.{channel.name}")
        self.store = CardStore(redis)
        self.state = channel.state
        self.pacer = Pacer(channel.budgets)
        self.failures = FailureLog(self.log, self.options.failure_log_interval)
        self.pauses = Pauses(redis, self.state.channel, clock)
        """Destinations that refused the bot for good (`channels.pause`)."""
        self._lanes: dict[Id, Lane] = {}
        self._sweep: asyncio.TimerHandle | None = None
        """Ends the lanes that rested (`Lane.expire`), while there are lanes."""
        self._follow_views: dict[DraftKey, View] = {}
        """The view each new follow was decided on, until the caller's `touch` takes it."""
        self._handed: dict[DraftKey, Callable[[], None]] = {}
        """Drafts the catch-up handed to their lanes: called once the lane looked at it."""
        self.ctx = WorkerContext(
            channel, self.options, self.pacer, self.pauses, asyncio.Semaphore(self.options.calls_in_flight),
            clock, self.log, self.failures,
        )
        self.effects = ReplyEffects(self.ctx, touch=self.touch)
        self.asks = AskMessages(self)
        self.presses = Presses(self, self.asks)
        """What a press or a typed answer does (a platform's transport hands them over)."""
        self.watchers: list[Callable[[DraftKey, View], None]] = []
        """Told every view a followed draft's read found, at once (no I/O of their own
        there): what a platform shows beside its drafts follows it (Slack's agent sessions)."""
        self.drafts = DraftProcessor(
            self.ctx, self.store, self.effects, settled_of=self._settled_of, replies_waiting=self._replies_waiting,
            touched=self._touched_again,
            read_hook=self._asks_read, ticker=self._tick, watch=self._watched,
        )
        self.one_offs = OneOffSender(self.ctx, self.effects)
        self.intake = Intake(self.ctx, redis, touch=self.touch, follow=self.follow, hand_ended=self._hand_ended)

    # --- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        reading = GroupReading(linger=self.options.intake_linger * time_scale())
        consumer = self.options.consumer or socket.gethostname()
        group = EventGroup(self.redis, self.options.group, consumer, reading=reading)
        await group.ensure()  # before reconciling, so no change falls between the two
        await self.channel.load()
        self.channel.access.announce(self.log)
        await self.pauses.load(self.state.parse_id)
        if len(self.pauses):
            self.log.info("%d destinations are paused (they refused the bot)", len(self.pauses))
        self.intake.start(group)

    def catch_up(self, *, config: bool = False) -> None:
        """Look at every followed draft once more, in the background (`Intake.catch_up`)."""
        self.intake.catch_up(config=config)

    async def close(self) -> None:
        self.asks.close()
        await self.intake.close()
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            await lane.close()
        try:  # what edits left unstored (`Drafts.defer`), while the lease is still held
            await self.state.drafts.close()
        except FenceClosed:  # the lease passed on (already logged): its holder edits such drafts once more
            self.log.info("the last edits' bookkeeping not stored: the lease passed on")
        except Exception as exc:  # Redis down: the next holder edits such drafts once more
            self.log.warning("the last edits' bookkeeping not stored at the stop: %s: %s", type(exc).__name__, exc)
        await self.pacer.close()

    async def idle(self) -> None:
        """Wait until no destination has anything queued (tests; a graceful stop)."""
        while any(not lane.idle for lane in self._lanes.values()):
            await asyncio.sleep(0.05)

    async def _asks_read(self, read: DraftRead) -> None:
        """A draft's view was read: its ask messages follow it (`channels.asks`)."""
        try:
            await self.asks.saw(read.key, read.view, read.renderers.inner, read.state.message_id)
        except Exception as exc:  # asks never hold up the draft
            self.failures.warning(f"asks: {type(exc).__name__}", "ask messages: %s", exc)

    def _watched(self, key: DraftKey, view: View) -> None:
        for watcher in self.watchers:
            watcher(key, view)

    # --- lanes ---------------------------------------------------------------------------

    def lane(self, destination: Id) -> Lane:
        lane = self._lanes.get(destination)
        if lane is None or lane.closed:
            lane = self._lanes[destination] = Lane(self.ctx, self, destination)
            if self._sweep is None:
                self._sweep = asyncio.get_running_loop().call_later(self.options.lane_idle / 4, self._end_rested)
        return lane

    def _end_rested(self) -> None:
        """End the lanes that rested `lane_idle` (a lane ends that much to a quarter more
        after its last work)."""
        self._sweep = None
        loop = asyncio.get_running_loop()
        now = loop.time()
        for lane in list(self._lanes.values()):
            lane.expire(now)
        if self._lanes:
            self._sweep = loop.call_later(self.options.lane_idle / 4, self._end_rested)

    def _tick(self, key: DraftKey, delay: float) -> None:
        """Look at a draft again for its times alone (`Lane.tick`)."""
        self.lane(key.chat_id).tick(key, delay)

    def lane_ended(self, lane: Lane) -> None:
        """An idle lane ended: forget it and what only it needed."""
        if self._lanes.get(lane.destination) is lane:
            del self._lanes[lane.destination]
            if self.pacer.ready_in(lane.destination) <= 0:
                self.pacer.forget(lane.destination)
            self.effects.ok(lane.destination)

    def _replies_waiting(self, destination: Id) -> bool:
        lane = self._lanes.get(destination)
        return lane is not None and bool(lane.outbox)

    def _touched_again(self, key: DraftKey) -> bool:
        lane = self._lanes.get(key.chat_id)
        return lane is not None and key in lane.pending

    def _settled_of(self, destination: Id) -> Settled:
        lane = self._lanes.get(destination)
        return lane.seen if lane is not None else {}

    async def process(self, key: DraftKey, activity_only: ActivityOnly = None) -> float | None:
        """Make the next call this draft needs, if any (`DraftProcessor.process`)."""
        if not self.allowed(key.chat_id):
            return None
        return await self.drafts.process(key, activity_only)

    async def deliver(self, lane: Lane, item: OneOff) -> None:
        await self.one_offs.deliver(lane, item)

    def backoff(self, destination: Id) -> float:
        return self.effects.backoff(destination)

    def _hand_ended(self, key: DraftKey) -> None:
        """A follow ended from outside: its lane deletes its draft (once)."""
        if key not in self.drafts.ending:
            self.drafts.ending.add(key)
            self.lane(key.chat_id).touch(key)

    # --- what commands and events ask for ------------------------------------------------

    def allowed(self, destination: Id) -> bool:
        """`allowlist` access, for drafts too: a destination taken out of the config after
        it followed gets nothing more (said once in the log)."""
        if self.channel.access.drafts_allowed(destination):
            return True
        self.effects.log_once(
            "not-allowed", destination,
            "chat %r follows sessions but is not in allowedChats / allowedChannels (access allowlist): skipped",
            destination,
        )
        return False

    async def spoke(self, destination: Id) -> None:
        """The destination sent something (an update, a command): if it was paused (it had
        refused the bot), calls go to it again and its drafts catch up."""
        if self.pauses.paused(destination) and await self.pauses.resume(destination):
            self.log.info("chat %r spoke again: no longer paused", destination)
            for key in await self.state.follows.of(destination):
                self.touch(key)

    def touch(
        self,
        key: DraftKey,
        *,
        followed: bool = False,
        fresh: bool = False,
        looked_at: Callable[[], None] | None = None,
        activity_only: ActivityOnly = None,
    ) -> bool:
        """Look at this draft again soon. `followed`: the destination just subscribed (a
        run that already ended is not announced); `fresh`: show it again at the bottom;
        `looked_at`: called once its lane has looked at it; `activity_only`: what the
        change events said changed (`lane.ActivityOnly`). False when it is not allowed."""
        if not self.allowed(key.chat_id):
            return False
        if followed or fresh:
            requests = self.drafts.requests
            old = requests.get(key, DraftRequest())
            at_follow = self._follow_views.pop(key, None) if followed else None
            requests[key] = DraftRequest(old.followed or followed, at_follow or old.at_follow, old.fresh or fresh)
        if looked_at is not None:
            earlier = self._handed.pop(key, None)
            if earlier is not None:
                earlier()
            self._handed[key] = looked_at
        self.lane(key.chat_id).touch(key, activity_only)
        return True

    async def follow(self, key: DraftKey, *, view: View | None = None) -> bool:
        """Subscribe the destination; False when it already followed. A run that had
        already ended is not announced to it — even when its lane looks at the draft
        before the caller's `touch(key, followed=True)` (an event read late, after the
        subscription is stored), and after a restart before its lane looks at all.
        `view`: the owner's view when the destination asked to follow, if that was
        before now (a follow made once a message is posted); default: read now, with
        whether it follows already (one read)."""
        if view is None:
            view, (followed,) = await self.store.view_with(key.owner, partial(self.state.follows.queue_has, key))
        else:
            followed = await self.state.follows.has(key)
        if followed:
            return False
        # Noted before the subscription is stored: from then on any look at the draft
        # applies it (applying it twice changes nothing).
        requests = self.drafts.requests
        old = requests.get(key, DraftRequest())
        requests[key] = DraftRequest(followed=True, fresh=old.fresh)
        if not await self.state.follows.add(key):
            return False  # followed in between, by someone else: not a new follow after all
        await self._remember_follow(key, view)
        return True

    async def _remember_follow(self, key: DraftKey, view: View) -> None:
        """What a new follow means for its draft, stored at once (for a restart before its
        lane looks), and handed to the lane with the view it was decided on: what the
        follow means is decided by the owner's state now, not by what it is once the lane
        gets to look (a run may begin and end while the lane waits out a 429)."""
        self._follow_views[key] = view  # for the caller's `touch(key, followed=True)`
        request = self.drafts.requests.get(key)
        if request is not None and request.followed and request.at_follow is None:
            self.drafts.requests[key] = replace(request, at_follow=view)
        state = on_follow(DraftState(), view)
        if state != DraftState():
            await self.state.drafts.start(key, state)  # a draft with a state already: the lane applies it

    def looked_at(self, key: DraftKey) -> None:
        """The lane looked at this draft (whatever came of it)."""
        done = self._handed.pop(key, None)
        if done is not None:
            done()

    async def heard(self, destination: Id, thread_id: Id, message_id: MessageId) -> None:
        """Someone else (a person, another bot — never this bot) posted `message_id` in
        the destination's thread: a draft above it moves to the bottom with its next
        update (nothing moves until then). Destinations that may not have drafts are
        not noted."""
        if self.channel.access.drafts_allowed(destination):
            await self.state.messages.heard(destination, thread_id, message_id)

    def say(
        self, destination: Id, thread_id: Id, text: str, *, then: WhenSettled | None = None, urgent: bool = True
    ) -> None:
        """Send a plain-text message (a command reply) before the destination's drafts.
        `then`: what to do with the posted message's id (None: not delivered), done in
        the lane once it is settled — a command that needs the id waits for nothing,
        and what it does next is ordered with the destination's other calls. `urgent`:
        False queues it behind urgent drafts when the bot-wide budget binds."""
        self.lane(destination).say(OneOff(thread_id, text=text, then=then, urgent=urgent))

    def send_once(self, destination: Id, thread_id: Id, payload: Payload) -> None:
        """Send a rendered payload as a one-off message (not a draft)."""
        self.lane(destination).say(OneOff(thread_id, payload=payload))


__all__ = ["ChannelWorker", "Lane", "WhenSettled", "WorkerOptions"]
