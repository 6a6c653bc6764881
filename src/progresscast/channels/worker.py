"""From the change stream to paced draft updates, for any chat channel.

One consumer in the channel's group reads change events; an event only says which
owner changed, so a batch is coalesced to its owners and every draft following them
is *touched*. Each destination has a lane (one task): it takes touched drafts in turn,
reads the newest view, and when it differs from what the draft was last settled with
waits for a slot (`Pacer.acquire`: the destination's pace, then the bot-wide budget,
served fairly), then reads the newest view again, decides, renders and makes the call
(a slot free at once is taken right after the first read). Rendering only once the
slot is granted is what keeps only the newest content going out, however many writes
came in or however long the bot-wide queue was. A draft the lane has not settled yet
(a first look, a command's request, an unsure send) is also decided before its slot,
to know whether it needs one and how urgent it is.

Only the lane changes a draft's state (commands ask it to, through `touch`), so the
load–decide–call–store sequence of one draft never races with itself. Everything a
later decision depends on is stored with the draft (`DraftState`); what is kept in
memory only is bookkeeping whose loss changes nothing but a log line or a wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial

from redis.asyncio import Redis

from ..backoff import Backoff
from ..failure_log import INTERVAL, FailureLog
from ..model.needs import Need
from ..model.view import View
from ..render.payload import Payload
from ..stopping import still_wanted
from ..store.cards import CardStore
from ..store.events import EventGroup, coalesce
from ..store.retention import SWEEP_EVERY_MAX, retention_ms, sweep_every
from ..supervise import spawn
from .channel import Channel
from .conduct import Conduct, conduct_of
from .destinations import notify_of
from .drafts import (
    Call,
    Delete,
    DraftState,
    Edit,
    Intent,
    Probe,
    Renderers,
    Send,
    Situation,
    Wait,
    apply,
    begin,
    decide,
    on_follow,
)
from .outcome import MessageId, Outcome, OutcomeKind
from .pacing import Pacer
from .pause import Pauses
from .state import DraftKey, Id


@dataclass(frozen=True)
class WorkerOptions:
    settle: float = 3.0
    """After a first send whose outcome is unknown, wait this long before probing for
    it: a request still in flight at the server may land meanwhile."""
    max_probes: int = 5
    """Message ids probed for an unsure send before it is taken as not landed."""
    backoff: Backoff = field(default_factory=Backoff)
    """After network errors and 5xx (and a failing change stream)."""
    lane_idle: float = 120.0
    """Seconds a destination's lane (its task) waits with nothing to do before it ends;
    a new one starts on demand."""
    remember: int = 10_000
    """At most this many log-once keys: the oldest are forgotten."""
    group: str = "telegram"
    """Consumer group on the change stream."""
    consumer: str | None = None
    """Consumer name; default the host name, so a restarted adapter re-reads what it
    had received but not acknowledged."""
    catch_up: int = 32
    """Drafts looked at together when every follow is read again (start-up, a lost
    change stream): a queue, not 10,000 lanes hitting Redis at once."""
    failure_log_interval: float = INTERVAL
    """A kind of failure is logged at most once per this many seconds."""
    calls_in_flight: int = 16
    """Calls made at once (the client's connections). A lane reads and renders only once
    it holds one of them besides its slot: content never waits for a connection."""


class Bounded:
    """A set that forgets its oldest members past `limit` (log-once keys: a long-running
    adapter must not grow without bound)."""

    def __init__(self, limit: int = 1000) -> None:
        self.limit = limit
        self._items: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, item: Hashable) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def discard(self, item: Hashable) -> None:
        self._items.pop(item, None)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)


Then = Callable[[MessageId | None], Awaitable[None]]
"""What a sender does once its one-off message is settled: given its id, or None
when it was not delivered (`ChannelWorker.say`)."""


@dataclass(frozen=True)
class _Say:
    """A one-off message through the destination's lane: a command reply, or a snapshot."""

    thread_id: Id
    text: str | None = None
    payload: Payload | None = None
    then: Then | None = None
    """Called in the lane once the message is settled (never while it is still to be
    retried)."""
    urgent: bool = True
    """False for answers to destinations without a grant: queued behind urgent drafts
    when the bot-wide budget binds, and nothing is stored of them (strangers make no keys)."""


@dataclass(frozen=True)
class _Request:
    """What a command asked of a draft, applied by its lane before anything else."""

    followed: bool = False
    """The destination just subscribed: a run that already ended is not announced."""
    at_follow: View | None = None
    """The owner's view when the destination subscribed (`follow`): a run that
    ended *then* is not announced — one that began and ended while the lane was still
    busy (a flood wait, a timeout) is, since the destination followed before it."""
    fresh: bool = False
    """Show the draft again at the bottom (/card)."""


@dataclass(frozen=True)
class _Read:
    """Everything one decision about a draft reads."""

    key: DraftKey
    state: DraftState
    following: bool
    view: View
    renderers: _Rendered
    below: MessageId | None = None
    """The newest message someone else posted in the draft's thread (`ChannelState.heard`)."""


class _Rendered:
    """A destination's renderers, rendering each view (and answer) once: the decision
    after a call looks at the same view again."""

    def __init__(self, renderers: Renderers) -> None:
        self.inner = renderers
        self.mode = renderers.mode
        self._drafts: list[tuple[View, Payload | None]] = []
        self._answers: dict[tuple[str, str | None], list[Payload]] = {}

    def draft(self, view: View) -> Payload | None:
        for seen, payload in self._drafts:
            if seen is view:
                return payload
        payload = self.inner.draft(view)
        self._drafts.append((view, payload))
        return payload

    def snapshot(self, view: View) -> Payload | None:
        return self.inner.snapshot(view)

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        if (markdown, head) not in self._answers:
            self._answers[markdown, head] = self.inner.answer(markdown, head)
        return self._answers[markdown, head]

    def end_line(self, view: View) -> str | None:
        return self.inner.end_line(view)

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        return self.inner.ping(view, needs)


def _inputs(read: _Read) -> tuple[object, ...]:
    """What a decision about a draft depends on besides its stored state, compared by
    value: the same inputs and state decide the same. The card by revision and write
    time; the activity last, as tool lines and a headline are the one change that is
    not urgent (`_urgent_change`)."""
    view, renderers = read.view, read.renderers.inner
    card = (view.card.revision, view.card.updatedAt) if view.card is not None else None
    settings = (getattr(renderers, "settings", renderers), getattr(renderers, "recipient", None))
    activity = view.activity
    return (
        read.following, card, view.run, view.run_id, view.paused, view.after_end, view.previous, settings,
        (activity.headline, activity.tools, activity.answer, activity.attention),
    )


def _urgent_change(read: _Read, before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    """Does a change from inputs `before` to `now` go first when the bot-wide budget
    binds? All but one that touches only the activity of a draft already showing this
    card revision (tool lines, a headline), as `ChannelWorker._urgent` decides it."""
    card = read.view.card
    same_card = read.state.message_id is not None and card is not None and card.revision == read.state.revision
    return not (same_card and before[:-1] == now[:-1])


class Lane:
    """The one task that calls a destination: replies first, then touched drafts in turn."""

    def __init__(self, worker: ChannelWorker, chat_id: Id) -> None:
        self.worker = worker
        self.chat_id = chat_id
        self.pending: dict[DraftKey, None] = {}  # an ordered set
        self.outbox: deque[_Say] = deque()
        self.timers: dict[DraftKey, asyncio.TimerHandle] = {}
        self.seen: dict[DraftKey, tuple[DraftState, tuple[object, ...]]] = {}
        """Per draft: the stored state and the inputs (`_inputs`) it was last settled with
        — what it shows then needs no new decision. Memory only, gone with the lane."""
        self.wake = asyncio.Event()
        self.closed = False
        # Supervised: what fails around a draft is caught in the loop, and anything else
        # starts the lane again (its pending drafts kept) rather than leaving the chat mute.
        self.task = spawn(
            self._run, f"a {worker.channel.name} chat's lane", name=f"{worker.channel.name}-chat-{chat_id}",
            failures=worker.failures, backoff=worker.options.backoff,
        )

    def touch(self, key: DraftKey) -> None:
        self.pending[key] = None
        self.wake.set()

    def later(self, key: DraftKey, delay: float) -> None:
        old = self.timers.pop(key, None)
        if old is not None:
            old.cancel()
        self.timers[key] = asyncio.get_running_loop().call_later(delay, self._due, key)

    def _due(self, key: DraftKey) -> None:
        self.timers.pop(key, None)
        self.touch(key)

    def say(self, item: _Say) -> None:
        self.outbox.append(item)
        self.wake.set()

    @property
    def idle(self) -> bool:
        return not self.pending and not self.outbox and not self.timers

    async def _run(self) -> None:
        worker = self.worker
        while not self.closed:
            if not self.pending and not self.outbox:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), worker.options.lane_idle)
                if self.idle and not self.wake.is_set():
                    # Nothing for a while: end; `ChannelWorker.lane` makes a new one on
                    # demand. No await between the check and the removal: nothing is lost.
                    self.closed = True
                    worker.lane_ended(self)
                    return
                continue
            if self.outbox:
                try:
                    await worker.deliver(self, self.outbox.popleft())
                except asyncio.CancelledError:
                    raise
                except Exception as exc:  # Redis down: drop the reply rather than stall the chat
                    worker.failures.exception(
                        f"message failed: {type(exc).__name__}", "a message to chat %s failed", self.chat_id
                    )
                continue
            key = next(iter(self.pending))
            del self.pending[key]
            try:
                delay = await worker.process(key)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down, a renderer bug: log, and look again later
                worker.failures.exception(
                    f"draft failed: {type(exc).__name__}", "draft %s in chat %s failed", key.owner.display_key,
                    key.chat_id,
                )
                delay = worker.backoff(self.chat_id)
            if delay is not None and delay <= 0:
                self.pending.setdefault(key, None)  # after the chat's other drafts
                continue
            worker.looked_at(key)  # done with it for now: the next follow may be looked at
            if delay is not None:
                self.later(key, delay)

    async def close(self) -> None:
        # The flag as well as the cancel: a library call may swallow a CancelledError
        # (Python 3.11's wait_for race), and the loop must still end.
        self.closed = True
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
        self.wake.set()
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


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
        self._lanes: dict[Id, Lane] = {}
        self._requests: dict[DraftKey, _Request] = {}
        self._follow_views: dict[DraftKey, View] = {}
        """The view each new follow was decided on, until the caller's `touch` takes it."""
        self._since: dict[DraftKey, float] = {}
        """Since when (monotonic) a draft has waited for a change: fairness only."""
        self._failures: dict[Id, int] = {}
        self._logged = Bounded(self.options.remember)
        self.failures = FailureLog(self.log, self.options.failure_log_interval)
        self._handed: dict[DraftKey, Callable[[], None]] = {}
        """Drafts the catch-up handed to their lanes: called once the lane looked at it."""
        self._catch_up: asyncio.Task[None] | None = None
        self._calls = asyncio.Semaphore(self.options.calls_in_flight)
        """Held from the read at a slot until the call returns (`WorkerOptions.calls_in_flight`)."""
        self._events: asyncio.Task[None] | None = None
        self._pruner: asyncio.Task[None] | None = None
        self._closing = False
        self.pauses = Pauses(redis, self.state.channel, clock)
        """Destinations that refused the bot for good (`channels.pause`)."""
        self._ending: set[DraftKey] = set()
        """Follows ended from outside (`ChannelState.end_follows`) handed to their lanes."""
        self._ended_checked = 0.0

    # --- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        group = EventGroup(self.redis, self.options.group, self.options.consumer or socket.gethostname())
        await group.ensure()  # before reconciling, so no change falls between the two
        self._closing = False  # a worker stopped by `close` may be started again
        await self.channel.load()
        self.channel.access.announce(self.log)
        await self.pauses.load(self.state.parse_id)
        if len(self.pauses):
            self.log.info("%d destinations are paused (they refused the bot)", len(self.pauses))
        self._events = spawn(
            partial(self._consume, group), f"reading the {self.channel.name} change stream",
            name=f"{self.channel.name}-events", failures=self.failures, backoff=self.options.backoff,
        )
        self._pruner = spawn(
            self._pruning, f"pruning the {self.channel.name} destinations", name=f"{self.channel.name}-prune",
            failures=self.failures, backoff=self.options.backoff,
        )
        self.catch_up(config=True)

    def catch_up(self, *, config: bool = False) -> None:
        """Look at every followed draft once more, in the background (a restart catches up
        with what changed while it was down); `config`: subscribe the config's follows first."""
        if self._catch_up is not None:
            self._catch_up.cancel()
        self._catch_up = spawn(
            partial(self._catching_up, config), f"the {self.channel.name} catch-up",
            name=f"{self.channel.name}-catch-up", failures=self.failures, backoff=self.options.backoff,
        )

    async def _catching_up(self, config: bool) -> None:
        # At most `catch_up` drafts handed to their lanes and not yet looked at: with
        # 10,000 follows, Redis sees a steady queue, and the bot polls from the start.
        slots = asyncio.Semaphore(self.options.catch_up)

        handed: set[DraftKey] = set()

        async def hand(key: DraftKey, *, followed: bool = False) -> None:
            if key in handed:  # a config follow is among the stored ones: once is enough
                return
            handed.add(key)
            await slots.acquire()
            if not self.touch(key, followed=followed, looked_at=slots.release):
                slots.release()

        failures = 0
        while True:
            still_wanted()
            try:
                if config:
                    for key in await self.channel.config_follows():
                        if await self.follow(key):
                            await hand(key, followed=True)
                    config = False
                for key in await self.state.all_follows():
                    await hand(key)
                await self._ended()
                return
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # Redis down at start-up: try again
                self.failures.exception(f"catch-up failed: {type(exc).__name__}", "reading the follows failed")
                await asyncio.sleep(self.options.backoff.delay(failures))
                failures += 1

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
        lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            await lane.close()
        await self.pacer.close()

    async def idle(self) -> None:
        """Wait until no destination has anything queued (tests; a graceful stop)."""
        while any(not lane.idle for lane in self._lanes.values()):
            await asyncio.sleep(0.05)

    async def _consume(self, group: EventGroup) -> None:
        failures = 0
        while not self._closing:
            try:
                events = await group.read(count=200, block_ms=1000)
                for key in await self.state.followers_of(list(coalesce(events))):
                    self.touch(key)
                await group.ack(events)
                if time.monotonic() - self._ended_checked >= 1.0:
                    await self._ended()
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                delay = self.options.backoff.delay(failures)
                failures += 1
                if "NOGROUP" in str(exc) or "no longer exists" in str(exc):
                    # The stream or the group is gone (a flushed or restarted Redis without
                    # persistence): create them again and look at every draft once more,
                    # since the events in between are lost.
                    self.log.warning("the change stream or its consumer group is gone: recreating it")
                    with contextlib.suppress(Exception):
                        await group.ensure()
                        self.catch_up()
                    await asyncio.sleep(delay)
                    continue
                self.failures.exception(f"change stream: {type(exc).__name__}", "reading the change stream failed")
                await asyncio.sleep(delay)

    async def _pruning(self) -> None:
        """Destinations whose follows expired leave the set read at start-up (retention.py)."""
        while True:
            ms = await retention_ms(self.redis)
            still_wanted()  # before a long wait: a Redis call may have lost the cancel (stopping.py)
            await asyncio.sleep(sweep_every(ms) if ms > 0 else SWEEP_EVERY_MAX)
            if ms > 0:
                await self.state.prune_destinations()

    async def _ended(self) -> None:
        """Hand the follows ended from outside (a revoked grant) to their lanes, which
        delete their drafts. Looked at about once a second."""
        self._ended_checked = time.monotonic()
        for key in await self.state.ended():
            if key not in self._ending:
                self._ending.add(key)
                self.lane(key.chat_id).touch(key)

    async def _ended_done(self, key: DraftKey) -> None:
        """A draft is settled: an ended follow's draft is deleted now (or it is followed again)."""
        if key in self._ending:
            self._ending.discard(key)
            await self.state.ended_done(key)

    # --- what commands and events ask for ------------------------------------------------

    def lane(self, chat_id: Id) -> Lane:
        lane = self._lanes.get(chat_id)
        if lane is None or lane.closed:
            lane = self._lanes[chat_id] = Lane(self, chat_id)
        return lane

    def lane_ended(self, lane: Lane) -> None:
        """An idle lane ended: forget it and what only it needed."""
        if self._lanes.get(lane.chat_id) is lane:
            del self._lanes[lane.chat_id]
            if self.pacer.ready_in(lane.chat_id) <= 0:
                self.pacer.forget(lane.chat_id)
            self._failures.pop(lane.chat_id, None)

    def allowed(self, chat_id: Id) -> bool:
        """`allowlist` access, for drafts too: a destination taken out of the config after
        it followed gets nothing more (said once in the log)."""
        if self.channel.access.drafts_allowed(chat_id):
            return True
        self.log_once(
            "not-allowed", chat_id,
            "chat %s follows sessions but is not in allowedChats / allowedChannels (access allowlist): skipped",
            chat_id,
        )
        return False

    async def spoke(self, chat_id: Id) -> None:
        """The destination sent something (an update, a command): if it was paused (it had
        refused the bot), calls go to it again and its drafts catch up."""
        if self.pauses.paused(chat_id) and await self.pauses.resume(chat_id):
            self.log.info("chat %s spoke again: no longer paused", chat_id)
            for key in await self.state.follows(chat_id):
                self.touch(key)

    def touch(
        self, key: DraftKey, *, followed: bool = False, fresh: bool = False, looked_at: Callable[[], None] | None = None
    ) -> bool:
        """Look at this draft again soon. `followed`: the destination just subscribed (a
        run that already ended is not announced); `fresh`: show it again at the bottom;
        `looked_at`: called once its lane has looked at it. False when it is not allowed."""
        if not self.allowed(key.chat_id):
            return False
        if followed or fresh:
            old = self._requests.get(key, _Request())
            at_follow = self._follow_views.pop(key, None) if followed else None
            self._requests[key] = _Request(old.followed or followed, at_follow or old.at_follow, old.fresh or fresh)
        if looked_at is not None:
            earlier = self._handed.pop(key, None)
            if earlier is not None:
                earlier()
            self._handed[key] = looked_at
        self.lane(key.chat_id).touch(key)
        return True

    async def follow(self, key: DraftKey, *, view: View | None = None) -> bool:
        """Subscribe the destination; False when it already followed. A run that had
        already ended is not announced to it — even when its lane looks at the draft
        before the caller's `touch(key, followed=True)` (an event read late, after the
        subscription is stored), and after a restart before its lane looks at all.
        `view`: the owner's view when the destination asked to follow, if that was
        before now (a follow made once a message is posted); default: read now."""
        if await self.state.is_following(key):
            return False
        # Noted before the subscription is stored: from then on any look at the draft
        # applies it (applying it twice changes nothing).
        old = self._requests.get(key, _Request())
        self._requests[key] = _Request(followed=True, fresh=old.fresh)
        if not await self.state.follow(key):
            return False  # followed in between, by someone else: not a new follow after all
        await self._remember_follow(key, view)
        return True

    async def _remember_follow(self, key: DraftKey, view: View | None) -> None:
        """What a new follow means for its draft, stored at once (for a restart before its
        lane looks), and handed to the lane with the view it was decided on: what the
        follow means is decided by the owner's state now, not by what it is once the lane
        gets to look (a run may begin and end while the lane waits out a 429)."""
        if view is None:
            view = await self.store.view(key.owner)
        self._follow_views[key] = view  # for the caller's `touch(key, followed=True)`
        request = self._requests.get(key)
        if request is not None and request.followed and request.at_follow is None:
            self._requests[key] = replace(request, at_follow=view)
        state = on_follow(DraftState(), view)
        if state != DraftState():
            await self.state.start_draft(key, state)  # a draft with a state already: the lane applies it

    def looked_at(self, key: DraftKey) -> None:
        """The lane looked at this draft (whatever came of it)."""
        done = self._handed.pop(key, None)
        if done is not None:
            done()

    async def heard(self, chat_id: Id, thread_id: Id, message_id: MessageId) -> None:
        """Someone else (a person, another bot — never this bot) posted `message_id` in
        the destination's thread: a draft above it moves to the bottom with its next
        update (nothing moves until then). Destinations that may not have drafts are
        not noted."""
        if self.channel.access.drafts_allowed(chat_id):
            await self.state.heard(chat_id, thread_id, message_id)

    def say(self, chat_id: Id, thread_id: Id, text: str, *, then: Then | None = None, urgent: bool = True) -> None:
        """Send a plain-text message (a command reply) before the destination's drafts.
        `then`: what to do with the posted message's id (None: not delivered), done in
        the lane once it is settled — a command that needs the id waits for nothing,
        and what it does next is ordered with the destination's other calls. `urgent`:
        False queues it behind urgent drafts when the bot-wide budget binds."""
        self.lane(chat_id).say(_Say(thread_id, text=text, then=then, urgent=urgent))

    def send_once(self, chat_id: Id, thread_id: Id, payload: Payload) -> None:
        """Send a rendered payload as a one-off message (not a draft)."""
        self.lane(chat_id).say(_Say(thread_id, payload=payload))

    # --- one draft -----------------------------------------------------------------------

    async def process(self, key: DraftKey) -> float | None:
        """Make the next call this draft needs, if any. Returns None when the destination
        shows what it should, else the delay before looking again (0: after its other
        drafts).

        One decision per call, made once the slot is granted: before the slot, a draft
        whose inputs are the ones it was last settled with needs nothing, and one whose
        inputs changed since queues for its slot without deciding (or rendering) what
        to show; only a draft the lane knows nothing of yet (a first look, a command's
        request, an unsure send) decides before its slot too."""
        chat = key.chat_id
        if not self.allowed(chat):
            return None
        paused = self.pauses.wait(chat)
        if paused > 0:
            return paused  # no calls to a destination that refused the bot: look again then
        lane = self._lanes.get(chat)
        seen = lane.seen if lane is not None else {}
        read = await self._read(key)
        inputs = _inputs(read)
        known = seen.get(key)
        if key not in self._requests and read.state.intent is None and known is not None and known[0] == read.state:
            if known[1] == inputs:
                self._since.pop(key, None)
                # It shows what these inputs want — an ended follow's draft was deleted
                # already, when the lane looked before the ending was handed to it.
                await self._ended_done(key)
                return None
            if not self._calls.locked() and self.pacer.take(chat):  # a slot free now, nothing awaited since the read
                async with self._calls:
                    return await self._at_slot(key, read, seen)
            since = self._since.setdefault(key, time.monotonic())
            await self.pacer.acquire(chat, urgent=_urgent_change(read, known[1], inputs), since=since)
        else:
            if not self._calls.locked() and self.pacer.take(chat):  # a slot free now, nothing awaited since the read
                async with self._calls:
                    return await self._at_slot(key, read, seen)
            state, new, call = await self._decide(key, read)
            if not isinstance(call, Send | Edit | Delete | Probe):
                return await self._settle(key, read, state, new, call, seen)
            # Bookkeeping that needs no call is stored now; the call waits for its slot
            # and is then decided again, with the newest content.
            if new != state:
                await self.state.save_draft(key, new)
            since = self._since.setdefault(key, time.monotonic())
            await self.pacer.acquire(chat, urgent=self._urgent(new, call), since=since)
        async with self._calls:  # a connection for the call, then the newest view
            return await self._at_slot(key, await self._read(key), seen)

    async def _at_slot(
        self, key: DraftKey, read: _Read, seen: dict[DraftKey, tuple[DraftState, tuple[object, ...]]]
    ) -> float | None:
        """The slot is granted and `read` is the newest view: decide, render, call."""
        state, new, call = await self._decide(key, read)
        if not isinstance(call, Send | Edit | Delete | Probe):
            self.pacer.give_back(key.chat_id)
            return await self._settle(key, read, state, new, call, seen)
        if not self.pauses.take_probe(key.chat_id):  # paused while this draft waited for its slot
            self.pacer.give_back(key.chat_id)
            return self.pauses.wait(key.chat_id)
        if new != state:
            await self.state.save_draft(key, new)
        self._since.pop(key, None)
        return await self._call(key, read, new, call, seen)

    async def _settle(
        self, key: DraftKey, read: _Read, state: DraftState, new: DraftState, call: Call | None,
        seen: dict[DraftKey, tuple[DraftState, tuple[object, ...]]],
    ) -> float | None:
        """No call now: store the bookkeeping, and remember what the draft was settled
        with (None) or when to look again (a wait)."""
        if call is None:
            self._since.pop(key, None)
            if not read.following:
                await self.state.forget_draft(key)
                new = DraftState()
            elif new != state:
                await self.state.save_draft(key, new)
            await self._ended_done(key)
            seen[key] = (new, _inputs(read))
            return None
        if new != state:
            await self.state.save_draft(key, new)
        assert isinstance(call, Wait)
        return call.seconds

    @staticmethod
    def _urgent(state: DraftState, call: Call) -> bool:
        """Everything but an edit that changes no step (the same card revision: tool
        lines, a headline) goes first when the bot-wide budget binds."""
        return not (isinstance(call, Edit) and call.revision is not None and call.revision == state.revision)

    async def _read(self, key: DraftKey) -> _Read:
        """Everything a decision about one draft reads. One after the other, not
        gathered: a lane holds one Redis connection at a time (10,000 lanes share a
        bounded pool)."""
        state, following, prefs, below = await self.state.draft_following(key)
        view = await self.store.view(key.owner)
        renderers = await self.channel.renderers(key, prefs)
        return _Read(key, state, following, view, _Rendered(renderers), below)

    async def _decide(self, key: DraftKey, read: _Read) -> tuple[DraftState, DraftState, Call | None]:
        """Decide from what was read: (stored state, state after bookkeeping, next call)."""
        chat = key.chat_id
        state = loaded = read.state
        view = read.view
        request = self._requests.pop(key, None)
        if request is not None:
            if request.followed:
                state = on_follow(state, request.at_follow or view)
            if request.fresh:
                state = replace(state, fresh=True)
        known = await self.state.sent_after(chat, state.intent.mark) if state.intent else frozenset()
        new, call = decide(state, view, self._situation(read, known), read.renderers)
        self.log.debug("draft %s in chat %s: %s → %s, %s", key.owner.display_key, chat, state, new, call)
        return loaded, new, call

    def _conduct(self, chat_id: Id) -> Conduct:
        """The destination's pings, start delay and staying at the bottom, on the time scale."""
        platform = self.channel.platform
        return conduct_of(platform.streaming, notify_of(platform, chat_id), self.channel.budgets.scale)

    def _situation(self, read: _Read, known: frozenset[int] = frozenset()) -> Situation:
        return Situation(
            following=read.following,
            mode=read.renderers.mode,
            keep_on_complete=self.channel.keep_on_complete,
            block_chars=self.channel.block_chars,
            now=self.clock(),
            settle=self.options.settle,
            max_probes=self.options.max_probes,
            known=known,
            conduct=self._conduct(read.key.chat_id),
            below=read.below,
            ordered_ids=self.channel.state.ordered_ids,
        )

    async def _call(
        self, key: DraftKey, read: _Read, state: DraftState, call: Call,
        seen: dict[DraftKey, tuple[DraftState, tuple[object, ...]]],
    ) -> float | None:
        chat = key.chat_id
        client = self.channel.client
        if isinstance(call, Send):
            await self.pacer.leaving(chat)
            mark = await self.state.last_message(chat)
            state = begin(state, call, mark, self.clock())
            await self.state.save_draft(key, state)  # write-ahead: a crash now is an unsure send
            # Drafts are sent silently; answers and pings notify (a ping replies to the draft).
            outcome = await client.send(
                chat, key.thread_id, call.shown, reply_to=call.reply_to, silent=call.purpose == "draft"
            )
        elif isinstance(call, Edit):
            await self.pacer.leaving(chat)
            outcome = await client.edit(chat, call.message_id, call.shown)
        elif isinstance(call, Delete):
            await self.pacer.leaving(chat)
            outcome = await client.delete(chat, call.message_id)
        elif isinstance(call, Probe):
            await self.pacer.leaving(chat)
            outcome = await client.probe(chat, call.message_id, call.intent)
        else:
            raise TypeError(f"unknown call {call!r}")
        new = apply(state, call, outcome, self.clock())
        if new != state:
            await self.state.save_draft(key, new)
        delay = await self._after(key, call, outcome)
        if delay == 0 and outcome.delivered and new.intent is None:
            # What comes next with the same view, decided without reading or rendering
            # again: usually nothing (a newer write touches the draft anew). A sequence
            # (delete then send, the parts of an answer) reads afresh for its next call.
            after, more = decide(new, read.view, self._situation(read), read.renderers)
            if more is None:
                if after != new:
                    await self.state.save_draft(key, after)
                await self._ended_done(key)
                seen[key] = (after, _inputs(read))
                return None
        return delay

    async def _after(self, key: DraftKey, call: Call, outcome: Outcome) -> float:
        """What a reply means besides the draft's state: message ids to remember, waits,
        switching a feature off, log lines. Returns the delay before looking again."""
        chat, name, k = key.chat_id, key.owner.display_key, outcome.kind
        if outcome.message_id is not None and (
            (isinstance(call, Send) and outcome.delivered) or k in (OutcomeKind.found, OutcomeKind.foreign)
        ):
            await self._saw(chat, outcome.message_id)
        if outcome.delivered or k in (OutcomeKind.found, OutcomeKind.absent, OutcomeKind.foreign, OutcomeKind.gone):
            self._ok(chat)
        if k is OutcomeKind.forbidden:
            delay = await self.pauses.pause(chat)
            self.log.warning(
                "chat %s refuses the bot (%s): paused — no calls until it speaks again, or a probe in %.0f s",
                chat, outcome.detail, delay,
            )
            return delay
        if k not in (OutcomeKind.rate_limited, OutcomeKind.transient, OutcomeKind.unsure) and self.pauses.paused(chat):
            await self.pauses.resume(chat)  # the probe was answered: the destination takes calls again
            self.log.info("chat %s answers again: no longer paused", chat)
            for other in await self.state.follows(chat):
                if other != key:
                    self.touch(other)
        if k is OutcomeKind.rate_limited:
            held = self.pacer.hold(chat, outcome.retry_after)
            self.failures.warning("flood control", "chat %s: flood control, waiting %.1f s", chat, held)
            return 0  # `process` waits for the destination to be ready, with the newest content
        if k is OutcomeKind.unsure and isinstance(call, Send):
            # It may have landed: the intent stays, `decide` probes for it after `settle`.
            self.failures.warning(
                "unsure send", "chat %s: send of %s may or may not have landed (%s)", chat, name, outcome.detail
            )
            self._failures[chat] = self._failures.get(chat, 0) + 1
            return 0
        if k in (OutcomeKind.transient, OutcomeKind.unsure):
            self.failures.warning(f"{k} call", "chat %s: %s (%s); retrying", chat, k, outcome.detail)
            return self.backoff(chat)
        if k is OutcomeKind.unsupported:
            await self.channel.unsupported(outcome.detail)
        elif k is OutcomeKind.refused_content:
            self.log_once(
                "content", chat, "chat %s: the server refused a message's content (%s); showing its fallback",
                chat, outcome.detail,
            )
        elif k is OutcomeKind.refused:
            if isinstance(call, Delete):
                self.log.warning("chat %s: could not delete message %s (%s); forgetting it", chat, call.message_id,
                                 outcome.detail)
            else:
                self.log.error("chat %s: the server refused a message of %s: %s", chat, name, outcome.detail)
        elif k in (OutcomeKind.gone, OutcomeKind.locked) and isinstance(call, Edit):
            self.log.info("chat %s: draft %s is gone (%s); sending a new one", chat, call.message_id, outcome.detail)
        elif k is OutcomeKind.found and isinstance(call, Probe):
            self.log.info("chat %s: the unsure send of %s landed as message %s", chat, name, call.message_id)
        elif k is OutcomeKind.foreign and outcome.message_id is not None:
            # Only "not modified" proves a message already showed what we sent: a probe
            # that went through changed some other message of this bot. It cannot be
            # restored; it is remembered as ours so no probe touches it again.
            self.log.warning(
                "chat %s: probing for the unsure send of %s overwrote message %s, which was not it",
                chat, name, outcome.message_id,
            )
        return 0

    def backoff(self, chat_id: Id) -> float:
        failures = self._failures.get(chat_id, 0)
        self._failures[chat_id] = failures + 1
        return self.options.backoff.delay(failures)

    def _ok(self, chat_id: Id) -> None:
        self._failures.pop(chat_id, None)

    async def _saw(self, chat_id: Id, message_id: object) -> None:
        """Remember a message we sent (or found to be ours)."""
        if isinstance(message_id, int) and self.channel.access.drafts_allowed(chat_id):
            await self.state.sent_message(chat_id, message_id)

    def log_once(self, what: str, chat_id: Id, message: str, *args: object) -> None:
        if (what, chat_id) not in self._logged:
            self._logged.add((what, chat_id))
            self.log.warning(message, *args)

    # --- one-off messages ----------------------------------------------------------------

    async def deliver(self, lane: Lane, item: _Say) -> None:
        """Send a one-off message taken from the lane's outbox. A reply is not worth a
        duplicate: it is retried (put back first) only when it surely never arrived."""
        chat = lane.chat_id
        if self.pauses.wait(chat) > 0:
            self.log.info("chat %s is paused (it refused the bot): a message to it is dropped", chat)
            if item.then is not None:
                await item.then(None)
            return
        await self.pacer.acquire(chat, urgent=item.urgent)
        client = self.channel.client
        mark = await self.state.last_message(chat)
        async with self._calls:
            await self.pacer.leaving(chat)
            if item.payload is not None:
                outcome = await client.send(chat, item.thread_id, item.payload)
            else:
                outcome = await client.say(chat, item.thread_id, item.text or "")
        if outcome.kind is OutcomeKind.unsure:
            sent = item.payload if item.payload is not None else client.said(item.thread_id, item.text or "")
            found = await self._find(chat, sent, mark)
            if item.then is not None:
                await item.then(found)
            return
        if outcome.kind is OutcomeKind.rate_limited:
            self.pacer.hold(chat, outcome.retry_after)
            lane.outbox.appendleft(item)
            return
        if outcome.kind is OutcomeKind.transient:
            self.pacer.hold(chat, self.backoff(chat) / self.pacer.budgets.scale)
            lane.outbox.appendleft(item)
            return
        if outcome.kind is OutcomeKind.ok and outcome.message_id is not None:
            self._ok(chat)
            if item.urgent:  # nothing is remembered of a destination without a grant
                await self._saw(chat, outcome.message_id)
            if item.then is not None:
                await item.then(outcome.message_id)
            return
        if outcome.kind is OutcomeKind.unsupported:
            await self.channel.unsupported(outcome.detail)
            self.log.warning("chat %s: a rich message was not delivered: %s", chat, outcome.detail)
        elif outcome.kind is OutcomeKind.forbidden and await self.state.follows(chat):
            # Paused only when it follows something: a stranger's refusal stores nothing.
            delay = await self.pauses.pause(chat)
            self.log.warning("chat %s refuses the bot (%s): paused for %.0f s", chat, outcome.detail, delay)
        else:
            self.failures.warning(
                f"not delivered: {outcome.kind}", "chat %s: a message was not delivered (%s): %s", chat, outcome.kind,
                outcome.detail,
            )
        if item.then is not None:
            await item.then(None)

    async def _find(self, chat: Id, sent: Payload, mark: int) -> MessageId | None:
        """A one-off message whose send may or may not have landed: not sent again (a
        duplicate reply is worse than none), but looked for, so that it is known. An
        unknown message of ours is what a draft's probe — an identical edit of the ids
        after its mark — would overwrite. The lane waits meanwhile: nothing else goes to
        this chat while the message is unaccounted for. Returns its id when it was found."""
        self.failures.warning("unsure message", "chat %s: a message may or may not have landed; looking for it", chat)
        intent = Intent(
            "answer", 0, sent.method, dict(sent.params), sent.digest, sent.kind, mark, self.clock(), mark + 1
        )
        await asyncio.sleep(self.options.settle)  # a request still in flight may land meanwhile
        candidate, probes, failures = mark + 1, 0, 0
        while probes < self.options.max_probes and failures < self.options.max_probes:
            known = await self.state.sent_after(chat, mark)
            while candidate in known:
                candidate += 1
            await self.pacer.acquire(chat)
            async with self._calls:
                await self.pacer.leaving(chat)
                outcome = await self.channel.client.probe(chat, candidate, replace(intent, probe=candidate))
            k = outcome.kind
            if k is OutcomeKind.found:
                found = outcome.message_id if outcome.message_id is not None else candidate
                await self._saw(chat, found)
                return found
            if k is OutcomeKind.absent:
                return None
            if k is OutcomeKind.foreign:
                if outcome.message_id is not None:
                    await self._saw(chat, outcome.message_id)  # one of ours after all: never probed again
                candidate, probes = candidate + 1, probes + 1
            elif k is OutcomeKind.rate_limited:
                self.pacer.hold(chat, outcome.retry_after)
            else:  # transient, unsure: the same probe again, after a pause
                failures += 1
                await asyncio.sleep(self.backoff(chat))
        return None


__all__ = ["Bounded", "ChannelWorker", "Lane", "Then", "WorkerOptions"]
