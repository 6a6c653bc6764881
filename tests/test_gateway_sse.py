"""GET /v1/events: Server-Sent Events over a real uvicorn on loopback."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis
from starlette.applications import Starlette

from progresscast.gateway import create_app
from progresscast.gateway.server import serve_app
from progresscast.http.server import address, bind
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from test_gateway_rpc import gateway_settings


@dataclass
class Live:
    base: str
    app: Starlette

    @property
    def hub(self) -> Any:
        return self.app.state.gateway.hub


@asynccontextmanager
async def serving(redis: Redis, heartbeat: float = 15.0, **gateway: object) -> AsyncIterator[Live]:
    app = create_app(gateway_settings(**gateway), redis, heartbeat=heartbeat)
    sock = bind("127.0.0.1:0")
    base = address(sock)
    started = asyncio.Event()
    task = asyncio.create_task(serve_app(app, sock, started=started))
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield Live(base, app)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


@pytest.fixture
async def live(redis: Redis) -> AsyncIterator[Live]:
    async with serving(redis) as server:
        yield server


@dataclass
class Frame:
    event: str | None = None
    data: str = ""
    id: str | None = None
    comments: list[str] = field(default_factory=list)

    @property
    def json(self) -> Any:
        return json.loads(self.data)


class Stream:
    """Reads SSE frames from a streaming httpx response."""

    def __init__(self, response: httpx.Response) -> None:
        self.response = response
        self.lines = response.aiter_lines()

    async def frame(self, timeout: float = 5.0) -> Frame:
        frame = Frame()
        async with asyncio.timeout(timeout):
            async for line in self.lines:
                if line == "":
                    if frame.event or frame.data or frame.comments:
                        return frame
                    continue
                name, _, value = line.partition(":")
                value = value.removeprefix(" ")
                if name == "":
                    frame.comments.append(value)
                elif name == "event":
                    frame.event = value
                elif name == "data":
                    frame.data += value
                elif name == "id":
                    frame.id = value
        raise AssertionError("the stream ended")

    async def event(self, timeout: float = 5.0) -> Frame:
        """The next frame that is an event (skipping comments)."""
        deadline = time.monotonic() + timeout
        while True:
            frame = await self.frame(max(0.01, deadline - time.monotonic()))
            if frame.event:
                return frame


@asynccontextmanager
async def subscribe(base: str, token: str = "writer", **params: str) -> AsyncIterator[Stream]:
    headers = {"Authorization": f"Bearer {token}"}
    if "last_event_id" in params:
        headers["Last-Event-ID"] = params.pop("last_event_id")
    async with httpx.AsyncClient(base_url=base, timeout=10) as client:
        async with client.stream("GET", "/v1/events", params=params, headers=headers) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            stream = Stream(response)
            first = await stream.frame()
            assert "connected" in first.comments  # from here on, every write is delivered
            yield stream


async def rpc(base: str, method: str, **params: Any) -> Any:
    async with httpx.AsyncClient(base_url=base) as client:
        response = await client.post("/v1/rpc", json={"method": method, "params": params}, headers={"Authorization": "Bearer writer"})
    body = response.json()
    assert body["ok"], body
    return body["result"]


@pytest.mark.backends
async def test_a_put_reaches_a_subscribed_client_within_one_second(live: Live) -> None:
    async with subscribe(live.base, sessionKey="ticket-1") as stream:
        began = time.monotonic()
        await rpc(live.base, "progressCard.put", sessionKey="ticket-1", markdown="hello")
        frame = await stream.event(timeout=1.0)
        assert time.monotonic() - began < 1.0
        assert frame.event == "progressCard.changed"
        assert frame.json == {"sessionKey": "ticket-1", "agentId": "main", "displayKey": "agent:main:ticket-1", "revision": 1}
        assert frame.id and "-" in frame.id
        await rpc(live.base, "progressCard.put", sessionKey="ticket-1")  # a clear
        cleared = await stream.event(timeout=1.0)
        assert cleared.json["revision"] is None


async def test_only_the_owners_events_are_sent(live: Live, store: CardStore) -> None:
    async with subscribe(live.base, sessionKey="ticket-1", agentId="research") as stream:
        await store.put(Owner("main", "ticket-1"), CardInput.parse({"markdown": "same key, other agent"}))
        await store.put(Owner("research", "other"), CardInput.parse({"markdown": "other key"}))
        await store.put(Owner("research", "ticket-1"), CardInput.parse({"markdown": "mine"}))
        frame = await stream.event()
        assert frame.json["agentId"] == "research" and frame.json["sessionKey"] == "ticket-1"


async def test_activity_and_runs_are_refresh_hints_too(live: Live) -> None:
    async with subscribe(live.base, sessionKey="agent:main:ticket-1") as stream:
        await rpc(live.base, "run.start", sessionKey="ticket-1", runId="r1")
        await rpc(live.base, "activity.put", sessionKey="ticket-1", headline="Working")
        await rpc(live.base, "run.end", sessionKey="ticket-1", runId="r1", state="canceled")
        kinds = [(await stream.event()).event for _ in range(3)]
        assert kinds == ["run.started", "activity.changed", "run.ended"]


async def test_heartbeats_flow_while_nothing_happens(redis: Redis) -> None:
    async with serving(redis, heartbeat=0.2) as server, subscribe(server.base, sessionKey="ticket-1") as stream:
        frame = await stream.frame(timeout=2)
        assert frame.comments == ["heartbeat"]


async def test_a_closed_client_is_noticed_and_unsubscribed(redis: Redis) -> None:
    async with serving(redis, heartbeat=0.2) as server:
        async with subscribe(server.base, sessionKey="ticket-1"):
            assert server.hub.subscribers == 1
        async with asyncio.timeout(5):
            while server.hub.subscribers:
                await asyncio.sleep(0.05)


@pytest.mark.backends
async def test_a_reconnect_with_last_event_id_gets_what_it_missed(live: Live) -> None:
    async with subscribe(live.base, sessionKey="ticket-1") as stream:
        await rpc(live.base, "progressCard.put", sessionKey="ticket-1", markdown="one")
        seen = (await stream.event()).id
    assert seen
    await rpc(live.base, "progressCard.put", sessionKey="other", markdown="not mine")
    await rpc(live.base, "progressCard.put", sessionKey="ticket-1", markdown="two")
    async with subscribe(live.base, sessionKey="ticket-1", last_event_id=seen) as stream:
        missed = await stream.event(timeout=1)
        assert missed.json["revision"] == 2 and missed.json["sessionKey"] == "ticket-1"


@pytest.mark.backends
async def test_a_reconnect_gets_only_the_newest_hint_however_long_the_stream(live: Live, store: CardStore) -> None:
    async with subscribe(live.base, sessionKey="ticket-1") as stream:
        await rpc(live.base, "progressCard.put", sessionKey="ticket-1", markdown="one")
        seen = (await stream.event()).id
    for i in range(35):
        await store.put(Owner("main", f"busy-{i}"), CardInput.parse({"markdown": "x"}))
    await rpc(live.base, "progressCard.put", sessionKey="ticket-1", markdown="two")
    await rpc(live.base, "activity.put", sessionKey="ticket-1", headline="three")
    async with subscribe(live.base, sessionKey="ticket-1", last_event_id=seen) as stream:
        missed = await stream.event(timeout=1)
        assert missed.event == "activity.changed" and missed.json["sessionKey"] == "ticket-1"
        newest = missed.id
        with pytest.raises(TimeoutError):
            await stream.event(timeout=0.3)  # one hint, not the whole history
    async with subscribe(live.base, sessionKey="ticket-1", last_event_id=newest) as stream:
        with pytest.raises(TimeoutError):
            await stream.event(timeout=0.3)  # nothing missed: nothing replayed


async def test_forty_replays_from_the_start_of_a_full_stream_leave_puts_fast(store: CardStore, redis: Redis) -> None:
    async with serving(redis, maxStreamsPerToken=40) as live:  # forty streams of one token
        await forty_replays(live, store, redis)


async def forty_replays(live: Live, store: CardStore, redis: Redis) -> None:
    owner = Owner("main", "ticket-1")
    await store.put(owner, CardInput.parse({"markdown": "one"}))
    stream_key = (await store.layout()).events_of(owner)
    # The owner's shard stream filled with 20,000 entries of other owners.
    for start in range(0, 20_000, 2_000):
        async with redis.pipeline(transaction=False) as pipe:
            for i in range(start, start + 2_000):
                pipe.xadd(stream_key, {"type": "progressCard.changed", "agentId": "main", "sessionKey": f"o-{i}", "revision": "1"})
            await pipe.execute()

    async def replay() -> int:
        async with subscribe(live.base, sessionKey="ticket-1", last_event_id="0-0") as stream:
            return (await stream.event(timeout=20)).json["revision"]

    replays = [asyncio.create_task(replay()) for _ in range(40)]
    latencies = []
    for i in range(5):
        began = time.monotonic()
        await rpc(live.base, "progressCard.put", sessionKey="other", markdown=f"put {i}")
        latencies.append(time.monotonic() - began)
    assert sorted(await asyncio.gather(*replays)) == [1] * 40
    # Generous against a busy machine; scanning the stream per replay took seconds.
    assert sorted(latencies)[2] < 0.5, latencies


@pytest.mark.backends
async def test_a_quiet_spell_longer_than_the_socket_timeout_then_a_write_arrives_at_once(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    from progresscast.store.connections import COMMAND_TIMEOUT, READER_TIMEOUT, Role, connect
    from progresscast.store.events import READ_BLOCK_MS

    assert READER_TIMEOUT > READ_BLOCK_MS / 1000 and COMMAND_TIMEOUT > READ_BLOCK_MS / 1000
    commands, readers = connect(redis_url), connect(redis_url, role=Role.readers)
    app = create_app(gateway_settings(), commands, readers=readers, heartbeat=1.0)
    sock = bind("127.0.0.1:0")
    started = asyncio.Event()
    task = asyncio.create_task(serve_app(app, sock, started=started))
    try:
        await asyncio.wait_for(started.wait(), 10)
        base = address(sock)
        async with subscribe(base, sessionKey="ticket-1") as stream:
            quiet_until = time.monotonic() + max(COMMAND_TIMEOUT, READER_TIMEOUT) + 1  # past every socket timeout
            while time.monotonic() < quiet_until:
                assert (await stream.frame(timeout=3)).comments == ["heartbeat"]
            await rpc(base, "progressCard.put", sessionKey="ticket-1", markdown="after the quiet")
            written = time.monotonic()  # a reader whose connection died in the quiet notices later
            frame = await stream.event(timeout=1.0)
            assert frame.json["revision"] == 1 and time.monotonic() - written < 1.0
        assert not [r for r in caplog.records if "read failed" in r.getMessage()]
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await readers.aclose()
        await commands.aclose()


async def test_the_page_cookie_works_for_event_source(live: Live) -> None:
    async with httpx.AsyncClient(base_url=live.base, cookies={"progresscast_token": "reader"}) as client:
        async with client.stream("GET", "/v1/events", params={"sessionKey": "ticket-1"}) as response:
            assert response.status_code == 200
            assert "connected" in (await Stream(response).frame()).comments


@pytest.mark.parametrize(
    ("token", "params", "status", "code"),
    [
        (None, {"sessionKey": "ticket-1"}, 401, "unauthorized"),
        ("wrong", {"sessionKey": "ticket-1"}, 401, "unauthorized"),
        ("noscope", {"sessionKey": "ticket-1"}, 403, "forbidden"),
        ("team", {"sessionKey": "other"}, 403, "forbidden"),
        ("research", {"sessionKey": "ticket-1"}, 403, "forbidden"),
        ("writer", {}, 400, "invalid_params"),
        ("writer", {"sessionKey": "ticket-1", "agentId": "ghost"}, 400, "unknown_agent"),
        ("writer", {"sessionKey": "agent:research:x", "agentId": "main"}, 400, "agent_conflict"),
    ],
)
async def test_event_stream_refusals(redis: Redis, token: str | None, params: dict[str, str], status: int, code: str) -> None:
    app = create_app(gateway_settings(), redis)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        # A stream that was (wrongly) opened would never end by itself.
        response = await asyncio.wait_for(client.get("/v1/events", params=params, headers=headers), 10)
    assert response.status_code == status
    assert response.json()["error"]["code"] == code
    assert app.state.gateway.hub.subscribers == 0


class _LosesOneCancel:
    """A reader client whose blocking read loses the first cancel, as redis-py's socket
    write does under Python 3.11's `wait_for` when the cancel lands just as it finishes."""

    def __init__(self, redis: Any) -> None:
        self.redis = redis
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.redis, name)

    async def xread(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return await self.redis.xread(*args, **kwargs)
        except asyncio.CancelledError:
            if self.lost:
                raise
            self.lost += 1
            return []


@pytest.mark.backends
async def test_a_shard_reader_ends_when_its_cancel_was_lost_in_a_read(redis_url: str) -> None:
    from progresscast.gateway.hub import EventHub
    from progresscast.store.connections import Role, connect

    readers = connect(redis_url, role=Role.readers)
    lossy = _LosesOneCancel(readers)
    hub = EventHub(lossy, block_ms=500)
    sub = await hub.subscribe(Owner("main", "ticket-1"))
    (reader,) = [t for t in asyncio.all_tasks() if t.get_name() == f"event-hub-{sub.stream}"]
    try:
        await asyncio.sleep(0.1)  # well inside its first blocking read
        hub.unsubscribe(sub)  # the last viewer left: the reader is cancelled
        await asyncio.wait([reader], timeout=3)
        assert lossy.lost == 1 and reader.done(), "the reader read on after its cancel was lost"
    finally:
        reader.cancel()
        await asyncio.wait([reader], timeout=3)
        await readers.aclose()
