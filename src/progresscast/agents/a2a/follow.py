"""Following an A2A agent with the a2a-sdk client: a task, a new task, or a context.

The client resolves the agent card, speaks JSON-RPC or HTTP+JSON (whichever the card
offers first), and sends `A2A-Version: 1.0` and `A2A-Extensions: <progress/v1>`.
Every event goes through `UpdateApplier`, so what a stream, a poll and a push deliver
can be mixed: only the newest status ever shows.

A stream that ends before a terminal state dropped: the follower subscribes again,
with backoff. When subscribing is refused (the task already ended) it reads the task
once with `GetTask` instead.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, create_client
from a2a.types import a2a_pb2 as pb
from a2a.utils.errors import A2AError, TaskNotFoundError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from ...model.card import CardError
from ...stopping import still_wanted
from .apply import Applied, Source, UpdateApplier
from .mapping import EXTENSION_URI, RUN_END, StatusChange, TaskState, Update, UpdateError, parse_timestamp, parse_update

log = logging.getLogger("progresscast.agents.a2a")

HEADERS = {"A2A-Version": "1.0", "A2A-Extensions": EXTENSION_URI}
TERMINAL = frozenset(RUN_END)


class AgentUnavailable(Exception):
    """The agent cannot be reached, or its card cannot be used (one line for the user)."""


@dataclass(frozen=True)
class Pacing:
    """How long to wait between tries and polls (scaled down in tests)."""

    backoff_initial: float = 0.5
    backoff_max: float = 30.0
    safety_poll: float = 30.0
    """With push notifications: how often GetTask is asked anyway."""
    list_poll: float = 5.0
    """`--context` and `serve`: how often ListTasks is asked."""


Report = Callable[[Update, Applied], None]


def _quiet(update: Update, applied: Applied) -> None:
    return None


@asynccontextmanager
async def agent_client(url: str, *, timeout: float = 30.0) -> AsyncIterator[Client]:
    """An a2a-sdk client for the agent at `url` (its card resolved), closed on exit."""
    http = httpx.AsyncClient(headers=HEADERS, timeout=httpx.Timeout(timeout, read=None))
    config = ClientConfig(
        streaming=True,
        httpx_client=http,
        supported_protocol_bindings=["JSONRPC", "HTTP+JSON"],
    )
    try:
        try:
            client = await create_client(url, client_config=config)
        except (A2AError, httpx.HTTPError, ValueError, OSError) as exc:
            raise AgentUnavailable(f"agent {url}: {_reason(exc)}") from None
        try:
            yield client
        finally:
            await client.close()
    finally:
        await http.aclose()


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
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
    ) -> None:
        self.client = client
        self.applier = applier
        self.report = report
        self.pacing = pacing

    async def handle(self, data: dict[str, Any], source: Source) -> TaskState | None:
        """Apply one event; the task state it carries (None for artifacts and messages)."""
        still_wanted()
        try:
            update = parse_update(data)
        except UpdateError as exc:
            log.warning("A2A update not applied: %r", str(exc))
            return None
        if update is None:
            return None
        try:
            applied = await self.applier.apply(update, source)
        except CardError as exc:  # an owner we may not write: say so, keep following
            log.warning("A2A update of task %r not applied: %r", getattr(update, "task_id", "?"), str(exc))
            return None
        self.report(update, applied)
        return update.state if isinstance(update, StatusChange) else None

    async def poll_task(self, task_id: str) -> TaskState | None:
        task = await self.client.get_task(pb.GetTaskRequest(id=task_id))
        return await self.handle({"task": to_json(task)}, Source.poll)

    async def follow_task(self, task_id: str) -> TaskState:
        """Follow a task's stream until it ends, resubscribing when the stream drops."""
        delay = self.pacing.backoff_initial
        while True:
            still_wanted()
            try:
                async for event in self.client.subscribe(pb.SubscribeToTaskRequest(id=task_id)):
                    state = await self.handle(to_json(event), Source.stream)
                    delay = self.pacing.backoff_initial
                    if state in TERMINAL:
                        return state
                log.info("A2A task %r: the stream closed before the task ended; subscribing again", task_id)
            except (UnsupportedOperationError, TaskNotFoundError) as exc:
                # Refused: most likely the task has ended. Read it instead.
                state = await self._poll_quietly(task_id)
                if state in TERMINAL:
                    return state
                if isinstance(exc, TaskNotFoundError) and state is None:
                    raise AgentUnavailable(f"task {task_id}: not found") from None
            except (A2AError, httpx.HTTPError, OSError) as exc:
                log.info("A2A task %r: %r; trying again in %.1fs", task_id, _reason(exc), delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.pacing.backoff_max)

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
            async for event in self.client.send_message(request):
                data = to_json(event)
                task_id = task_id or _task_id(data)
                state = await self.handle(data, Source.stream) or state
                if state in TERMINAL or (push is not None and task_id):
                    break
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
            still_wanted()
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
        subscribing to each live task."""
        cursor = cursor or ContextCursor()
        live: dict[str, asyncio.Task[TaskState]] = {}
        try:
            while True:
                still_wanted()
                try:
                    for task in await self._list(context_id, await cursor.load()):
                        if accept is not None and not accept(task.context_id or task.id):
                            continue
                        data = {"task": to_json(task)}
                        state = await self.handle(data, Source.poll)
                        await cursor.seen(data["task"].get("status", {}).get("timestamp"))
                        task_id = task.id
                        running = live.get(task_id)
                        if state not in TERMINAL and (running is None or running.done()):
                            live[task_id] = asyncio.create_task(self.follow_task(task_id))
                except (A2AError, httpx.HTTPError, OSError) as exc:
                    log.info("A2A agent: ListTasks failed (%r); trying again", _reason(exc))
                for task_id in [t for t, job in live.items() if job.done()]:
                    job = live.pop(task_id)
                    if not job.cancelled() and job.exception() is not None:
                        log.info("A2A task %r: following stopped: %r", task_id, str(job.exception()))
                await asyncio.sleep(self.pacing.list_poll)
        finally:
            for job in live.values():
                job.cancel()
            await asyncio.gather(*live.values(), return_exceptions=True)

    async def _list(self, context_id: str | None, after: str | None) -> list[pb.Task]:
        tasks: list[pb.Task] = []
        token = ""
        while True:
            request = pb.ListTasksRequest(page_token=token)
            if context_id:
                request.context_id = context_id
            if after:
                request.status_timestamp_after.FromJsonString(after)
            response = await self.client.list_tasks(request)
            tasks.extend(response.tasks)
            token = response.next_page_token
            if not token:
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
    for key, field in (("task", "id"), ("statusUpdate", "taskId"), ("artifactUpdate", "taskId")):
        value = data.get(key, {}).get(field)
        if isinstance(value, str) and value:
            return value
    return None
