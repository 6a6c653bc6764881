"""A real a2a-sdk agent on loopback for tests: Starlette, DefaultRequestHandler and a
scripted AgentExecutor that publishes through TaskUpdater."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import uvicorn
from a2a.helpers.proto_helpers import new_task, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes.agent_card_routes import create_agent_card_routes
from a2a.server.routes.jsonrpc_routes import create_jsonrpc_routes
from a2a.server.routes.rest_routes import create_rest_routes
from a2a.server.tasks import InMemoryPushNotificationConfigStore, InMemoryTaskStore, TaskUpdater
from a2a.server.tasks.base_push_notification_sender import BasePushNotificationSender
from a2a.types import a2a_pb2 as pb
from starlette.applications import Starlette
from starlette.types import Message, Receive, Scope, Send

from progresscast.agents.a2a.mapping import EXTENSION_URI

Action = Callable[[TaskUpdater], Awaitable[None]]

STATES = {name: pb.TaskState.Value(name) for name in pb.TaskState.keys()}  # noqa: SIM118 (a protobuf enum)


def status(state: str = "TASK_STATE_WORKING", *, at: str | None = None, plan: list[dict[str, Any]] | None = None,
           text: str | None = None) -> Action:
    async def act(updater: TaskUpdater) -> None:
        message = new_text_message(text, context_id=updater.context_id, task_id=updater.task_id) if text else None
        metadata = {EXTENSION_URI: {"steps": plan}} if plan is not None else None
        await updater.update_status(STATES[state], message=message, timestamp=at, metadata=metadata)
    return act


def chunk(text: str, *, append: bool = False, last: bool = False) -> Action:
    async def act(updater: TaskUpdater) -> None:
        await updater.add_artifact([new_text_part(text)], artifact_id="answer", append=append, last_chunk=last)
    return act


def gate(event: asyncio.Event) -> Action:
    async def act(updater: TaskUpdater) -> None:
        await event.wait()
    return act


class ScriptedExecutor(AgentExecutor):
    """Plays `script` for every task it is asked to run; `started` gets each task id."""

    def __init__(self, script: list[Action]) -> None:
        self.script = script
        self.started: asyncio.Queue[str] = asyncio.Queue()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id, pb.TaskState.TASK_STATE_SUBMITTED))
        await self.started.put(context.task_id)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        for action in self.script:
            await action(updater)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = TaskUpdater(event_queue, context.task_id or "", context.context_id or "")
        await updater.cancel()


@dataclass
class StreamCutter:
    """ASGI middleware: the next `cuts` event streams are closed by the server after
    `after` events, as a dropped connection would end them."""

    app: Any
    cuts: int = 0
    after: int = 2
    requests: list[str] = field(default_factory=list)
    streams_started: int = 0
    """Event streams answered so far."""
    streams_open: int = 0
    """Event streams answered and not yet ended."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        self.requests.append(scope["path"])
        state = {"sse": False, "events": 0, "closed": False, "cut": False}

        async def cutting_send(message: Message) -> None:
            if state["closed"]:
                return
            if message["type"] == "http.response.start":
                headers = dict(message.get("headers", []))
                state["sse"] = b"text/event-stream" in headers.get(b"content-type", b"")
                if state["sse"]:
                    self.streams_started += 1
                    self.streams_open += 1
                if state["sse"] and self.cuts > 0:
                    self.cuts -= 1
                    state["cut"] = True
            elif message["type"] == "http.response.body" and state["cut"]:
                if message.get("body", b"").lstrip().startswith(b"data:"):
                    state["events"] += 1
                if state["events"] >= self.after:
                    await send({**message, "more_body": False})
                    state["closed"] = True
                    return
            await send(message)

        try:
            await self.app(scope, receive, cutting_send)
        finally:
            if state["sse"]:
                self.streams_open -= 1


class Agent:
    """The running agent: its URL, its executor, its task store."""

    def __init__(
        self, script: list[Action], *, binding: str = "JSONRPC", port: int = 0, tasks: InMemoryTaskStore | None = None,
        executor: AgentExecutor | None = None,
    ) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.executor: Any = executor or ScriptedExecutor(script)
        self.tasks = tasks if tasks is not None else InMemoryTaskStore()
        interfaces = {
            "JSONRPC": pb.AgentInterface(url=f"{self.url}/rpc", protocol_binding="JSONRPC", protocol_version="1.0"),
            "HTTP+JSON": pb.AgentInterface(url=f"{self.url}/rest", protocol_binding="HTTP+JSON", protocol_version="1.0"),
        }
        order = [binding] + [b for b in interfaces if b != binding]
        self.card = pb.AgentCard(
            name="Scripted agent",
            description="plays a script",
            version="1.0.0",
            supported_interfaces=[interfaces[b] for b in order],
            capabilities=pb.AgentCapabilities(
                streaming=True,
                push_notifications=True,
                extensions=[pb.AgentExtension(uri=EXTENSION_URI, description="progress plans")],
            ),
            default_input_modes=["text/plain"],
            default_output_modes=["text/plain"],
            skills=[pb.AgentSkill(id="work", name="work", description="works", tags=["work"])],
        )
        self.push_http = httpx.AsyncClient()
        push_store = InMemoryPushNotificationConfigStore()
        self.handler = DefaultRequestHandler(
            agent_executor=self.executor,
            task_store=self.tasks,
            agent_card=self.card,
            push_config_store=push_store,
            push_sender=BasePushNotificationSender(self.push_http, push_store),
        )
        routes = [
            *create_agent_card_routes(self.card),
            *create_jsonrpc_routes(self.handler, "/rpc"),
            *create_rest_routes(self.handler, path_prefix="/rest"),
        ]
        self.cutter = StreamCutter(Starlette(routes=routes))
        self.server = uvicorn.Server(uvicorn.Config(self.cutter, log_level="warning", lifespan="off"))
        self._serving: asyncio.Task[None] | None = None

    async def start(self) -> Agent:
        self._serving = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started:
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        self.server.should_exit = True
        self.server.force_exit = True
        if self._serving:
            await self._serving
        await self.push_http.aclose()
        self.sock.close()
