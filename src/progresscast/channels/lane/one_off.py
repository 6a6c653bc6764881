"""One-off messages (a command's reply, a snapshot) taken from a destination's lane:
paced like drafts, never sent twice — one that may or may not have landed is looked for."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from ...render.payload import Payload
from ..draft.outcome import MessageId, OutcomeKind
from ..draft.state import Intent
from ..state import Id
from .context import WorkerContext
from .lane import Lane, OneOff
from .reply_effects import ReplyEffects


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
        mark = await self.ctx.state.last_message(destination)
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
            lane.outbox.appendleft(item)  # an edit is the same whenever it lands: made again
            return
        if outcome.kind is OutcomeKind.unsure:
            sent = item.payload if item.payload is not None else client.said(item.thread_id, item.text or "")
            found = await self._find(destination, sent, mark)
            if item.then is not None:
                await item.then(found)
            return
        if outcome.kind is OutcomeKind.rate_limited:
            self.ctx.pacer.hold(destination, outcome.retry_after)
            lane.outbox.appendleft(item)
            return
        if outcome.kind is OutcomeKind.transient:
            self.ctx.pacer.hold(destination, self.effects.backoff(destination) / self.ctx.pacer.budgets.scale)
            lane.outbox.appendleft(item)
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
        elif outcome.kind is OutcomeKind.forbidden and await self.ctx.state.follows(destination):
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
        candidate, probes, failures = mark + 1, 0, 0
        while probes < self.ctx.options.max_probes and failures < self.ctx.options.max_probes:
            known = await self.ctx.state.sent_after(destination, mark)
            while candidate in known:
                candidate += 1
            await self.ctx.pacer.acquire(destination)
            async with self.ctx.calls:
                await self.ctx.pacer.leaving(destination)
                outcome = await self.ctx.channel.client.probe(destination, candidate, replace(intent, probe=candidate))
            k = outcome.kind
            if k is OutcomeKind.found:
                found = outcome.message_id if outcome.message_id is not None else candidate
                await self.effects.saw(destination, found)
                return found
            if k is OutcomeKind.absent:
                return None
            if k is OutcomeKind.foreign:
                if outcome.message_id is not None:
                    await self.effects.saw(destination, outcome.message_id)  # one of ours after all: never probed again
                candidate, probes = candidate + 1, probes + 1
            elif k is OutcomeKind.rate_limited:
                self.ctx.pacer.hold(destination, outcome.retry_after)
            else:  # transient, unsure: the same probe again, after a pause
                failures += 1
                await asyncio.sleep(self.effects.backoff(destination))
        return None


__all__ = ["OneOffSender"]
