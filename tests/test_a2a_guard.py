"""A followed agent is not trusted: a real a2a-sdk server with a misleading card,
ListTasks pages that never end, silent or endless answers, and more live tasks than
the follower subscribes to."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import AsyncIterator

import pytest
from a2a.server.context import ServerCallContext
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import a2a_pb2 as pb
from redis.asyncio import Redis

from a2a_agent import Agent, gate, status
from a2a_updates import ts
from progresscast.agents.a2a.apply import UpdateApplier
from progresscast.agents.a2a.follow import AgentUnavailable, Follower, Pacing, agent_client
from progresscast.agents.a2a.guard import MAX_BODY, MAX_EVENT
from progresscast.backoff import Backoff
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from test_a2a_follow import run_cli

FAST = Pacing(backoff=Backoff(0.02, 0.1), safety_poll=0.05, list_poll=0.05)


def applier(redis: Redis) -> UpdateApplier:
    return UpdateApplier(redis, agent_id="main", known_agents=frozenset({"main"}), default_agent="main")


def point_elsewhere(agent: Agent, url: str) -> None:
    """The agent's card (served fresh at each request) now names `url` as its interface."""
    del agent.card.supported_interfaces[:]
    agent.card.supported_interfaces.add(url=url, protocol_binding="JSONRPC", protocol_version="1.0")


@pytest.fixture
async def two_agents() -> AsyncIterator[tuple[Agent, Agent]]:
    liar = await Agent([]).start()
    victim = await Agent([]).start()
    yield liar, victim
    await liar.stop()
    await victim.stop()


async def test_a_card_naming_another_origin_is_refused(two_agents: tuple[Agent, Agent]) -> None:
    liar, victim = two_agents
    point_elsewhere(liar, f"{victim.url}/rpc")  # same host, another port: another origin
    with pytest.raises(AgentUnavailable) as refused:
        async with agent_client(liar.url) as client:
            await client.list_tasks(pb.ListTasksRequest())
    assert f"its card names the interface '{victim.url}/rpc', which is not on {liar.url}" in str(refused.value)
    assert "allowedHosts" in str(refused.value)
    assert victim.cutter.requests == []  # not one request went there


async def test_allowed_hosts_lets_a_card_point_elsewhere(two_agents: tuple[Agent, Agent]) -> None:
    liar, victim = two_agents
    point_elsewhere(liar, f"{victim.url}/rpc")
    async with agent_client(liar.url, allowed_hosts=[f"127.0.0.1:{victim.port}"]) as client:
        await client.list_tasks(pb.ListTasksRequest())
    assert "/rpc" in victim.cutter.requests
    with pytest.raises(AgentUnavailable):  # another port of that host is not listed
        async with agent_client(liar.url, allowed_hosts=[f"127.0.0.1:{victim.port + 1}"]):
            pass


async def test_the_follow_command_refuses_a_misleading_card_in_one_line(
    redis_url: str, two_agents: tuple[Agent, Agent]
) -> None:
    liar, victim = two_agents
    point_elsewhere(liar, f"{victim.url}/rpc")
    code, _out, err = await run_cli("--redis", redis_url, "a2a", "follow", liar.url, "--task", "x", env={})
    assert code == 1 and err.count("\n") == 1 and "its card names the interface" in err, err
    assert victim.cutter.requests == []


class EndlessPages(InMemoryTaskStore):
    """ListTasks answers its tasks, and always one more page: the same token again
    (`repeat`), or a new one each time."""

    def __init__(self, *, repeat: bool) -> None:
        super().__init__()
        self.repeat = repeat
        self.pages = 0

    async def list(self, params: pb.ListTasksRequest, context: ServerCallContext) -> pb.ListTasksResponse:
        response = await super().list(pb.ListTasksRequest(context_id=params.context_id), context)
        self.pages += 1
        response.next_page_token = "again" if self.repeat else f"page-{self.pages}"
        return response


@pytest.mark.parametrize("repeat", [True, False], ids=["repeated-token", "new-token-each-page"])
async def test_list_tasks_pages_that_never_end_are_cut_short(
    repeat: bool, redis: Redis, store: CardStore, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "progresscast.agents.a2a")
    pages = EndlessPages(repeat=repeat)
    go_on = asyncio.Event()
    agent = await Agent([status(at=ts(1), plan=[{"label": "Listed", "state": "active"}]), gate(go_on)],
                        tasks=pages).start()
    try:
        async with agent_client(agent.url) as starter, agent_client(agent.url) as watcher:
            start = asyncio.create_task(
                Follower(starter, applier(redis), pacing=FAST).send("go", context_id="ctx-pages")
            )
            await asyncio.wait_for(agent.executor.started.get(), 10)
            follower = Follower(watcher, applier(redis), pacing=Pacing(**{**FAST.__dict__, "max_pages": 5}))
            watch = asyncio.create_task(follower.follow_context("ctx-pages"))
            try:
                owner = Owner("main", "ctx-pages")
                async with asyncio.timeout(10):
                    while (await store.get(owner)) is None:  # what the pages named was applied
                        await asyncio.sleep(0.02)
                    while not any("ListTasks" in r.getMessage() for r in caplog.records):
                        await asyncio.sleep(0.02)
            finally:
                watch.cancel()
                start.cancel()
                go_on.set()
                await asyncio.gather(watch, start, return_exceptions=True)
        said = [r.getMessage() for r in caplog.records if "ListTasks" in r.getMessage()]
        if repeat:
            assert said[0].startswith("A2A agent: ListTasks named page token 'again' again after 2 pages"), said
        else:
            assert said[0].startswith("A2A agent: ListTasks still had more after 5 pages"), said
        assert len(said) == 1  # said once, however many listings it spoiled
    finally:
        await agent.stop()


async def begin(client, context_id: str) -> None:
    """Start a task at the agent, as someone else would, and leave once it is known."""
    message = pb.Message(message_id=str(uuid.uuid4()), role=pb.Role.ROLE_USER, parts=[pb.Part(text="go")],
                         context_id=context_id)
    stream = client.send_message(pb.SendMessageRequest(message=message))
    await anext(stream)
    await stream.aclose()


async def test_live_subscriptions_are_capped_per_agent(redis: Redis, store: CardStore,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "progresscast.agents.a2a")
    go_on = asyncio.Event()
    agent = await Agent([status(at=ts(1), plan=[{"label": "Working", "state": "active"}]), gate(go_on)]).start()
    try:
        async with agent_client(agent.url) as starter, agent_client(agent.url) as watcher:
            for n in range(3):
                await asyncio.wait_for(begin(starter, f"ctx-cap-{n}"), 10)
            before = agent.cutter.streams_started
            follower = Follower(watcher, applier(redis), pacing=Pacing(**{**FAST.__dict__, "max_tasks": 2}))
            watch = asyncio.create_task(follower.follow_context(None))
            try:
                async with asyncio.timeout(10):
                    # every task is applied from the listing ...
                    while not all([await store.get(Owner("main", f"ctx-cap-{n}")) for n in range(3)]):
                        await asyncio.sleep(0.02)
                    while agent.cutter.streams_started - before < 2:
                        await asyncio.sleep(0.02)
                for _ in range(20):  # ... and no third subscription follows, listing after listing
                    await asyncio.sleep(FAST.list_poll)
                    assert agent.cutter.streams_open <= 2
                assert agent.cutter.streams_started - before == 2
            finally:
                watch.cancel()
                await asyncio.gather(watch, return_exceptions=True)
        said = [r.getMessage() for r in caplog.records if "a2a.maxTasks" in r.getMessage()]
        assert len(said) == 1 and said[0].startswith("A2A agent: 2 tasks followed live already"), said
    finally:
        go_on.set()
        await agent.stop()


async def test_a_silent_stream_is_subscribed_to_again(redis: Redis) -> None:
    go_on = asyncio.Event()
    agent = await Agent([status(at=ts(1)), gate(go_on)]).start()
    try:
        async with agent_client(agent.url) as client:  # (its connections' own read timeout: the default)
            follower = Follower(client, applier(redis), pacing=Pacing(**{**FAST.__dict__, "idle_timeout": 0.3}))
            job = asyncio.create_task(follower.send("go", context_id="ctx-idle"))
            try:
                async with asyncio.timeout(10):
                    while agent.cutter.streams_started < 4:  # the send's stream, then three more
                        await asyncio.sleep(0.02)
                assert agent.cutter.streams_open <= 1
            finally:
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)
    finally:
        go_on.set()
        await agent.stop()


async def test_an_agent_that_never_answers_is_given_up_on() -> None:
    """Accepts the connection, reads the request, says nothing: neither its card nor a
    call to an interface there is waited for past the idle time."""
    held: list[asyncio.StreamWriter] = []

    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        held.append(writer)

    server = await asyncio.start_server(silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    agent = await Agent([]).start()
    point_elsewhere(agent, f"http://127.0.0.1:{port}/rpc")
    try:
        with pytest.raises(AgentUnavailable) as gone:
            async with asyncio.timeout(10):
                async with agent_client(f"http://127.0.0.1:{port}", idle_timeout=0.5):
                    pass
        assert "no answer in time" in str(gone.value) or "timed out" in str(gone.value), str(gone.value)
        async with agent_client(agent.url, idle_timeout=0.5, allowed_hosts=[f"127.0.0.1:{port}"]) as client:
            follower = Follower(client, None, pacing=FAST)  # type: ignore[arg-type]
            with pytest.raises(AgentUnavailable) as gone:
                async with asyncio.timeout(10):
                    await follower.register_push("t-1", "http://127.0.0.1:9/v1/a2a/push", "token")
        assert "timed out" in str(gone.value), str(gone.value)
    finally:
        for writer in held:
            writer.close()
        server.close()
        await agent.stop()


async def test_an_oversized_card_is_not_read_to_its_end() -> None:
    agent = Agent([])
    agent.card.description = "x" * (MAX_BODY + 1)
    await agent.start()
    try:
        with pytest.raises(AgentUnavailable) as refused:
            async with agent_client(agent.url):
                pass
        assert f"over {MAX_BODY}" in str(refused.value), str(refused.value)
    finally:
        await agent.stop()


async def test_an_oversized_stream_event_drops_the_stream(redis: Redis, store: CardStore,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, "progresscast.agents.a2a")
    go_on = asyncio.Event()
    agent = await Agent([gate(go_on), status(at=ts(2), text="y" * (MAX_EVENT + 1))]).start()
    try:
        async with agent_client(agent.url) as client:
            follower = Follower(client, applier(redis), pacing=FAST)
            job = asyncio.create_task(follower.send("go", context_id="ctx-huge"))
            try:
                await asyncio.wait_for(agent.executor.started.get(), 10)
                go_on.set()
                async with asyncio.timeout(10):
                    while not any(f"one event of the stream is over {MAX_EVENT} bytes" in r.getMessage()
                                  for r in caplog.records):
                        await asyncio.sleep(0.02)
            finally:
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)
        view = await store.view(Owner("main", "ctx-huge"))
        assert view.activity.headline is None or "yyyy" not in view.activity.headline
    finally:
        await agent.stop()

