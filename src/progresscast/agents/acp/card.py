"""What an ACP session shows on the card, written beside the session, never in its way.

The proxy calls these methods as it forwards messages; they only note what changed and
queue a write. One task writes the queue in order, so a slow or dead store holds up
nothing but the card: a failure is one line on stderr per kind, the queue is bounded
(past it, writes are dropped), and the next write tries again. The plan and the answer
are written as they stand when their turn comes, so a burst of updates is one write.

ACP shapes (agentclientprotocol.com, schema v1): a `plan` update is the full list each
time, `entries: [{content, priority, status: pending|in_progress|completed}]`; a
`tool_call` has a `toolCallId` and a `title`, a `tool_call_update` the same id and only
what changed (`title`, `status: pending|in_progress|completed|failed`); an
`agent_message_chunk` a `content` block (text is shown).

Usage (both still marked unstable in the SDK's schema): a `session/prompt` result may
carry `usage {inputTokens, outputTokens, …}` for the turn, and a `usage_update` the
session's cumulative `cost {amount, currency}`; a run's cost is what that grew by during
its turn, shown in US dollars only.
"""

from __future__ import annotations

import asyncio
import math
import sys
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from ...failure_log import Once
from ...model.activity import MAX_ANSWER_CHARS, MAX_TOOL_LINE_CHARS
from ...model.card import CardError, Step, clean_text, cut
from ...model.owners import Owner
from ...model.timing import Usage
from ...model.view import RunState
from ...stopping import still_wanted
from ...store.cards import CardStore
from ..harness_plan import TODO_STATES, ItemShape, map_plan

ACP_PLAN = ItemShape(label="content", state="status", states=TODO_STATES)
"""An ACP plan entry: `{content, priority, status}` (the priority is not shown; order is kept)."""

TOOL_MARKS = {"completed": "✓", "failed": "✗"}
"""A tool call that ended: its line gets this mark after its title."""
MAX_TOOL_CALLS = 200
"""Tool calls whose line is remembered (for their updates); the oldest are forgotten."""

STOP_REASONS = {"end_turn": RunState.completed, "cancelled": RunState.canceled}
"""How a prompt turn's `stopReason` ends the run; any other (`refusal`, `max_tokens`,
`max_turn_requests`) and an error response end it failed."""

MAX_QUEUED = 1000

Write = Callable[[CardStore], Awaitable[object]]
T = TypeVar("T")


def warn(message: str) -> None:
    """A line for the editor's agent log (stderr): stdout is the protocol."""
    print(f"progresscast acp: {message}", file=sys.stderr, flush=True)


def run_end(response: dict[str, Any]) -> RunState:
    """The run's end for a `session/prompt` response (a result or an error)."""
    result = response.get("result")
    reason = result.get("stopReason") if isinstance(result, dict) else None
    return STOP_REASONS.get(reason, RunState.failed) if isinstance(reason, str) else RunState.failed


class CardWriter:
    """The owner's card, as the session goes: runs, plan, tool lines, answer."""

    def __init__(self, owner: Owner, connect: Callable[[], Awaitable[CardStore]]) -> None:
        self.owner = owner
        self._connect = connect
        self.store: CardStore | None = None
        self.connected = asyncio.Event()
        """Set once connecting ended, whether or not a store is there (`store`)."""
        self.run_id: str | None = None
        self.run_session: str | None = None
        self._said = Once()
        self._queue: asyncio.Queue[Write] = asyncio.Queue(MAX_QUEUED)
        self._plan: list[Step] | None = None
        self._cost: dict[str, float] = {}
        """A session's cumulative cost in US dollars, as its agent last said."""
        self._cost_before: dict[str, tuple[str, float | None]] = {}
        """A live run → its session and that session's cost when the run began."""
        self._tools: dict[str, tuple[str, str]] = {}
        """A tool call's id → its title and the line shown for it."""
        self._answer = ""
        self._answer_run: str | None = None
        self._answer_pending = False

    def say_once(self, kind: str, message: str) -> None:
        if self._said.first(kind):
            warn(message)

    # -- what the proxy saw --------------------------------------------------------------

    def prompt_started(self, session_id: str) -> str:
        """A `session/prompt` went to the agent: a new run (Stop offered in chat)."""
        run_id = uuid.uuid4().hex
        self.run_id, self.run_session = run_id, session_id
        self._answer, self._answer_run = "", run_id
        self._cost_before[run_id] = (session_id, self._cost.get(session_id))
        self._queue_write(lambda store: store.start_run(self.owner, run_id, stoppable=True))
        return run_id

    def prompt_ended(self, run_id: str, state: RunState, response: dict[str, Any] | None = None) -> None:
        if self.run_id == run_id:
            self.run_id = self.run_session = None
        usage = self._usage(run_id, response)
        self._queue_write(lambda store: store.end_run(self.owner, run_id, state, usage=usage))

    def _usage(self, run_id: str, response: dict[str, Any] | None) -> Usage | None:
        """The turn's tokens from its response, its cost from the session's cumulative
        cost; None where the agent said neither (or said it wrong: logged once)."""
        session, before = self._cost_before.pop(run_id, (None, None))
        result = response.get("result") if response is not None else None
        raw = result.get("usage") if isinstance(result, dict) else None
        data: dict[str, Any] = {}
        if isinstance(raw, dict):
            data = {name: raw[name] for name in ("inputTokens", "outputTokens") if name in raw}
        after = self._cost.get(session) if session is not None else None
        if after is not None and after != before:
            data["costUsd"] = round(max(0.0, after - (before or 0.0)), 6)
        if not data:
            return None
        try:
            return Usage.parse(data)
        except CardError as exc:
            self.say_once(f"usage:{exc.field}", f"a turn's usage was not shown: {exc}")
            return None

    def _cost_update(self, params: dict[str, Any], update: dict[str, Any]) -> None:
        session, cost = params.get("sessionId"), update.get("cost")
        if not isinstance(session, str) or not isinstance(cost, dict) or cost.get("currency") != "USD":
            return  # another currency is not converted
        amount = cost.get("amount")
        if isinstance(amount, (int, float)) and not isinstance(amount, bool) and math.isfinite(amount) and amount >= 0:
            self._cost[session] = float(amount)

    def update(self, params: Any) -> None:
        """A `session/update` notification's params."""
        update = params.get("update") if isinstance(params, dict) else None
        if not isinstance(update, dict):
            return
        kind = update.get("sessionUpdate")
        if kind == "plan":
            self._plan_update(update.get("entries"))
        elif kind in ("tool_call", "tool_call_update"):
            self._tool(update)
        elif kind == "usage_update":
            self._cost_update(params, update)
        elif kind == "agent_message_chunk":
            content = update.get("content")
            if isinstance(content, dict) and content.get("type") == "text" and isinstance(content.get("text"), str):
                self._answer_chunk(content["text"])

    def _tool(self, update: dict[str, Any]) -> None:
        """A tool call's line: its title, then the same line changed in place when an
        update brings a new title or an end (`✓` completed, `✗` failed)."""
        call_id = update.get("toolCallId")
        key = call_id if isinstance(call_id, str) else None
        shown = self._tools.get(key) if key is not None else None
        title = update.get("title")
        if not isinstance(title, str) or not title.strip():
            if shown is None:
                return  # an update of a call we never saw, without a title: nothing to show
            title = shown[0]
        title = " ".join(clean_text(title).split())
        mark = TOOL_MARKS.get(update.get("status"), "")  # type: ignore[arg-type]
        line = f"{cut(title, MAX_TOOL_LINE_CHARS - 2)} {mark}" if mark else title
        if shown is not None and shown[1] == line:
            return
        if key is not None:
            self._tools.pop(key, None)
            self._tools[key] = (title, line)
            while len(self._tools) > MAX_TOOL_CALLS:
                del self._tools[next(iter(self._tools))]
        old = shown[1] if shown is not None else None
        self._queue_write(lambda store: store.update_activity(self.owner, tool=line, replaces=old))

    def _plan_update(self, entries: Any) -> None:
        try:
            plan = map_plan(entries, ACP_PLAN, field="plan.entries")
        except CardError as exc:
            self.say_once(f"plan:{exc.field}", f"a plan was not shown: {exc}")
            return
        queued = self._plan is not None
        self._plan = list(plan.steps)
        if not queued:
            self._queue_write(self._write_plan)

    async def _write_plan(self, store: CardStore) -> None:
        steps, self._plan = self._plan, None
        if steps is not None:
            await store.put_plan(self.owner, steps)

    def _answer_chunk(self, text: str) -> None:
        if self.run_id is None:
            return  # a message outside a prompt turn belongs to no run's answer
        queued = self._answer_run == self.run_id and self._answer_pending
        self._answer = (self._answer + text)[-MAX_ANSWER_CHARS:]
        self._answer_run = self.run_id
        if not queued:
            self._answer_pending = True
            run_id = self.run_id
            self._queue_write(lambda store: self._write_answer(store, run_id))

    async def _write_answer(self, store: CardStore, run_id: str) -> None:
        self._answer_pending = False
        if self._answer_run == run_id and self._answer.strip():  # not a newer run's by now
            await store.update_activity(self.owner, answer=self._answer)

    # -- writing -------------------------------------------------------------------------

    def _queue_write(self, write: Write) -> None:
        try:
            self._queue.put_nowait(write)
        except asyncio.QueueFull:
            self.say_once("full", "the store is behind; some card updates were dropped")

    async def run(self) -> None:
        """Connect, then write the queue in order until cancelled."""
        try:
            self.store = await self._connect()
        except Exception as exc:  # no store: the session goes on unseen
            warn(f"no store ({exc}); the session is not shown in chat")
        finally:
            self.connected.set()
        while True:
            await still_wanted()  # redis-py may have swallowed the cancel
            write = await self._queue.get()
            try:
                await self.attempt("write", write)
            finally:
                self._queue.task_done()

    async def attempt(self, kind: str, write: Callable[[CardStore], Awaitable[T]]) -> T | None:
        """Run one store call; a failure is logged once per kind and answered None."""
        if self.store is None:
            return None
        try:
            return await write(self.store)
        except CardError as exc:
            self.say_once(f"{kind}:{exc.field}", f"the store refused a {kind}: {exc}")
        except Exception as exc:
            self.say_once(f"{kind}:{type(exc).__name__}", f"the store failed ({kind}): {exc}; the session goes on")
        return None

    async def flush(self, timeout: float) -> None:
        """Give the queued writes up to `timeout` seconds (the session is over)."""
        try:
            await asyncio.wait_for(self._queue.join(), timeout)
        except TimeoutError:
            self.say_once("flush", "the store did not take the last card updates in time")
