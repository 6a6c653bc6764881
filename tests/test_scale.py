"""Scale and faults: the shard layout and its migration, the bounded connection pool,
an unreachable or restarted Redis, and the health and metrics endpoints."""

from __future__ import annotations

import asyncio
import logging
import time
import zlib
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from progresscast.channels.state.holder import ChannelState
from progresscast.channels.state.ids import DraftKey
from progresscast.config.settings import ChannelSettings
from progresscast.gateway import create_app
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.slack.channel import SlackState
from progresscast.store import keys, sharding
from progresscast.store.cards import CardStore, StoreError
from progresscast.store.connections import Role, connect
from progresscast.store.embedded import ensure_embedded, stop_embedded
from progresscast.store.events import EventGroup
from progresscast.telegram.follows import TelegramState
from test_gateway_rpc import gateway_settings

OWNER = Owner("main", "ticket-1")
WRITER = {"Authorization": "Bearer writer"}


def put_body(session: str, markdown: str = "x") -> dict[str, Any]:
    return {"method": "progressCard.put", "params": {"sessionKey": session, "markdown": markdown}}


def gateway(redis: Any) -> httpx.AsyncClient:
    app = create_app(gateway_settings(), redis)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw", timeout=30)


# -- the layout ---------------------------------------------------------------------------


@pytest.mark.backends
async def test_the_shard_count_is_recorded_and_a_differing_config_is_overruled(
    redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    first = connect(redis_url)
    sharding.configure(first, 4)
    store = CardStore(first)
    await store.put(OWNER, CardInput.parse({"markdown": "one"}))
    layout = await store.layout()
    assert layout.shards == 4 and await first.get(keys.SHARDS) == "4"
    assert layout.card(OWNER).startswith(f"pc:{{pc:{zlib.crc32(b'agent:main:ticket-1') % 4}}}:card:")
    later = connect(redis_url)
    sharding.configure(later, 16)
    with caplog.at_level(logging.WARNING, "progresscast.store"):
        card = await CardStore(later).get(OWNER)
    assert card is not None and card.markdown == "one"  # the recorded 4 wins
    assert (await CardStore(later).layout()).shards == 4
    assert any("store.shards is 16" in r.getMessage() and "with 4 shards" in r.getMessage() for r in caplog.records)
    await first.aclose()
    await later.aclose()


@pytest.mark.backends
async def test_a_store_in_the_first_layout_is_migrated_on_first_start(redis_url: str) -> None:
    if redis_url.startswith("redis+cluster://"):
        pytest.skip("the first layout never ran on a Cluster (its scripts crossed slots)")
    raw = connect(redis_url)
    owner = Owner("research", "t-9")
    # What the first layout wrote: owner keys tagged {agent:session}, one stream, one index.
    await raw.hset(keys.legacy_owner_key(owner, "card"), mapping={"body": '{"markdown": "old"}', "revision": 3, "updatedAt": 1_700_000_000_000})
    await raw.set(keys.legacy_owner_key(owner, "rev"), 3)
    await raw.set(keys.legacy_owner_key(owner, "epoch"), 1)  # reset once: writes are admitted by arrival now
    await raw.hset(keys.legacy_owner_key(owner, "run"), mapping={"runId": "r1", "state": "active", "startedAt": 1, "startRevision": 2})
    await raw.rpush(keys.legacy_owner_key(owner, "tools"), "read a.py")
    await raw.zadd(keys.LEGACY_OWNERS, {owner.display_key: 1_700_000_000_000})
    await raw.xadd(keys.LEGACY_EVENTS, {"type": "progressCard.changed", "agentId": "research", "sessionKey": "t-9", "revision": "3"})
    await raw.sadd(keys.channel_followers("tg", owner), "42 0")  # used alone: stays as it is
    await raw.aclose()

    client = connect(redis_url)
    store = CardStore(client)
    arrived = time.monotonic() - 0.05  # a write that arrived before the migration
    card = await store.get(owner)
    assert card is not None and card.markdown == "old" and card.revision == 3
    view = await store.view(owner)
    assert view.run_id == "r1" and view.activity.tools == ("read a.py",)
    # The first layout's reset came before it arrived: it lands.
    assert (await store.put(owner, CardInput.parse({"markdown": "new"}), arrived=arrived)).revision == 4
    assert [k async for k, _ in store.owners()] == [owner.display_key]
    left = set(await client.keys("*"))
    assert not {keys.LEGACY_EVENTS, keys.LEGACY_OWNERS} & left
    assert not [k for k in left if keys.parse_legacy_owner_key(k)]
    assert not [k for k in left if ":epoch" in k]  # the reset epoch was dropped, not moved
    assert keys.channel_followers("tg", owner) in left
    assert (await store.last_event(owner))["revision"] == "4"
    # A reset of the migrated owner refuses a write that arrived before it, as anywhere.
    arrived = time.monotonic() - 0.05
    await store.reset(owner)
    with pytest.raises(StoreError, match="reset"):
        await store.put(owner, CardInput.parse({"markdown": "late"}), arrived=arrived)
    assert await store.get(owner) is None
    await client.aclose()


# -- connections ---------------------------------------------------------------------------


@pytest.mark.backends
async def test_three_hundred_concurrent_puts_are_all_answered(redis: Any) -> None:
    async with gateway(redis) as client:
        answers = await asyncio.gather(*(client.post("/v1/rpc", json=put_body(f"s-{i}"), headers=WRITER) for i in range(300)))
    assert sorted({a.status_code for a in answers}) == [200]
    store = CardStore(redis)
    assert len([k async for k, _ in store.owners()]) == 300


async def test_an_unreachable_redis_answers_503_within_two_seconds() -> None:
    with socket_closed() as port:
        dead = connect(f"redis://127.0.0.1:{port}/0")
        async with gateway(dead) as client:
            began = time.monotonic()
            answer = await client.post("/v1/rpc", json=put_body("t-1"), headers=WRITER)
            took = time.monotonic() - began
            health = await client.get("/healthz")
        await dead.aclose()
    assert answer.status_code == 503 and "not answering" in answer.json()["error"]["message"]
    assert took < 2.0
    assert health.status_code == 503 and "redis is not answering" in health.json()["reason"]


class socket_closed:
    """A loopback port nothing listens on."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None


async def test_a_redis_restart_with_aof_loses_nothing_acknowledged(tmp_path: Path) -> None:
    home = tmp_path / "home"
    url = ensure_embedded(home)
    commands, readers = connect(url), connect(url, role=Role.readers)
    store = CardStore(commands)
    state = ChannelState(commands, "tg")
    from progresscast.channels.draft.state import DraftState
    from progresscast.channels.state.ids import DraftKey

    draft = DraftKey(42, 0, OWNER)
    group = EventGroup(readers, "survivors", "c1")
    await group.ensure()
    try:
        await store.put(OWNER, CardInput.parse({"markdown": "before"}))
        await state.follows.add(draft)
        await state.drafts.save(draft, DraftState(message_id=77))
        assert [e.revision for e in await group.read(block_ms=3000)] == [1]
        assert stop_embedded(home)  # a clean shutdown: the AOF has every acknowledged write
        async with gateway(commands) as client:
            down = await client.post("/v1/rpc", json=put_body("ticket-1"), headers=WRITER)
        assert down.status_code == 503
        ensure_embedded(home)
        # The same clients carry on by themselves.
        card = await store.get(OWNER)
        assert card is not None and card.markdown == "before"
        assert await state.follows.has(draft)
        assert (await state.drafts.of(draft)).message_id == 77
        await store.put(OWNER, CardInput.parse({"markdown": "after"}))
        deadline = time.monotonic() + 15
        seen: list[int | None] = []
        while 2 not in seen and time.monotonic() < deadline:
            batch = await group.read(block_ms=1000)
            seen += [e.revision for e in batch]
            await group.ack(batch)
        assert 2 in seen  # the group reader recovered and got the write made after
    finally:
        await group.close()
        await readers.aclose()
        await commands.aclose()
        stop_embedded(home)


# -- health and metrics ------------------------------------------------------------------


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


@pytest.mark.backends
async def test_healthz_reports_redis_and_consumer_lag(redis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    group = EventGroup(redis, "slowpoke", "c1")
    await group.ensure()
    store = CardStore(redis)
    for i in range(3):
        await store.put(Owner("main", f"t-{i}"), CardInput.parse({"markdown": "x"}))
    async with gateway(redis) as client:
        health = await client.get("/healthz")
        assert health.status_code == 200
        assert health.json()["ok"] and health.json()["consumerLag"] == {"slowpoke": 3}
        from progresscast.gateway import health as health_module

        monkeypatch.setattr(health_module, "MAX_LAG", 2)
        behind = await client.get("/healthz")
    assert behind.status_code == 503 and "slowpoke is 3 events behind" in behind.json()["reason"]


async def test_metrics_parse_and_counters_move_with_the_work(redis: Any) -> None:
    async with gateway(redis) as client:
        before = samples((await client.get("/metrics")).text)
        assert (await client.post("/v1/rpc", json=put_body("t-1"), headers=WRITER)).status_code == 200
        stale = {"method": "progressCard.put", "params": {"sessionKey": "t-1", "expectedRevision": 7, "markdown": "y"}}
        assert (await client.post("/v1/rpc", json=stale, headers=WRITER)).status_code == 409
        assert (await client.get("/v1/card", params={"sessionKey": "t-1"}, headers=WRITER)).status_code == 200
        response = await client.get("/metrics")
    assert response.headers["content-type"].startswith("text/plain")
    after = samples(response.text)

    def moved(name: str, **labels: str) -> float:
        key = (name, tuple(sorted(labels.items())))
        return after.get(key, 0.0) - before.get(key, 0.0)

    assert moved("progresscast_writes_total", outcome="ok") == 1
    assert moved("progresscast_writes_total", outcome="conflict") == 1
    assert moved("progresscast_renders_total", channel="web") == 1
    assert ("progresscast_follows", (("channel", "telegram"),)) in after  # counted with no channel configured


@pytest.mark.backends
async def test_follows_are_counted_per_bot_and_channel(redis: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from progresscast.gateway import health as health_module

    monkeypatch.setattr(health_module, "CACHE_SECONDS", 0.0)  # each scrape reads Redis again
    settings = gateway_settings().model_copy(
        update={
            "channels": ChannelSettings.model_validate(
                {"telegram": {"token": "111111:first", "bots": [{"token": "222222:second"}]}, "slack": {}}
            )
        }
    )
    first, second, slack = TelegramState(redis), TelegramState(redis, "tg-222222"), SlackState(redis)
    s1, s2 = Owner("main", "s1"), Owner("main", "s2")
    for key in (DraftKey(1, 0, s1), DraftKey(1, 0, s2), DraftKey(-100200, 5, s1)):
        await first.follows.add(key)
    await second.follows.add(DraftKey(1, 0, s1))
    for key in (DraftKey("C1", "", s1), DraftKey("C1", "1700.1", s2)):
        await slack.follows.add(key)
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, redis)), base_url="http://gw")

    async def follows() -> dict[str, float]:
        page = samples((await client.get("/metrics")).text)
        return {dict(labels)["channel"]: v for (name, labels), v in page.items() if name == "progresscast_follows"}

    async with client:
        assert await follows() == {"telegram": 3, "telegram-222222": 1, "slack": 2}
        await second.follows.remove(DraftKey(1, 0, s1))
        await first.follows.add(DraftKey(2, 0, s2))
        await slack.follows.remove(DraftKey("C1", "", s1))
        assert await follows() == {"telegram": 4, "telegram-222222": 0, "slack": 1}
        await first.follows.remove(DraftKey(-100200, 5, s1))
        assert await follows() == {"telegram": 3, "telegram-222222": 0, "slack": 1}
