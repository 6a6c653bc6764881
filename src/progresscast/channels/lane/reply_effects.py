"""What a platform's reply to a call means besides the draft's state (`replies.py`):
message ids to remember, waits and backoffs, pausing a destination that refuses the bot,
switching a feature off, log lines."""

from __future__ import annotations

from collections.abc import Callable

from ...failure_log import Once
from ..draft.calls import Call, Delete, Edit, Probe, Send
from ..draft.outcome import Outcome, OutcomeKind
from ..state.ids import DraftKey, Id
from .context import WorkerContext


class ReplyEffects:
    def __init__(self, ctx: WorkerContext, *, touch: Callable[[DraftKey], object]) -> None:
        self.ctx = ctx
        self.log = ctx.log
        self._touch = touch
        """Look at a draft again (`ChannelWorker.touch`): a destination that answers again."""
        self._failures: dict[Id, int] = {}
        """Failed calls in a row per destination: its backoff."""
        self._logged = Once(ctx.options.remember)

    async def after(self, key: DraftKey, call: Call, outcome: Outcome) -> float:
        """What a reply means besides the draft's state. Returns the delay before
        looking again."""
        destination, name, k = key.chat_id, key.owner.display_key, outcome.kind
        if outcome.message_id is not None and (
            (isinstance(call, Send) and outcome.delivered) or k in (OutcomeKind.found, OutcomeKind.foreign)
        ):
            await self.saw(destination, outcome.message_id)
        if outcome.delivered or k in (OutcomeKind.found, OutcomeKind.absent, OutcomeKind.foreign, OutcomeKind.gone):
            self.ok(destination)
        if k is OutcomeKind.forbidden:
            delay = await self.ctx.pauses.pause(destination)
            self.log.warning(
                "chat %r refuses the bot (%s): paused — no calls until it speaks again, or a probe in %.0f s",
                destination, outcome.detail, delay,
            )
            return delay
        if k not in (OutcomeKind.rate_limited, OutcomeKind.transient, OutcomeKind.unsure) and self.ctx.pauses.paused(
            destination
        ):
            await self.ctx.pauses.resume(destination)  # the probe was answered: the destination takes calls again
            self.log.info("chat %r answers again: no longer paused", destination)
            for other in await self.ctx.state.follows.of(destination):
                if other != key:
                    self._touch(other)
        if k is OutcomeKind.rate_limited:
            held = self.ctx.pacer.hold(destination, outcome.retry_after)
            self.ctx.failures.warning("flood control", "chat %r: flood control, waiting %.1f s", destination, held)
            return 0  # `DraftProcessor.process` waits for the destination to be ready, with the newest content
        if k is OutcomeKind.unsure and isinstance(call, Send):
            # It may have landed: the intent stays, `decide` probes for it after `settle`.
            self.ctx.failures.warning(
                "unsure send", "chat %r: send of %s may or may not have landed (%s)", destination, name,
                outcome.detail,
            )
            self._failures[destination] = self._failures.get(destination, 0) + 1
            return 0
        if k in (OutcomeKind.transient, OutcomeKind.unsure):
            self.ctx.failures.warning(f"{k} call", "chat %r: %s (%s); retrying", destination, k, outcome.detail)
            return self.backoff(destination)
        self._log(key, call, outcome)
        if k is OutcomeKind.unsupported:
            await self.ctx.channel.unsupported(outcome.detail)
        return 0

    def _log(self, key: DraftKey, call: Call, outcome: Outcome) -> None:
        """The log line of a reply that needs nothing more than its state change."""
        destination, name, k = key.chat_id, key.owner.display_key, outcome.kind
        if k is OutcomeKind.refused_content:
            self.log_once(
                "content", destination,
                "chat %r: the server refused a message's content (%s); showing its fallback", destination,
                outcome.detail,
            )
        elif k is OutcomeKind.refused:
            if isinstance(call, Delete):
                self.log.warning(
                    "chat %r: could not delete message %s (%s); forgetting it", destination, call.message_id,
                    outcome.detail,
                )
            else:
                self.log.error("chat %r: the server refused a message of %s: %s", destination, name, outcome.detail)
        elif k in (OutcomeKind.gone, OutcomeKind.locked) and isinstance(call, Edit):
            self.log.info(
                "chat %r: draft %s is gone (%s); sending a new one", destination, call.message_id, outcome.detail
            )
        elif k is OutcomeKind.found and isinstance(call, Probe):
            self.log.info("chat %r: the unsure send of %s landed as message %s", destination, name, call.message_id)
        elif k is OutcomeKind.foreign and outcome.message_id is not None:
            # Only "not modified" proves a message already showed what we sent: a probe
            # that went through changed some other message of this bot. It cannot be
            # restored; it is remembered as ours so no probe touches it again.
            self.log.warning(
                "chat %r: probing for the unsure send of %s overwrote message %s, which was not it",
                destination, name, outcome.message_id,
            )

    def backoff(self, destination: Id) -> float:
        failures = self._failures.get(destination, 0)
        self._failures[destination] = failures + 1
        return self.ctx.options.backoff.delay(failures)

    def ok(self, destination: Id) -> None:
        self._failures.pop(destination, None)

    async def saw(self, destination: Id, message_id: object) -> None:
        """Remember a message we sent (or found to be ours)."""
        if isinstance(message_id, int) and self.ctx.channel.access.drafts_allowed(destination):
            await self.ctx.state.messages.sent(destination, message_id)

    def log_once(self, what: str, destination: Id, message: str, *args: object) -> None:
        if self._logged.first((what, destination)):
            self.log.warning(message, *args)


__all__ = ["ReplyEffects"]
