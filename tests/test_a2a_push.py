"""Push notifications: the a2a-sdk server's own push sender posting to the gateway."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from a2a.types import a2a_pb2 as pb
from redis.asyncio import Redis

from a2a_agent import Agent, gate, status
from a2a_updates import artifact, snapshot, steps, ts
from conftest import all_keys
from progresscast.agents.a2a.apply import UpdateApplier
from progresscast.agents.a2a.follow import Follower, Pacing, agent_client
from progresscast.config.agents import AgentSettings
from progresscast.config.gateway import GatewaySettings, GatewayToken
from progresscast.config.settings import Settings
from progresscast.gateway.server import run_gateway
from progresscast.http.server import address, bind
from progresscast.model.card import Status
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore


def settings() -> Settings:
    return Settings(
        agents=AgentSettings(default="main", known=["main", "research"]),
        gateway=GatewaySettings(tokens=[
            GatewayToken(token="agent-push", scopes=["operator.write"], sessions=["ctx-p*"]),
            GatewayToken(token="reader", scopes=["operator.read"], sessions=["*"]),
            GatewayToken(token="elsewhere", scopes=["operator.write"], sessions=["other-*"]),
        ]),
    )


@pytest.fixture
async def gateway(redis: Redis) -> AsyncIterator[str]:
    sock = bind("127.0.0.1:0")
    started = asyncio.Event()
    job = asyncio.create_task(run_gateway(settings(), redis, sock=sock, started=started))
    await started.wait()
    yield address(sock)
    job.cancel()
    await asyncio.gather(job, return_exceptions=True)


@pytest.mark.backends
async def test_the_agents_push_sender_reaches_the_card(gateway: str, redis: Redis, store: CardStore) -> None:
    go_on = asyncio.Event()
    agent = await Agent([status(at=ts(1), plan=steps(3, 0)), gate(go_on), status(at=ts(2), plan=steps(3, 1), text="Halfway"),
                         status("TASK_STATE_COMPLETED", at=ts(3), plan=steps(3, 3))]).start()
    try:
        async with agent_client(agent.url) as client:
            # The follower only registers the push config, then polls slowly as a safety net.
            follower = Follower(client, UpdateApplier(redis, agent_id="research", known_agents=frozenset({"main", "research"}),
                                                      default_agent="main"), pacing=Pacing(safety_poll=3600))
            push = pb.TaskPushNotificationConfig(
                url=f"{gateway}/v1/a2a/push?agent=research", token="agent-push")
            task_id, _ = await follower.send("go", context_id="ctx-push", push=push)
            go_on.set()
            owner = Owner("research", "ctx-push")
            for _ in range(500):
                if (await store.view(owner)).run is RunState.completed:
                    break
                await asyncio.sleep(0.01)
            view = await store.view(owner)
            assert view.run is RunState.completed and view.run_id == task_id
            assert [s.status for s in view.card.plan] == [Status.completed] * 3
            # the newest status (completed) carried no message: "Halfway" is not the status now
            assert view.activity.headline is None
    finally:
        await agent.stop()


async def test_a_wrong_token_is_refused_and_nothing_applied(gateway: str, redis: Redis, store: CardStore) -> None:
    body = snapshot("t1", at=ts(1), plan=steps(2, 0), context="ctx-p1")
    async with httpx.AsyncClient(base_url=gateway) as http:
        for headers, code in [
            ({}, 401),
            ({"X-A2A-Notification-Token": "wrong"}, 401),
            ({"X-A2A-Notification-Token": "reader"}, 403),
            ({"A2A-Notification-Token": "elsewhere"}, 403),
        ]:
            answer = await http.post("/v1/a2a/push", json=body, headers=headers)
            assert answer.status_code == code, (headers, answer.text)
        assert await all_keys(redis, "pc:{*") == []
        answer = await http.post("/v1/a2a/push", json={"statusUpdate": {"taskId": "t1", "status": {"state": "busy"}}},
                                 headers={"Authorization": "Bearer agent-push"})
        assert answer.status_code == 400 and answer.json()["error"]["field"] == "statusUpdate.status.state"
        answer = await http.post("/v1/a2a/push", content=b"{nope", headers={"Authorization": "Bearer agent-push"})
        assert answer.status_code == 400
        assert await store.get(Owner("main", "ctx-p1")) is None

        answer = await http.post("/v1/a2a/push", json=body, headers={"A2A-Notification-Token": "agent-push"})
        assert answer.status_code == 200 and answer.json()["result"]["outcome"] == "applied"
        again = await http.post("/v1/a2a/push", json=body, headers={"Authorization": "Bearer agent-push"})
        assert again.json()["result"]["outcome"] == "duplicate"
        untimed = await http.post("/v1/a2a/push", json=snapshot("t1", context="ctx-p1"),
                                  headers={"Authorization": "Bearer agent-push"})
        assert untimed.json()["result"]["outcome"] == "untimed"
        chunk = await http.post("/v1/a2a/push", json=artifact("t1", "hi", context="ctx-p1"),
                                headers={"Authorization": "Bearer agent-push"})
        assert chunk.json()["result"]["outcome"] == "applied"
    assert (await store.activity(Owner("main", "ctx-p1"))).answer == "hi"


async def test_push_registered_on_a_running_task(gateway: str, redis: Redis, store: CardStore) -> None:
    go_on = asyncio.Event()
    agent = await Agent([status(at=ts(1), plan=steps(2, 0)), gate(go_on),
                         status("TASK_STATE_COMPLETED", at=ts(2), plan=steps(2, 2), text="Done")]).start()
    known = frozenset({"main", "research"})
    try:
        async with agent_client(agent.url) as starter, agent_client(agent.url) as client:
            start = asyncio.create_task(
                Follower(starter, UpdateApplier(redis, agent_id="research", known_agents=known, default_agent="main"),
                         pacing=Pacing(safety_poll=3600)).send("go", context_id="ctx-preg"))
            task_id = await agent.executor.started.get()
            follower = Follower(client, UpdateApplier(redis, agent_id=None, known_agents=known, default_agent="main"),
                                pacing=Pacing(safety_poll=3600))
            await follower.register_push(task_id, f"{gateway}/v1/a2a/push", "agent-push")
            go_on.set()
            owner = Owner("main", "ctx-preg")  # only the push writes the main agent's card
            for _ in range(500):
                if (await store.view(owner)).run is RunState.completed:
                    break
                await asyncio.sleep(0.01)
            view = await store.view(owner)
            assert view.run is RunState.completed and view.activity.headline == "Done"
            await start
    finally:
        await agent.stop()
