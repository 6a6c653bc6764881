"""Following an A2A agent with the a2a-sdk client: a task, a new task, or a context.

The client resolves the agent card, speaks JSON-RPC or HTTP+JSON (whichever the card
offers first), and sends `A2A-Version: 1.0` and `A2A-Extensions: <progress/v1>`.
Every event goes through `UpdateApplier`, so what a stream, a poll and a push deliver
can be mixed: only the newest status ever shows. A task waiting for input is asked in
chat and the answer sent back; Stop pressed on its run cancels it (controls.py).

A stream that ends before a terminal state dropped: the follower subscribes again,
with backoff; so is one that brought no event for `idle_timeout`. When subscribing is
refused (the task already ended) it reads the task once with `GetTask` instead.

The agent is not trusted (guard.py): its card may only point at its own origin (or
`allowedHosts`), every read has a deadline, every answer is bounded, ListTasks pages
that never end are cut short, and at most `max_tasks` tasks are subscribed to at once
per agent (the others are followed by the listing alone).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing, asynccontextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from ...backoff import Backoff, Retrying
from ...failure_log import FailureLog
from ...model.card import CardError
from ...stopping import still_wanted
from ...supervise import spawn
from .apply import Applied, Outcome, Source, UpdateApplier
from .controls import Controls
from .guard import CONNECT_TIMEOUT, CappedTransport, CardRefused, check_card
from .mapping import EXTENSION_URI, RUN_END, StatusChange, TaskState, Update, UpdateError, parse_timestamp, parse_update

log = logging.getLogger("progresscast.agents.a2a")

HEADERS = {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
TERMINAL = frozenset(RUN_END)


class AgentUnavailable(Exception):
    """The agent cannot be reached, or its card cannot be used (one line for the user)."""


class StreamEnded(Exception):
    """A stream ended, or went silent, before its reader had what it waited for."""


@dataclass(frozen=True)
class Pacing:
    """How long to wait between tries and polls (scaled down in tests)."""

    backoff: Backoff = field(default_factory=Backoff)
    """Between tries of a stream or a call that failed (the one policy, backoff.py)."""
    safety_poll: float = 30.0
    """With push notifications: how often GetTask is asked anyway."""
    list_poll: float = 5.0
    """`--context` and `serve`: how often ListTasks is asked."""
    idle_timeout: float = 120.0
    """A stream with no event for this long is subscribed to again; also the longest
    wait for any one read, and for a whole call (ListTasks, GetTask)."""
    max_tasks: int = 100
    """Tasks of one agent subscribed to at once; more are followed by ListTasks alone."""
    max_pages: int = 100
    """ListTasks pages read in one listing; an agent whose page tokens go on is cut short."""
    stop_poll: float = 1.0
    """How often a live task's run is looked at for a Stop pressed in chat."""


Report = Callable[[Update, Applied], None]


def _quiet(update: Update, applied: Applied) -> None:
    return None


@asynccontextmanager
async def agent_client(
    url: str, *, idle_timeout: float = Pacing.idle_timeout, allowed_hosts: Sequence[str] = ()
) -> AsyncIterator[Client]:
    """An a2a-sdk client for the agent at `url` (its card resolved and checked), closed on exit."""
    http = httpx.AsyncClient(
        headers=HEADERS, timeout=httpx.Timeout(idle_timeout, connect=CONNECT_TIMEOUT), transport=CappedTransport()
    )
    config = ClientConfig(
        streaming=True,
        httpx_client=http,
        supported_protocol_bindings=["JSONRPC", "HTTP+JSON"],
    )
    try:
        try:
            async with asyncio.timeout(idle_timeout):
                card = await A2ACardResolver(http, url).get_agent_card()
            check_card(card, url, allowed_hosts)
            client = await create_client(card, client_config=config)
        except (A2AError, httpx.HTTPError, ValueError, OSError, CardRefused) as exc:
            raise AgentUnavailable(f"agent {url}: {_reason(exc)}") from None
        try:
            yield client
        finally:
            await client.close()
    finally:
        await http.aclose()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, TimeoutError):
        return "no answer in time"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect ({text})"
    if isinstance(exc, ValueError) and "transport" in text:
        return f"its card offers neither JSON-RPC nor HTTP+JSON ({text})"
    return text


def to_json(message: Any) -> dict[str, Any]:
    """An a2a-sdk protobuf message as the A2A camelCase JSON the mapping reads."""
    data: dict[str, Any] = MessageToDict(message)
    return data


class Follower:
    """Applies one agent's events for one agent id; one instance per agent."""

    def __init__(
        self,
        client: Client,
        applier: UpdateApplier,
        *,
        report: Report = _quiet,
        pacing: Pacing = Pacing(),
        chat: bool = True,
    ) -> None:
        """`chat`: a task waiting for input is asked in chat and the answer sent back, and
        Stop pressed on a task's run cancels the task (controls.py)."""
        self.client = client
        self.applier = applier
        self.report = report
        self.pacing = pacing
        self.controls = (
            Controls(applier.store, reply=self.reply, cancel=self.cancel, stop_poll=pacing.stop_poll)
            if chat and applier is not None
            else None
        )
        self.failures = FailureLog(log)
        self.subscribed: dict[str, asyncio.Task[None]] = {}
        """The live tasks subscribed to (at most `pacing.max_tasks`), across contexts."""

    async def _call(self, call: Awaitable[Any]) -> Any:
        """A call that answers once (ListTasks, GetTask), within the idle time."""
        async with asyncio.timeout(self.pacing.idle_timeout):
            return await call

    async def handle(self, data: dict[str, Any], source: Source) -> TaskState | None:
        """Apply one event; the task state it carries (None for artifacts and messages)."""
        await still_wanted()
        try:
            update = parse_update(data)
        except UpdateError as exc:
            log.warning("A2A update not applied: %r", str(exc))
            return None
        if update is None:
            return None
        try:
            applied = await self.applier.apply(update, source, stoppable=self.controls is not None)
        except CardError as exc:  # an owner we may not write: say so, keep following
            log.warning("A2A update of task %r not applied: %r", getattr(update, "task_id", "?"), str(exc))
            return None
        self.report(update, applied)
        current = applied.outcome in (Outcome.applied, Outcome.duplicate)
        if self.controls is not None and current and isinstance(update, StatusChange):
            self.controls.seen(applied.owner, update)
        return update.state if isinstance(update, StatusChange) else None

    async def reply(self, task_id: str, context_id: str | None, text: str) -> None:
        """Send the person's answer to a task waiting for input (a user message on that
        task and context), applying what the agent streams back."""
        message = pb.Message(message_id=str(uuid.uuid4()), role=pb.Role.ROLE_USER, parts=[pb.Part(text=text)],
                             task_id=task_id)
        if context_id:
            message.context_id = context_id
        stream = self.client.send_message(pb.SendMessageRequest(message=message))
        try:
            async with aclosing(self._events(stream)) as events:
                async for event in events:
                    state = await self.handle(to_json(event), Source.stream)
                    if state in TERMINAL or state in (TaskState.input_required, TaskState.auth_required):
                        return
        except StreamEnded as exc:  # the task's own subscription goes on following it
            log.info("A2A task %r: the stream after the answer ended: %s", task_id, exc)
        except (A2AError, httpx.HTTPError, OSError) as exc:
            log.warning("A2A task %r: sending the answer from chat failed: %r", task_id, _reason(exc))

    async def cancel(self, task_id: str, why: str) -> None:
        """Cancel a task (Stop pressed in chat: `why` says who), applying the task it returns."""
        log.info("A2A task %r: %s; canceling it", task_id, why)
        try:
            task = await self._call(self.client.cancel_task(pb.CancelTaskRequest(id=task_id)))
        except (A2AError, httpx.HTTPError, OSError, TimeoutError) as exc:
            log.warning("A2A task %r: canceling it failed: %r", task_id, _reason(exc))
            return
        await self.handle({"task": to_json(task)}, Source.poll)

    async def close(self) -> None:
        """Withdraw the asks still open and stop watching for Stop."""
        if self.controls is not None:
            await self.controls.close()

    async def poll_task(self, task_id: str) -> TaskState | None:
        task = await self._call(self.client.get_task(pb.GetTaskRequest(id=task_id)))
        return await self.handle({"task": to_json(task)}, Source.poll)

    async def follow_task(self, task_id: str) -> TaskState:
        """Follow a task's stream until it ends, subscribing again (the one retry policy,
        backoff.py) when the stream drops; a drop after a state came is not a failure."""
        # The task goes in the line, not the kind: the failure log keeps one entry a kind.
        retry = Retrying(
            "A2A: following a task", log=self.failures, backoff=self.pacing.backoff, level=logging.INFO,
            describe=lambda exc: f"task {task_id!r}: {_reason(exc)!r}",
        )
        return await retry.run(
            partial(self._subscribe_once, task_id, retry), retry_on=(StreamEnded, A2AError, httpx.HTTPError, OSError)
        )

    async def _subscribe_once(self, task_id: str, retry: Retrying) -> TaskState:
        """Read one subscription to the task: its end state. A subscription refused (most
        likely the task has ended) reads the task once instead."""
        try:
            subscription = self.client.subscribe(pb.SubscribeToTaskRequest(id=task_id))
            async with aclosing(self._events(subscription)) as events:
                async for event in events:
                    state = await self.handle(to_json(event), Source.stream)
                    if state in TERMINAL:
                        return state
                    if state is not None:
                        retry.succeeded()
        except (UnsupportedOperationError, TaskNotFoundError) as exc:
            state = await self._poll_quietly(task_id)
            if state in TERMINAL:
                return state
            if isinstance(exc, TaskNotFoundError) and state is None:
                raise AgentUnavailable(f"task {task_id}: not found") from None
            raise
        raise StreamEnded("the stream ended before the task did")

    async def _events(self, stream: AsyncIterator[Any]) -> AsyncGenerator[Any]:
        """The stream's events; `StreamEnded` when it ends, or when none came for
        `idle_timeout` (a stream given up on)."""
        try:
            while True:
                try:
                    async with asyncio.timeout(self.pacing.idle_timeout):
                        event = await anext(stream)
                except StopAsyncIteration:
                    raise StreamEnded("the stream closed before the task ended") from None
                except TimeoutError:
                    raise StreamEnded(f"no event in {self.pacing.idle_timeout:.0f} s") from None
                yield event
        finally:
            await stream.aclose()  # type: ignore[attr-defined]

    async def _poll_quietly(self, task_id: str) -> TaskState | None:
        try:
            return await self.poll_task(task_id)
        except TaskNotFoundError:
            return None
        except (A2AError, httpx.HTTPError, OSError) as exc:
            log.info("A2A task %r: GetTask failed: %r", task_id, _reason(exc))
            return None

    async def send(self, text: str, *, context_id: str | None = None,
                   push: pb.TaskPushNotificationConfig | None = None) -> tuple[str, TaskState | None]:
        """Start a task with a user message and follow its stream (to the end, unless
        `push` is given: then only until the task is known). The task id and last state."""
        message = pb.Message(
            message_id=str(uuid.uuid4()),
            role=pb.Role.ROLE_USER,
            parts=[pb.Part(text=text)],
        )
        if context_id:
            message.context_id = context_id
        request = pb.SendMessageRequest(message=message)
        if push is not None:
            request.configuration.task_push_notification_config.CopyFrom(push)
        task_id: str | None = None
        state: TaskState | None = None
        try:
            async with aclosing(self._events(self.client.send_message(request))) as events:
                async for event in events:
                    data = to_json(event)
                    task_id = task_id or _task_id(data)
                    state = await self.handle(data, Source.stream) or state
                    if state in TERMINAL or (push is not None and task_id):
                        break
        except StreamEnded as exc:
            if task_id is not None:
                log.info("A2A task %r: %s; subscribing again", task_id, exc)
        except (A2AError, httpx.HTTPError, OSError) as exc:
            if task_id is None:
                raise AgentUnavailable(f"sending the message failed: {_reason(exc)}") from None
            log.info("A2A task %r: the stream broke (%r); subscribing again", task_id, _reason(exc))
        if task_id is None:
            raise AgentUnavailable("the agent answered with a message, not a task: nothing to follow")
        if push is None and state not in TERMINAL:
            state = await self.follow_task(task_id)
        return task_id, state

    async def watch_with_push(self, task_id: str) -> TaskState:
        """Push notifications carry the updates; poll GetTask now and then as a safety net."""
        while True:
            await still_wanted()
            state = await self._poll_quietly(task_id)
            if state in TERMINAL:
                return state
            await asyncio.sleep(self.pacing.safety_poll)

    async def register_push(self, task_id: str, url: str, token: str) -> None:
        config = pb.TaskPushNotificationConfig(task_id=task_id, url=url, token=token)
        try:
            await self.client.create_task_push_notification_config(config)
        except (A2AError, httpx.HTTPError) as exc:
            raise AgentUnavailable(f"registering the push notification failed: {_reason(exc)}") from None

    async def follow_context(
        self,
        context_id: str | None,
        *,
        cursor: ContextCursor | None = None,
        accept: Callable[[str], bool] | None = None,
    ) -> None:
        """Follow every task of a context (every task of the agent when None; `accept`
        picks contexts by id) until cancelled: ListTasks with `statusTimestampAfter`,
        subscribing to each live task (up to `pacing.max_tasks` of the agent's)."""
        cursor = cursor or ContextCursor()
        mine: set[str] = set()
        try:
            while True:
                await still_wanted()
                try:
                    await self._list_once(context_id, cursor, accept, mine)
                except (A2AError, httpx.HTTPError, OSError) as exc:
                    log.info("A2A agent: ListTasks failed (%r); trying again", _reason(exc))
                except Exception as exc:  # Redis gone mid-write, …: the subscriptions stay
                    self.failures.exception(
                        f"listing: {type(exc).__name__}",
                        "A2A agent: following its tasks failed (%s: %r); trying again", type(exc).__name__, str(exc),
                    )
                for task_id in [t for t in mine if t not in self.subscribed or self.subscribed[t].done()]:
                    mine.discard(task_id)
                    self.subscribed.pop(task_id, None)
                await asyncio.sleep(self.pacing.list_poll)
        finally:
            jobs = [self.subscribed.pop(t) for t in mine if t in self.subscribed]
            for job in jobs:
                job.cancel()
            await asyncio.gather(*jobs, return_exceptions=True)

    async def _list_once(
        self, context_id: str | None, cursor: ContextCursor, accept: Callable[[str], bool] | None, mine: set[str]
    ) -> None:
        for task in await self._list(context_id, await cursor.load()):
            if accept is not None and not accept(task.context_id or task.id):
                continue
            data = {"task": to_json(task)}
            state = await self.handle(data, Source.poll)
            await cursor.seen(data["task"].get("status", {}).get("timestamp"))
            task_id = task.id
            running = self.subscribed.get(task_id)
            if state in TERMINAL or (running is not None and not running.done()):
                continue
            if sum(not job.done() for job in self.subscribed.values()) >= self.pacing.max_tasks:
                self.failures.warning(
                    "max tasks", "A2A agent: %d tasks followed live already (a2a.maxTasks); task %r is followed "
                    "by listing only", self.pacing.max_tasks, task_id,
                )
                continue
            self.subscribed[task_id] = spawn(
                partial(self._follow_live, task_id), "following an A2A task", failures=self.failures,
                backoff=self.pacing.backoff,
            )
            mine.add(task_id)

    async def _follow_live(self, task_id: str) -> None:
        try:
            await self.follow_task(task_id)
        except AgentUnavailable as exc:
            log.info("A2A task %r: following stopped: %r", task_id, str(exc))

    async def _list(self, context_id: str | None, after: str | None) -> list[pb.Task]:
        """Every task ListTasks names, page after page — at most `pacing.max_pages`, and
        not past a page token seen before (an agent whose pages never end)."""
        tasks: list[pb.Task] = []
        token = ""
        seen: set[str] = set()
        for _ in range(self.pacing.max_pages):
            request = pb.ListTasksRequest(page_token=token)
            if context_id:
                request.context_id = context_id
            if after:
                request.status_timestamp_after.FromJsonString(after)
            response = await self._call(self.client.list_tasks(request))
            tasks.extend(response.tasks)
            token = response.next_page_token
            if not token:
                return tasks
            if token in seen:
                self.failures.warning(
                    "page loop", "A2A agent: ListTasks named page token %r again after %d pages; "
                    "using the tasks read so far", token[:80], len(seen) + 1,
                )
                return tasks
            seen.add(token)
        self.failures.warning(
            "page cap", "A2A agent: ListTasks still had more after %d pages; using the tasks read so far",
            self.pacing.max_pages,
        )
        return tasks


class ContextCursor:
    """The newest status timestamp seen by ListTasks (in memory; `serve` keeps it in Redis)."""

    def __init__(self) -> None:
        self._value: str | None = None

    async def load(self) -> str | None:
        return self._value

    async def seen(self, timestamp: str | None) -> None:
        newer = self._value is None or (parse_timestamp(timestamp) or 0) > (parse_timestamp(self._value) or 0)
        if timestamp and newer:
            await self.store(timestamp)

    async def store(self, timestamp: str) -> None:
        self._value = timestamp


def _task_id(data: dict[str, Any]) -> str | None:
    for key, name in (("task", "id"), ("statusUpdate", "taskId"), ("artifactUpdate", "taskId")):
        value = data.get(key, {}).get(name)
        if isinstance(value, str) and value:
            return value
    return None
