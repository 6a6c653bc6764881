"""Following a real a2a-sdk agent on loopback: both bindings, dropped streams,
finished tasks, contexts, and the `a2a follow` command itself."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator

import pytest
from redis.asyncio import Redis

from a2a_agent import Agent, chunk, gate, status
from a2a_updates import steps, ts
from progresscast.agents.a2a.apply import UpdateApplier
from progresscast.agents.a2a.follow import Follower, Pacing, agent_client
from progresscast.agents.a2a.mapping import TaskState
from progresscast.backoff import Backoff
from progresscast.model.card import Status
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore

FAST = Pacing(backoff=Backoff(0.02, 0.1), safety_poll=0.05, list_poll=0.05)
LONG = "L" * 150


def long_plan(active: int) -> list[dict]:
    return steps(22, active, label=LONG + " {i}")


def full_script() -> list:
    return [
        status(at=ts(1), plan=long_plan(0), text="Reading the ticket"),
        status(at=ts(3), plan=long_plan(2), text="Fixing"),
        status(at=ts(3), plan=long_plan(2), text="Fixing"),  # a duplicate
        status("TASK_STATE_INPUT_REQUIRED", at=ts(4), plan=long_plan(3), text="Which branch?"),
        status(at=ts(5), plan=long_plan(5), text="Writing the answer"),
        # late, older: its status is ignored. (No plan: the agent's server would keep an
        # older plan it received last as the task's, and its snapshot would date it
        # @6 — a plan the follower rightly shows; late plans are tested in test_a2a_order.)
        status(at=ts(2), text="stale"),
        chunk("The fix "),
        chunk("is in ", append=True),
        chunk("main.", append=True, last=True),
        status("TASK_STATE_COMPLETED", at=ts(6), text="Done"),  # no plan: the card keeps its own
    ]


def applier(redis: Redis, agent: str | None = None) -> UpdateApplier:
    return UpdateApplier(redis, agent_id=agent, known_agents=frozenset({"main", "research"}), default_agent="main")


@pytest.fixture
async def agent(request: pytest.FixtureRequest) -> AsyncIterator[Agent]:
    marker = request.node.get_closest_marker("binding")
    binding = marker.args[0] if marker else "JSONRPC"
    running = await Agent(full_script(), binding=binding).start()
    yield running
    await running.stop()


def check_final(view) -> None:
    assert view.card is not None and len(view.card.plan) == 20
    first = view.card.plan[0]
    assert len(first.step) == 120 and first.step.endswith("…")
    assert [s.status for s in view.card.plan[:7]] == [Status.completed] * 5 + [Status.in_progress, Status.pending]
    assert view.run is RunState.completed
    assert view.activity.answer == "The fix is in main."
    assert view.activity.headline == "Done" and view.activity.attention is None


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
async def test_send_and_follow_over_both_bindings(binding: str, redis: Redis, store: CardStore) -> None:
    agent = await Agent(full_script(), binding=binding).start()
    try:
        async with agent_client(agent.url) as client:
            follower = Follower(client, applier(redis), pacing=FAST)
            task_id, state = await follower.send("fix it", context_id="ctx-7")
        assert state is TaskState.completed
        check_final(await store.view(Owner("main", "ctx-7")))
        prefix = "/rpc" if binding == "JSONRPC" else "/rest"
        assert any(p.startswith(prefix) for p in agent.cutter.requests)
        # The server kept the late, older plan; a follower asking now must not regress.
        async with agent_client(agent.url) as client:
            await Follower(client, applier(redis), pacing=FAST).poll_task(task_id)
        check_final(await store.view(Owner("main", "ctx-7")))
    finally:
        await agent.stop()


async def test_waiting_for_input_shows_while_the_task_waits(redis: Redis, store: CardStore) -> None:
    go_on = asyncio.Event()
    agent = await Agent([
        status(at=ts(1), plan=steps(3, 0)),
        status("TASK_STATE_INPUT_REQUIRED", at=ts(2), text="Which branch?"),
        gate(go_on),
        status("TASK_STATE_COMPLETED", at=ts(3), plan=steps(3, 3)),
    ]).start()
    try:
        async with agent_client(agent.url) as client:
            follower = Follower(client, applier(redis), pacing=FAST)
            job = asyncio.create_task(follower.send("go", context_id="ctx-w"))
            owner = Owner("main", "ctx-w")
            for _ in range(500):
                if (await store.view(owner)).activity.attention:
                    break
                await asyncio.sleep(0.01)
            assert (await store.view(owner)).activity.attention == "Waiting for input: Which branch?"
            go_on.set()
            assert (await job)[1] is TaskState.completed
        view = await store.view(owner)
        assert view.activity.attention is None and view.run is RunState.completed
    finally:
        await agent.stop()


async def test_a_cut_stream_is_resubscribed_and_a_finished_task_is_read(redis: Redis, store: CardStore) -> None:
    go_on = asyncio.Event()
    script = full_script()
    script.insert(2, gate(go_on))
    agent = await Agent(script).start()
    agent.cutter.cuts, agent.cutter.after = 1, 2  # the first stream dies after two events
    try:
        async with agent_client(agent.url) as client:
            follower = Follower(client, applier(redis), pacing=FAST)
            job = asyncio.create_task(follower.send("go", context_id="ctx-c"))
            while not any(":subscribe" in p or p == "/rpc" for p in agent.cutter.requests[2:]):
                await asyncio.sleep(0.01)
            go_on.set()
            _, state = await job
        assert state is TaskState.completed
        check_final(await store.view(Owner("main", "ctx-c")))

        # A task that already ended: subscribing is refused, GetTask answers instead.
        task_id = agent.executor.started.get_nowait()
        fresh = Owner("research", "ctx-c")
        async with agent_client(agent.url) as client:
            assert await Follower(client, applier(redis, "research"), pacing=FAST).follow_task(task_id) is TaskState.completed
        view = await store.view(fresh)
        # GetTask answers what the server kept: the last plan it received.
        assert view.run is RunState.completed and view.card is not None
        assert view.card.plan[5].status is Status.in_progress
    finally:
        await agent.stop()


@pytest.mark.backends
async def test_follow_a_context(redis: Redis, store: CardStore) -> None:
    go_on = asyncio.Event()
    agent = await Agent([status(at=ts(1), plan=steps(2, 0)), gate(go_on),
                         status("TASK_STATE_COMPLETED", at=ts(2), plan=steps(2, 2))]).start()
    try:
        async with agent_client(agent.url) as starter, agent_client(agent.url) as watcher:
            sender = Follower(starter, applier(redis, "research"), pacing=FAST)
            start = asyncio.create_task(sender.send("go", context_id="ctx-x"))
            follower = Follower(watcher, applier(redis), pacing=FAST)
            watch = asyncio.create_task(follower.follow_context("ctx-x"))
            owner = Owner("main", "ctx-x")
            for _ in range(500):
                if await store.get(owner):
                    break
                await asyncio.sleep(0.01)
            assert (await store.get(owner)).plan[0].status is Status.in_progress
            go_on.set()
            await start
            for _ in range(500):
                if (await store.view(owner)).run is RunState.completed:
                    break
                await asyncio.sleep(0.01)
            assert (await store.view(owner)).run is RunState.completed
            watch.cancel()
            await asyncio.gather(watch, return_exceptions=True)
    finally:
        await agent.stop()


async def run_cli(*args: str, env: dict[str, str]) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env={**os.environ, **env},
    )
    out, err = await proc.communicate()
    return proc.returncode or 0, out.decode(), err.decode()


async def test_the_follow_command(redis_url: str, redis: Redis, store: CardStore, agent: Agent) -> None:
    code, _out, err = await run_cli("--redis", redis_url, "a2a", "follow", agent.url, "--send", "fix it", env={})
    assert code == 0, err
    last = err.strip().splitlines()[-1]
    assert last.endswith(" completed — Done") and "plan 5/20 — Writing the answer" in err, err
    task_id = agent.executor.started.get_nowait()
    context = last.split(":")[2]
    check_final(await store.view(Owner("main", context)))
    code, _, err = await run_cli("--redis", redis_url, "a2a", "follow", agent.url, "--task", task_id, "--quiet",
                                 "--agent", "main", env={})
    assert code == 0 and err == ""


async def test_an_unreachable_agent_is_one_line(redis_url: str) -> None:
    import socket

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    code, _out, err = await run_cli("--redis", redis_url, "a2a", "follow", f"http://127.0.0.1:{port}", "--task", "x", env={})
    assert code == 1 and err.count("\n") == 1 and "agent card" in err and "connection" in err, err


async def test_a_bad_agent_card_is_one_line(redis_url: str) -> None:
    import socket

    import uvicorn
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def card(request):  # a card that offers only gRPC
        return JSONResponse({"name": "x", "description": "x", "version": "1", "supportedInterfaces": [
            {"url": "grpc://127.0.0.1:1", "protocolBinding": "GRPC", "protocolVersion": "1.0"}],
            "capabilities": {}, "defaultInputModes": [], "defaultOutputModes": [], "skills": []})

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(Starlette(routes=[Route("/.well-known/agent-card.json", card)]),
                                           log_level="warning", lifespan="off"))
    job = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        code, _out, err = await run_cli("--redis", redis_url, "a2a", "follow", url, "--task", "x", env={})
    finally:
        server.should_exit = True
        await job
        sock.close()
    assert code == 1 and err.count("\n") == 1 and "neither JSON-RPC nor HTTP+JSON" in err, err
