"""What anyone on the network can make the gateway do without a token, measured on a
real Redis: `/healthz` is a handful of commands (per shard, none per follower or per
stream entry) at most once a second and names no host or process; `/metrics` takes
`gateway.metricsToken` when one is set; the index page reads a bounded stretch of the
index per request, however few of its sessions a token may see."""

from __future__ import annotations

import asyncio
import os
import re
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.channels.state.ids import DraftKey
from progresscast.config.settings import Settings
from progresscast.gateway import create_app, health, pages
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.events import EventGroup
from progresscast.store.lease import INSTANCE
from progresscast.store.sharding import layout_of
from progresscast.telegram.follows import TelegramState
from test_gateway_rpc import gateway_settings

# Commands are counted on the one server: the embedded Redis (not `backends`).

BOT = "111111"


def with_bot(**gateway: object) -> Settings:
    settings = gateway_settings(**gateway)
    return settings.model_copy(
        update={"channels": settings.channels.model_validate({"telegram": {"token": f"{BOT}:secret"}})}
    )


def client(settings: Settings, redis: Any) -> httpx.AsyncClient:
    app = create_app(settings, redis)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw", timeout=30)


async def commands_run(redis: Redis) -> int:
    """Commands the server has run so far (the INFO calls that ask excluded)."""
    stats = await redis.info("commandstats")
    return sum(int(v["calls"]) for k, v in stats.items() if k != "cmdstat_info")


async def test_healthz_costs_a_few_commands_per_shard_once_a_second(redis: Redis) -> None:
    store = CardStore(redis)
    for group in ("slowpoke", "laggard"):
        await EventGroup(redis, group, "c1").ensure()
    for i in range(50):
        await store.put(Owner("main", f"t-{i}"), CardInput.parse({"markdown": "x"}))
    # Strangers' chats following: each a key of its own, never read by /healthz.
    state = TelegramState(redis)
    for chat in range(1, 301):
        await state.follows.add(DraftKey(chat, 0, Owner("main", "t-1")))
    shards = (await layout_of(redis)).shards
    async with client(with_bot(), redis) as http:
        before = await commands_run(redis)
        answers = await asyncio.gather(*(http.get("/healthz") for _ in range(40)))
        spent = await commands_run(redis) - before
    assert {a.status_code for a in answers} == {200}
    assert len({a.text for a in answers}) == 1  # one observation answered all forty
    assert answers[0].json()["consumerLag"] == {"slowpoke": 50, "laggard": 50}
    # PING, per shard XINFO GROUPS (+ XINFO STREAM on a Redis without `lag`), per bot a GET.
    assert spent <= 1 + 2 * shards + 1, spent


async def test_a_group_behind_in_a_long_stream_is_not_counted_by_reading_it(
    redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(health, "MAX_LAG", 100)
    stream = (await layout_of(redis)).streams[0]
    await redis.xgroup_create(stream, "slowpoke", id="0", mkstream=True)
    async with redis.pipeline(transaction=False) as pipe:
        for i in range(5000):
            pipe.xadd(stream, {"type": "progressCard.changed", "sessionKey": f"o-{i}"})
        await pipe.execute()
    await redis.xreadgroup("slowpoke", "c1", {stream: ">"}, count=10)  # 10 delivered, not acknowledged
    groups = await redis.xinfo_groups(stream)
    async with client(gateway_settings(), redis) as http:
        answer = await http.get("/healthz")
    assert answer.status_code == 503 and "slowpoke" in answer.json()["reason"]
    lag = answer.json()["consumerLag"]["slowpoke"]
    if groups[0].get("lag") is not None:
        assert lag == 5000  # Redis 7 says it
    else:
        assert lag == 10 + 101  # pending, and past the group's position at most MAX_LAG + 1: not 4,990


async def test_healthz_names_no_host_no_process_and_no_redis_address(redis: Redis) -> None:
    await redis.set(keys.tg_lease(BOT), INSTANCE)
    async with client(with_bot(), redis) as http:
        answer = await http.get("/healthz")
    assert answer.json()["telegramLease"] == {BOT: {"held": True, "here": True}}
    host = socket.gethostname()
    assert str(os.getpid()) not in answer.text and (len(host) < 4 or host not in answer.text), answer.text
    dead = Redis.from_url("redis://pc-private-redis.invalid:6379/0", socket_connect_timeout=0.5)
    try:
        async with client(gateway_settings(), dead) as http:
            down = await http.get("/healthz")
    finally:
        await dead.aclose()
    assert down.status_code == 503 and down.json()["reason"].startswith("redis is not answering")
    assert "pc-private-redis" not in down.text


async def test_metrics_take_the_metrics_token_when_one_is_set(redis: Redis) -> None:
    token = "metrics-token-0123456789"
    async with client(gateway_settings(metricsToken=token), redis) as http:
        for headers in ({}, {"Authorization": "Bearer writer"}, {"Authorization": f"Bearer {token}x"}):
            refused = await http.get("/metrics", headers=headers)
            assert refused.status_code == 401 and "metricsToken" in refused.json()["error"]["message"]
        scraped = await http.get("/metrics", headers={"Authorization": f"Bearer {token}"})
        assert scraped.status_code == 200 and "progresscast_writes_total" in scraped.text
        assert (await http.get("/healthz")).status_code == 200  # the load balancer's stays open
    async with client(gateway_settings(), redis) as http:
        assert (await http.get("/metrics")).status_code == 200  # no token set: open, as before


# -- the index page ----------------------------------------------------------------------


@pytest.fixture
async def crowded(redis: Redis, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[httpx.AsyncClient]:
    """600 sessions of others, newest, and the team's three, oldest; one request reads
    at most 100 entries of the index."""
    monkeypatch.setattr(pages, "INDEX_SCAN", 100, raising=False)
    store = CardStore(redis)
    for i in range(3):
        await store.put(Owner("main", f"team-{i}"), CardInput.parse({"markdown": "ours"}))
    async with redis.pipeline(transaction=False) as pipe:
        layout = await layout_of(redis)
        for i in range(600):
            owner = Owner("main", f"other-{i:03}")
            # As the write path indexes an owner: its display key, scored by its last change.
            pipe.zadd(layout.owners_of(owner), {owner.display_key: 10**13 + i})
        await pipe.execute()
    async with client(gateway_settings(), redis) as http:
        yield http


async def test_the_index_reads_a_bounded_stretch_per_request(crowded: httpx.AsyncClient) -> None:
    crowded.cookies.set("progresscast_token", "team")
    pages_read, seen, url = 0, [], "/"
    while url:
        page = await crowded.get(url)
        assert page.status_code == 200
        pages_read += 1
        seen += re.findall(r'href="/sessions/agent:main:([^"]+)"', page.text)
        more = re.search(r'<p class="pc-more"><a href="([^"]+)"', page.text)
        url = more.group(1).replace("&amp;", "&") if more else ""
        assert pages_read < 20
    assert sorted(seen) == ["team-0", "team-1", "team-2"]
    assert pages_read >= 6  # 600 others before them, at most 100 read per request


async def test_a_later_page_starts_where_the_last_stopped(crowded: httpx.AsyncClient, redis: Redis) -> None:
    crowded.cookies.set("progresscast_token", "writer")  # sees everything
    first = await crowded.get("/")
    shown = re.findall(r'href="/sessions/agent:main:([^"]+)"', first.text)
    assert shown == [f"other-{i:03}" for i in range(599, 599 - pages.PAGE_SIZE, -1)]
    more = re.search(r'<p class="pc-more"><a href="([^"]+)"', first.text)
    assert more is not None
    second = await crowded.get(more.group(1).replace("&amp;", "&"))
    assert re.findall(r'href="/sessions/agent:main:([^"]+)"', second.text)[0] == f"other-{599 - pages.PAGE_SIZE:03}"
