"""A followed A2A task answered and stopped from chat, against a real a2a-sdk agent: a
task waiting for input becomes a text ask whose answer reaches the agent; Stop cancels
the task."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TypeVar

from a2a.helpers.proto_helpers import new_task, new_text_message
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import a2a_pb2 as pb
from redis.asyncio import Redis

from a2a_agent import Agent
from progresscast.agents.a2a.apply import UpdateApplier
from progresscast.agents.a2a.follow import Follower, Pacing, agent_client
from progresscast.agents.a2a.mapping import TaskState
from progresscast.backoff import Backoff
from progresscast.model.asks import Actor, AskKind, AskState
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore

FAST = Pacing(backoff=Backoff(0.02, 0.1), safety_poll=0.05, list_poll=0.05, stop_poll=0.05)
ANA = Actor("telegram", "42", "7", "Ana")
QUESTION = "Which branch should I merge into?\nmain is frozen until Friday."
T = TypeVar("T")


class Conversing(AgentExecutor):
    """Asks which branch, waits for the answer (a second message on the task), then completes."""

    def __init__(self) -> None:
        self.heard: asyncio.Queue[str] = asyncio.Queue()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(new_task(context.task_id, context.context_id, pb.TASK_STATE_SUBMITTED))
            await updater.update_status(pb.TASK_STATE_WORKING)
            ask = new_text_message(QUESTION, context_id=context.context_id, task_id=context.task_id)
            await updater.update_status(pb.TASK_STATE_INPUT_REQUIRED, message=ask)
            return
        answer = context.get_user_input()
        await self.heard.put(answer)
        await updater.update_status(pb.TASK_STATE_WORKING)
        done = new_text_message(f"Merged into {answer}", context_id=context.context_id, task_id=context.task_id)
        await updater.update_status(pb.TASK_STATE_COMPLETED, message=done)

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise AssertionError("not canceled in this script")


class Working(AgentExecutor):
    """Works until canceled; records the cancel."""

    def __init__(self) -> None:
        self.canceled: asyncio.Queue[str] = asyncio.Queue()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id and context.context_id
        await event_queue.enqueue_event(new_task(context.task_id, context.context_id, pb.TASK_STATE_SUBMITTED))
        await TaskUpdater(event_queue, context.task_id, context.context_id).update_status(pb.TASK_STATE_WORKING)
        await asyncio.Event().wait()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        await self.canceled.put(context.task_id or "")
        await TaskUpdater(event_queue, context.task_id or "", context.context_id or "").cancel()


def applier(redis: Redis) -> UpdateApplier:
    return UpdateApplier(redis, agent_id=None, known_agents=frozenset({"main"}), default_agent="main")


async def until(read: Callable[[], Awaitable[T]], ok: Callable[[T], bool], what: str) -> T:
    for _ in range(1000):
        value = await read()
        if ok(value):
            return value
        await asyncio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}: {value!r}")


async def test_a_task_waiting_for_input_is_answered_from_chat(redis: Redis, store: CardStore) -> None:
    agent = await Agent([], executor=Conversing()).start()
    owner = Owner("main", "ctx-ask")
    try:
        async with agent_client(agent.url) as client:
            follower = Follower(client, applier(redis), pacing=FAST)
            job = asyncio.create_task(follower.send("merge the fix", context_id="ctx-ask"))
            asks, _ = await until(lambda: store.asks.all(owner), lambda a: bool(a[0]), "the ask")
            (ask,) = asks
            assert ask.kind is AskKind.text and ask.source == "a2a" and ask.state is AskState.open
            assert ask.prompt == "Which branch should I merge into? main is frozen until Friday."
            assert ask.detail == QUESTION
            assert (await store.view(owner)).stoppable
            await store.asks.answer(owner, ask.ask_id, ANA, text="dev")
            assert await asyncio.wait_for(agent.executor.heard.get(), 10) == "dev"
            _, state = await asyncio.wait_for(job, 10)
            assert state is TaskState.completed
            await follower.close()
        view = await until(lambda: store.view(owner), lambda v: v.run is RunState.completed, "the run's end")
        assert view.activity.headline == "Merged into dev" and view.activity.attention is None
        answered, _ = await store.asks.get(owner, ask.ask_id)
        assert answered is not None and answered.state is AskState.answered
    finally:
        await agent.stop()


async def test_stop_cancels_the_task(redis: Redis, store: CardStore) -> None:
    agent = await Agent([], executor=Working()).start()
    owner = Owner("main", "ctx-stop")
    try:
        async with agent_client(agent.url) as client:
            follower = Follower(client, applier(redis), pacing=FAST)
            job = asyncio.create_task(follower.send("work", context_id="ctx-stop"))
            view = await until(lambda: store.view(owner), lambda v: v.run is RunState.active, "the run")
            assert view.stoppable
            outcome, _ = await store.asks.stop(owner, ANA)
            assert outcome == "ok"
            assert await asyncio.wait_for(agent.executor.canceled.get(), 10) == view.run_id
            _, state = await asyncio.wait_for(job, 10)
            assert state is TaskState.canceled
            await follower.close()
        view = await until(lambda: store.view(owner), lambda v: v.run is RunState.canceled, "the run's end")
        assert view.stop is not None and view.stop.by.name == "Ana"
    finally:
        await agent.stop()


async def test_the_ask_is_withdrawn_when_the_task_is_answered_elsewhere(redis: Redis, store: CardStore) -> None:
    agent = await Agent([], executor=Conversing()).start()
    owner = Owner("main", "ctx-else")
    try:
        async with agent_client(agent.url) as client, agent_client(agent.url) as terminal:
            follower = Follower(client, applier(redis), pacing=FAST)
            job = asyncio.create_task(follower.send("merge the fix", context_id="ctx-else"))
            asks, _ = await until(lambda: store.asks.all(owner), lambda a: bool(a[0]), "the ask")
            task_id = (await store.view(owner)).run_id
            message = pb.Message(message_id="m2", role=pb.Role.ROLE_USER, parts=[pb.Part(text="main")],
                                 task_id=task_id, context_id="ctx-else")
            async for _ in terminal.send_message(pb.SendMessageRequest(message=message)):
                pass
            _, state = await asyncio.wait_for(job, 10)
            assert state is TaskState.completed
            ask, _ = await until(lambda: store.asks.get(owner, asks[0].ask_id),
                                 lambda a: a[0] is not None and a[0].state is not AskState.open, "the withdrawal")
            assert ask is not None and ask.state is AskState.withdrawn
            await follower.close()
    finally:
        await agent.stop()
