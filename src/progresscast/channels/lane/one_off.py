"""One-off messages (a command's reply, a snapshot) taken from a destination's lane:
paced like drafts, never sent twice — one that may or may not have landed is looked for."""

from __future__ import annotations

import asyncio
import logging
from dataclasses import replace
from functools import partial

from ...backoff import Retrying
from ...render.payload import Payload
from ..draft.outcome import MessageId, Outcome, OutcomeKind
from ..draft.state import Intent
from ..state.ids import Id
from .context import WorkerContext
from .lane import Lane, OneOff
from .reply_effects import ReplyEffects

_ANSWERS = (OutcomeKind.found, OutcomeKind.absent, OutcomeKind.foreign, OutcomeKind.rate_limited)
"""What a probe may answer that says something; any other answer is probed for again."""


class _NoAnswer(Exception):
    """A probe whose answer says nothing (transient, unsure): made again after a pause."""


class OneOffSender:
    def __init__(self, ctx: WorkerContext, effects: ReplyEffects) -> None:
        self.ctx = ctx
        self.log = ctx.log
        self.effects = effects

    async def deliver(self, lane: Lane, item: OneOff) -> None:
        """Send a one-off message taken from the lane's outbox. A reply is not worth a
        duplicate: it is retried (put back first) only when it surely never arrived."""
        destination = lane.destination
        if self.ctx.pauses.wait(destination) > 0:
            self.log.info("chat %r is paused (it refused the bot): a message to it is dropped", destination)
            if item.then is not None:
                await item.then(None)
            return
        await self.ctx.pacer.acquire(destination, urgent=item.urgent)
        client = self.ctx.channel.client
        mark = await self.ctx.state.messages.last(destination)
        async with self.ctx.calls:
            await self.ctx.pacer.leaving(destination)
            if item.edit is not None and item.payload is not None:
                outcome = await client.edit(destination, item.edit, item.payload)
            elif item.payload is not None:
                outcome = await client.send(destination, item.thread_id, item.payload, reply_to=item.reply_to)
            else:
                outcome = await client.say(destination, item.thread_id, item.text or "")
        if item.edit is not None and outcome.kind in (OutcomeKind.ok, OutcomeKind.not_modified):
            if item.then is not None:
                await item.then(item.edit)
            return
        if item.edit is not None and outcome.kind is OutcomeKind.unsure:
            lane.outbox.insert(0, item)  # an edit is the same whenever it lands: made again
            return
        if outcome.kind is OutcomeKind.unsure:
            sent = item.payload if item.payload is not None else client.said(item.thread_id, item.text or "")
            found = await self._find(destination, sent, mark)
            if item.then is not None:
                await item.then(found)
            return
        if outcome.kind is OutcomeKind.rate_limited:
            self.ctx.pacer.hold(destination, outcome.retry_after)
            lane.outbox.insert(0, item)
            return
        if outcome.kind is OutcomeKind.transient:
            self.ctx.pacer.hold(destination, self.effects.backoff(destination) / self.ctx.pacer.budgets.scale)
            lane.outbox.insert(0, item)
            return
        if outcome.kind is OutcomeKind.ok and outcome.message_id is not None:
            self.effects.ok(destination)
            if item.urgent:  # nothing is remembered of a destination without a grant
                await self.effects.saw(destination, outcome.message_id)
            if item.then is not None:
                await item.then(outcome.message_id)
            return
        if outcome.kind is OutcomeKind.unsupported:
            await self.ctx.channel.unsupported(outcome.detail)
            self.log.warning("chat %r: a rich message was not delivered: %s", destination, outcome.detail)
        elif outcome.kind is OutcomeKind.forbidden and await self.ctx.state.follows.of(destination):
            # Paused only when it follows something: a stranger's refusal stores nothing.
            delay = await self.ctx.pauses.pause(destination)
            self.log.warning("chat %r refuses the bot (%s): paused for %.0f s", destination, outcome.detail, delay)
        else:
            self.ctx.failures.warning(
                f"not delivered: {outcome.kind}", "chat %r: a message was not delivered (%s): %s", destination,
                outcome.kind, outcome.detail,
            )
        if item.then is not None:
            await item.then(None)

    async def _find(self, destination: Id, sent: Payload, mark: int) -> MessageId | None:
        """A one-off message whose send may or may not have landed: not sent again (a
        duplicate reply is worse than none), but looked for, so that it is known. An
        unknown message of ours is what a draft's probe — an identical edit of the ids
        after its mark — would overwrite. The lane waits meanwhile: nothing else goes to
        this destination while the message is unaccounted for. Returns its id when it was found."""
        self.ctx.failures.warning(
            "unsure message", "chat %r: a message may or may not have landed; looking for it", destination
        )
        intent = Intent(
            "answer", 0, sent.method, dict(sent.params), sent.digest, sent.kind, mark, self.ctx.clock(), mark + 1
        )
        await asyncio.sleep(self.ctx.options.settle)  # a request still in flight may land meanwhile
        most = self.ctx.options.max_probes
        retry = Retrying(
            "probing for an unsure message failed", log=self.ctx.failures, backoff=self.ctx.options.backoff,
            level=logging.INFO,
        )
        candidate, foreign = mark + 1, 0
        while foreign < most:
            probe = partial(self._probe, destination, candidate, intent, mark)
            try:
                candidate, outcome = await retry.run(probe, retry_on=(_NoAnswer,), tries=most)
            except _NoAnswer:
                return None
            if outcome.kind is OutcomeKind.found:
                found = outcome.message_id if outcome.message_id is not None else candidate
                await self.effects.saw(destination, found)
                return found
            if outcome.kind is OutcomeKind.absent:
                return None
            if outcome.kind is OutcomeKind.foreign:
                if outcome.message_id is not None:
                    await self.effects.saw(destination, outcome.message_id)  # one of ours after all: never probed again
                candidate, foreign = candidate + 1, foreign + 1
            else:
                self.ctx.pacer.hold(destination, outcome.retry_after)
        return None

    async def _probe(self, destination: Id, candidate: int, intent: Intent, mark: int) -> tuple[int, Outcome]:
        """One probe of the first id from `candidate` on not known to be ours: that id and
        the answer (found, absent, foreign or rate limited); `_NoAnswer` for any other."""
        known = await self.ctx.state.messages.sent_after(destination, mark)
        while candidate in known:
            candidate += 1
        await self.ctx.pacer.acquire(destination)
        async with self.ctx.calls:
            await self.ctx.pacer.leaving(destination)
            outcome = await self.ctx.channel.client.probe(destination, candidate, replace(intent, probe=candidate))
        if outcome.kind not in _ANSWERS:
            raise _NoAnswer(f"chat {destination!r}: {outcome.kind} ({outcome.detail})")
        return candidate, outcome

__all__ = ["OneOffSender"]
