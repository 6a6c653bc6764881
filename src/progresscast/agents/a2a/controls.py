"""A person in chat acting on a followed A2A task (docs/a2a.md, "Answering from chat").

- A task in `input-required` becomes a text ask (the status message's text as its
  prompt); the answer goes back to the agent as a user message on that task and
  context (`Follower.reply`), and following goes on. When the task leaves
  `input-required` otherwise (answered elsewhere, canceled), the ask is withdrawn.
- Stop pressed on the task's run: the task is canceled (`Follower.cancel`). The run's
  Stop is looked at every `stop_poll` seconds while the task is live.

The follower tells `Controls` every status it applied (`seen`); each task has at most
one ask and one Stop watch, ended when the task ends or the follower closes.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from ...model.asks import MAX_DETAIL_CHARS, MAX_PROMPT_CHARS, MAX_TIMEOUT, AskInput, AskKind
from ...model.card import cut
from ...model.owners import Owner
from ...stopping import still_wanted
from ...store.cards import CardStore
from ..asking import ask_and_wait, stopped_by
from .mapping import RUN_END, StatusChange, TaskState

log = logging.getLogger("progresscast.agents.a2a")

NEEDS_INPUT = "The agent needs your input"
"""The prompt of an ask whose status message has no text."""
STOP_POLL = 1.0


def ask_of(change: StatusChange, timeout: int = MAX_TIMEOUT) -> AskInput:
    """The text ask a task in `input-required` puts to the person: its message's text on
    one line as the prompt, the whole text as the detail when the prompt cut it."""
    text = change.message or ""
    prompt = cut(" ".join(text.split()), MAX_PROMPT_CHARS) or NEEDS_INPUT
    detail = cut(text, MAX_DETAIL_CHARS) if text and prompt != text else None
    return AskInput(kind=AskKind.text, prompt=prompt, detail=detail, timeoutSeconds=timeout, source="a2a").normalized()


@dataclass
class _Task:
    owner: Owner
    stop_watch: asyncio.Task[None]
    asking: asyncio.Task[None] | None = None
    asked: tuple[int | None, str | None] | None = None
    """The status last asked about (its timestamp and text): seen again, it is not asked again."""


@dataclass(eq=False)
class Controls:
    """Asks and Stop for the tasks one follower applies."""

    store: CardStore
    _: KW_ONLY
    reply: Callable[[str, str | None, str], Coroutine[Any, Any, None]]
    """Sends the person's text to the agent: (task id, context id, text)."""
    cancel: Callable[[str, str], Awaitable[None]]
    """Cancels a task: (task id, why)."""
    stop_poll: float = STOP_POLL
    ask_seconds: int = MAX_TIMEOUT
    tasks: dict[str, _Task] = field(default_factory=dict, init=False)
    pending: set[asyncio.Task[None]] = field(default_factory=set, init=False)
    """Answers on their way and jobs cancelled: awaited by `close`."""

    def seen(self, owner: Owner, change: StatusChange) -> None:
        """A status of the task that is current (applied, or a duplicate of the last)."""
        task_id = change.task_id
        tracked = self.tasks.get(task_id)
        if change.state in RUN_END:
            if tracked is not None:
                self._end(self.tasks.pop(task_id))
            return
        if tracked is None:
            watch = asyncio.create_task(self._watch_stop(owner, task_id), name=f"A2A Stop of {task_id}")
            tracked = self.tasks[task_id] = _Task(owner, watch)
        waiting = change.state is TaskState.input_required
        if waiting and tracked.asked != (change.timestamp_us, change.message):
            if tracked.asking is not None:
                self._cancelled(tracked.asking)
            tracked.asked = (change.timestamp_us, change.message)
            tracked.asking = asyncio.create_task(self._ask(tracked, change), name=f"A2A ask of {task_id}")
        elif not waiting:
            tracked.asked = None
            if tracked.asking is not None:
                self._cancelled(tracked.asking)  # answered elsewhere: the ask is withdrawn
                tracked.asking = None

    def _cancelled(self, job: asyncio.Task[None]) -> None:
        """Cancel `job`; `close` awaits it (it may still be withdrawing its ask, on a Redis
        connection that must outlive it)."""
        job.cancel()
        self.pending.add(job)
        job.add_done_callback(self.pending.discard)

    async def _ask(self, tracked: _Task, change: StatusChange) -> None:
        try:
            waited = await ask_and_wait(
                self.store, tracked.owner, [ask_of(change, self.ask_seconds)], self.ask_seconds, watch_stop=False
            )
        except Exception as exc:  # five asks open already, Redis gone, …: the agent waits as it would anyway
            log.warning("A2A task %r: the question could not be asked in chat: %r", change.task_id, str(exc))
            return
        if not waited.answered or waited.answered[0].answer is None:
            return
        text = waited.answered[0].answer.text or ", ".join(waited.answered[0].answer.options)
        # The answer is on its way: the task going back to work must not cancel the sending.
        tracked.asking = None
        job = asyncio.create_task(self.reply(change.task_id, change.context_id, text))
        self.pending.add(job)
        job.add_done_callback(self.pending.discard)

    async def _watch_stop(self, owner: Owner, task_id: str) -> None:
        while True:
            await still_wanted()  # redis-py may have swallowed the cancel of `close`
            try:
                mark = await self.store.asks.stop_mark(owner, task_id)
            except Exception as exc:  # Redis gone a moment: look again
                log.info("A2A task %r: reading its Stop failed: %r", task_id, str(exc))
                mark = None
            if mark is not None:
                await self.cancel(task_id, stopped_by(mark))
                return
            await asyncio.sleep(self.stop_poll)

    def _end(self, tracked: _Task) -> None:
        for job in (tracked.stop_watch, tracked.asking):
            if job is not None and job is not asyncio.current_task():  # a cancel ending its own watch
                self._cancelled(job)

    async def close(self) -> None:
        """Withdraw the open asks and stop watching (the follower stops)."""
        jobs = [t.stop_watch for t in self.tasks.values()]
        jobs += [t.asking for t in self.tasks.values() if t.asking is not None]
        jobs += list(self.pending)
        self.tasks.clear()
        for job in jobs:
            job.cancel()
        await asyncio.gather(*jobs, return_exceptions=True)
