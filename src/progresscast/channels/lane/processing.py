"""One draft at a time, in its destination's lane: read, decide, wait for a slot, call,
store — the next call the draft needs, if any.

A draft whose inputs changed waits for a slot (`Pacer.acquire`: the destination's pace,
then the bot-wide budget, served fairly) and for its call's turn to leave
(`Pacer.leaving`), reading the newest view again, deciding and rendering at the slot
(and again when it waited to leave and was touched meanwhile), and makes the call (a
slot free at once is taken right after the first read). Rendering only then is what
keeps only the newest content going out, however many writes came in or however long
the bot-wide queue was. A draft the lane has not settled yet (a first look, a command's
request, an unsure send) is also decided before its slot, to know whether it needs one
and how urgent it is — but for a new follow of an owner whose card the follow saw: it
needs its first draft.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from functools import partial

from ...model.timing import next_minute
from ...model.view import View
from ...store.cards import CardStore
from ..chat.destinations import notify_of
from ..draft.calls import Call, Delete, Edit, Probe, Send, Wait
from ..draft.conduct import Conduct, conduct_of
from ..draft.decide import Situation, decide, on_follow
from ..draft.replies import apply, begin
from ..draft.state import DraftState
from ..pacing import Departure
from ..state.ids import DraftKey, Id
from .context import WorkerContext
from .draft_read import DraftRead, RenderedOnce, Settled, SettledWith, inputs_of, urgent_change, urgent_event
from .reply_effects import ReplyEffects


@dataclass(frozen=True)
class DraftRequest:
    """What a command asked of a draft, applied by its lane before anything else."""

    followed: bool = False
    """The destination just subscribed: a run that already ended is not announced."""
    at_follow: View | None = None
    """The owner's view when the destination subscribed (`follow`): a run that
    ended *then* is not announced — one that began and ended while the lane was still
    busy (a flood wait, a timeout) is, since the destination followed before it."""
    fresh: bool = False
    """Show the draft again at the bottom (/card)."""


def _has_card(view: View | None) -> bool:
    return view is not None and view.card is not None


class DraftProcessor:
    def __init__(
        self,
        ctx: WorkerContext,
        store: CardStore,
        effects: ReplyEffects,
        *,
        settled_of: Callable[[Id], Settled],
        replies_waiting: Callable[[Id], bool],
        touched: Callable[[DraftKey], bool],
        read_hook: Callable[[DraftRead], Awaitable[None]] | None = None,
        ticker: Callable[[DraftKey, float], None] | None = None,
        watch: Callable[[DraftKey, View], None] | None = None,
    ) -> None:
        self.ctx = ctx
        self.log = ctx.log
        self.store = store
        self.effects = effects
        self._settled_of = settled_of
        """What the destination's lane remembers its drafts were settled with (`Lane.seen`)."""
        self._replies_waiting = replies_waiting
        """Whether the destination's lane holds one-off messages to send (`Lane.outbox`)."""
        self._touched = touched
        """Whether a draft was touched again (a change event, a command) since its lane
        began to look at it (`Lane.pending`)."""
        self._read_hook = read_hook
        """Told every view read (the destination's ask messages follow it: `channels.asks`)."""
        self._ticker = ticker
        """Looks at a settled draft again at its run's next minute (`Lane.tick`)."""
        self._watch = watch
        """Told every view a followed draft's read found (`ChannelWorker.watchers`)."""
        self.requests: dict[DraftKey, DraftRequest] = {}
        self._since: dict[DraftKey, float] = {}
        """Since when (monotonic) a draft has waited for a change: fairness only."""
        self._conducts: dict[Id, Conduct] = {}
        self._conduct_values: dict[Conduct, Conduct] = {}
        """One object per distinct conduct, shared by the destinations that have it."""
        self._asked: set[DraftKey] = set()
        """Drafts whose last read had asks (told once more when they have none)."""
        self.ending: set[DraftKey] = set()
        """Follows ended from outside (`Follows.end`) handed to their lanes."""

    async def ended_done(self, key: DraftKey) -> None:
        """A draft is settled: an ended follow's draft is deleted now (or it is followed again)."""
        if key in self.ending:
            self.ending.discard(key)
            await self.ctx.state.follows.ended_done(key)

    async def process(self, key: DraftKey, activity_only: bool | None = None) -> float | None:
        """Make the next call this draft needs, if any. Returns None when the destination
        shows what it should, else the delay before looking again (0: after its other
        drafts).

        One decision per call, made once the slot is granted: before the slot, a draft
        whose inputs are the ones it was last settled with needs nothing, and one whose
        inputs changed since queues for its slot without deciding (or rendering) what
        to show; only a draft the lane knows nothing of yet (a first look, a command's
        request, an unsure send) decides before its slot too. A settled draft the change
        events touched (`activity_only` is not None) is not even read before its slot:
        what the events said changed is enough to queue it, and it is read once, at the
        slot. Nor is a new follow of an owner whose card the follow saw: it needs its
        first draft, and queues for it as urgent."""
        destination = key.chat_id
        paused = self.ctx.pauses.wait(destination)
        if paused > 0:
            return paused  # no calls to a destination that refused the bot: look again then
        seen = self._settled_of(destination)
        known = seen.get(key)
        if activity_only is not None and known is not None and known.state.intent is None and key not in self.requests:
            return await self._unread_to_slot(key, seen, urgent=urgent_event(known, activity_only))
        request = self.requests.get(key)
        if known is None and request is not None and request.followed and _has_card(request.at_follow):
            # 10,000 follows at start-up: each read once, at its slot, not twice.
            return await self._unread_to_slot(key, seen, urgent=True)
        read = await self._read(key)
        inputs = inputs_of(read)
        if key not in self.requests and read.state.intent is None and known is not None and known.state == read.state:
            if known.inputs == inputs:
                self._since.pop(key, None)
                # It shows what these inputs want — an ended follow's draft was deleted
                # already, when the lane looked before the ending was handed to it.
                await self.ended_done(key)
                return None
            if not self.ctx.calls.locked() and self.ctx.pacer.take(destination):  # free now: nothing awaited since
                async with self.ctx.calls:
                    return await self._at_slot(key, read, seen)
            since = self._since.setdefault(key, time.monotonic())
            await self.ctx.pacer.acquire(destination, urgent=urgent_change(read, known.inputs, inputs), since=since)
        else:
            if not self.ctx.calls.locked() and self.ctx.pacer.take(destination):  # free now: nothing awaited since
                async with self.ctx.calls:
                    return await self._at_slot(key, read, seen)
            state, new, call = await self._decide(key, read)
            if not isinstance(call, Send | Edit | Delete | Probe):
                return await self._settle(key, read, state, new, call, seen)
            # Bookkeeping that needs no call is stored now; the call waits for its slot
            # and is then decided again, with the newest content.
            if new != state:
                await self.ctx.state.drafts.save(key, new)
            since = self._since.setdefault(key, time.monotonic())
            await self.ctx.pacer.acquire(destination, urgent=self._urgent(new, call), since=since)
        async with self.ctx.calls:  # a connection for the call, then the newest view
            return await self._at_slot(key, None, seen)

    async def _unread_to_slot(self, key: DraftKey, seen: Settled, *, urgent: bool) -> float | None:
        """Queue for the slot (one free now is taken at once) without reading, and read at it."""
        if self.ctx.calls.locked() or not self.ctx.pacer.take(key.chat_id):
            since = self._since.setdefault(key, time.monotonic())
            await self.ctx.pacer.acquire(key.chat_id, urgent=urgent, since=since)
        async with self.ctx.calls:
            return await self._at_slot(key, None, seen)

    async def _at_slot(self, key: DraftKey, read: DraftRead | None, seen: Settled) -> float | None:
        """The slot is granted and `read` (or a read now) is the newest view: decide,
        render, and once the call may leave (`Pacer.leaving`), call. A call that waited
        there longer than `Budgets.reread_after` (calls granted together by a catch-up
        leave spaced) is read, decided and rendered again first when its draft was
        touched meanwhile (a change event, a command): what goes out is never older than
        the newest change the lane heard of. One that was not goes as decided — read
        again, it would show the same, and at the budget's pace every call waits that
        long, so reading each twice would cost CPU the calls need."""
        destination = key.chat_id
        if self._replies_waiting(destination):
            # A command's reply came in while this draft waited (a change event touched
            # it just as the destination followed): the reply goes first, then the draft.
            self.ctx.pacer.give_back(destination)
            return 0
        if read is None:
            read = await self._read(key)
        request = self.requests.get(key)
        state, new, call = await self._decide(key, read)
        if not isinstance(call, Send | Edit | Delete | Probe):
            self.ctx.pacer.give_back(destination)
            return await self._settle(key, read, state, new, call, seen)
        if not self.ctx.pauses.take_probe(destination):  # paused while this draft waited for its slot
            self.ctx.pacer.give_back(destination)
            return self.ctx.pauses.wait(destination)
        # Counted among the bot's calls when it is sent: a read again or a write-ahead
        # may come first, and the platform counts calls as they arrive.
        departure = await self.ctx.pacer.leaving(destination, sent=False)
        try:
            if departure.waited > self.ctx.pacer.budgets.reread_seconds and self._touched(key):
                if request is not None:  # the command's request applies to the new decision
                    self.requests[key] = request
                read = await self._read(key)
                state, new, call = await self._decide(key, read)
                if not isinstance(call, Send | Edit | Delete | Probe):
                    self.ctx.pacer.stayed(destination, departure)
                    return await self._settle(key, read, state, new, call, seen)
            self._since.pop(key, None)
            return await self._call(key, read, state, new, call, seen, departure)
        finally:
            if departure.pending:  # it failed (or was cancelled) before it was sent
                self.ctx.pacer.stayed(destination, departure)

    async def _settle(
        self, key: DraftKey, read: DraftRead, state: DraftState, new: DraftState, call: Call | None, seen: Settled
    ) -> float | None:
        """No call now: store the bookkeeping, and remember what the draft was settled
        with (None) or when to look again (a wait)."""
        if call is None:
            self._since.pop(key, None)
            if not read.following:
                await self.ctx.state.drafts.forget(key)
                new = DraftState()
            elif new != state:
                await self.ctx.state.drafts.save(key, new)
            await self.ended_done(key)
            seen[key] = SettledWith(new, inputs_of(read))
            self._tick(key, read, new)
            return None
        if new != state:
            await self.ctx.state.drafts.save(key, new)
        assert isinstance(call, Wait)
        return call.seconds

    @staticmethod
    def _urgent(state: DraftState, call: Call) -> bool:
        """Everything but an edit that changes no step (the same card revision: tool
        lines, a headline) goes first when the bot-wide budget binds."""
        return not (isinstance(call, Edit) and call.revision is not None and call.revision == state.revision)

    async def _read(self, key: DraftKey) -> DraftRead:
        """Everything a decision about one draft reads, in one round trip: the draft's
        state with the view it shows (a lane holds one Redis connection at a time: 10,000
        lanes share a bounded pool)."""
        view, replies = await self.store.view_with(key.owner, partial(self.ctx.state.queue_draft_following, key))
        view = view.at(self.ctx.clock())  # a live run's times, on its last whole minute
        stored = self.ctx.state.draft_following_of(key, replies)
        renderers = await self.ctx.channel.renderers(key, stored.prefs)
        read = DraftRead(
            key=key, state=stored.state, following=stored.following, view=view, renderers=RenderedOnce(renderers),
            below=stored.below, mark=stored.mark,
        )
        if self._watch is not None and read.following:
            self._watch(key, view)
        if self._read_hook is not None and read.following and (view.asks or key in self._asked):
            if view.asks:
                self._asked.add(key)
            else:
                self._asked.discard(key)
            await self._read_hook(read)
        return read

    async def _decide(self, key: DraftKey, read: DraftRead) -> tuple[DraftState, DraftState, Call | None]:
        """Decide from what was read: (stored state, state after bookkeeping, next call)."""
        destination = key.chat_id
        state = loaded = read.state
        view = read.view
        request = self.requests.pop(key, None)
        if request is not None:
            if request.followed:
                state = on_follow(state, request.at_follow or view)
            if request.fresh:
                state = replace(state, fresh=True)
        messages = self.ctx.state.messages
        known = await messages.sent_after(destination, state.intent.mark) if state.intent else frozenset()
        new, call = decide(state, view, self._situation(read, known), read.renderers)
        self.log.debug("draft %r in chat %r: %s → %s, %s", key.owner.display_key, destination, state, new, call)
        return loaded, new, call

    def _conduct(self, destination: Id) -> Conduct:
        """The destination's pings, start delay and staying at the bottom, on the time
        scale: made of the config alone, so made once per destination."""
        conduct = self._conducts.get(destination)
        if conduct is None:
            platform = self.ctx.channel.platform
            conduct = conduct_of(platform.streaming, notify_of(platform, destination), self.ctx.channel.budgets.scale)
            conduct = self._conducts[destination] = self._conduct_values.setdefault(conduct, conduct)
        return conduct

    def _situation(self, read: DraftRead, known: frozenset[int] = frozenset()) -> Situation:
        return Situation(
            following=read.following,
            mode=read.renderers.mode,
            keep_on_complete=self.ctx.channel.keep_on_complete,
            block_chars=self.ctx.channel.block_chars,
            now=self.ctx.clock(),
            settle=self.ctx.options.settle,
            max_probes=self.ctx.options.max_probes,
            known=known,
            conduct=self._conduct(read.key.chat_id),
            below=read.below,
            ordered_ids=self.ctx.channel.state.ordered_ids,
        )

    async def _call(
        self,
        key: DraftKey,
        read: DraftRead,
        stored: DraftState,
        state: DraftState,
        call: Call,
        seen: Settled,
        departure: Departure,
    ) -> float | None:
        """Make `call`, which has left (`departure`), from `state` (the decision's
        bookkeeping included), and store what its answer makes of it. Nothing is stored
        between leaving and calling but a send's write-ahead, so a call waits for no
        more round trips than it must: its bookkeeping is stored with its answer (a
        crash before loses only that: the draft is decided again from `stored`)."""
        destination = key.chat_id
        client = self.ctx.channel.client
        if isinstance(call, Send):
            # The mark was read with the view, moments before: a message posted since
            # only gives a probe more ids to look at.
            state = stored = begin(state, call, read.mark, self.ctx.clock())
            await self.ctx.state.drafts.save(key, state)  # write-ahead: a crash now is an unsure send
        self.ctx.pacer.sent(departure)  # counted from now: nothing else comes before the call
        if isinstance(call, Send):
            # Drafts are sent silently; answers and pings notify (a ping replies to the draft).
            outcome = await client.send(
                destination, key.thread_id, call.shown, reply_to=call.reply_to, silent=call.purpose == "draft"
            )
        elif isinstance(call, Edit):
            outcome = await client.edit(destination, call.message_id, call.shown)
        elif isinstance(call, Delete):
            outcome = await client.delete(destination, call.message_id)
        elif isinstance(call, Probe):
            outcome = await client.probe(destination, call.message_id, call.intent)
        else:
            raise TypeError(f"unknown call {call!r}")
        new = apply(state, call, outcome, self.ctx.clock())
        if new != stored:
            if isinstance(call, Edit) and outcome.delivered and state == stored:
                # Only what the message shows changed (the decision's bookkeeping did not):
                # written behind (`Drafts.defer`).
                await self.ctx.state.drafts.defer(key, stored, new)
            else:
                await self.ctx.state.drafts.save(key, new)
        delay = await self.effects.after(key, call, outcome)
        if delay == 0 and outcome.delivered and new.intent is None:
            # What comes next with the same view, decided without reading or rendering
            # again: usually nothing (a newer write touches the draft anew). A sequence
            # (delete then send, the parts of an answer) reads afresh for its next call.
            after, more = decide(new, read.view, self._situation(read), read.renderers)
            if more is None:
                if after != new:
                    await self.ctx.state.drafts.save(key, after)
                await self.ended_done(key)
                seen[key] = SettledWith(after, inputs_of(read))
                self._tick(key, read, after)
                return None
        return delay

    def _tick(self, key: DraftKey, read: DraftRead, state: DraftState) -> None:
        """A settled draft that shows a live run's times is looked at again when they
        change: at the run's next whole minute (docs/renderers.md)."""
        view = read.view
        if self._ticker is None or not read.following or state.message_id is None:
            return
        if view.now is None or view.started_at is None:
            return
        self._ticker(key, next_minute(view.started_at, self.ctx.clock()))


__all__ = ["DraftProcessor", "DraftRequest"]
