"""Every write script publishes its change the same way — the store's and A2A's alike,
with the same events: the event in the owner's shard stream, the same event as the
owner's `last`, and (but for a run alone) the owner's place in its shard's index at the
change's time."""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any

import pytest
from redis.asyncio import Redis

from a2a_updates import artifact, status, steps, ts
from progresscast.agents.a2a.apply import Source, UpdateApplier
from progresscast.agents.a2a.mapping import parse_update
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore

pytestmark = pytest.mark.backends  # the store itself: each test runs on every backend

OWNER = Owner(agent_id="main", session_key="ctx-1")


def event(kind: str, revision: str = "", **state: str) -> dict[str, str]:
    return {
        "type": kind, "sessionKey": OWNER.session_key, "agentId": OWNER.agent_id,
        "displayKey": OWNER.display_key, "revision": revision, **state,
    }


async def server_ms(redis: Redis) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


async def published(redis: Redis, store: CardStore, write: Awaitable[Any]) -> tuple[list[dict[str, str]], bool]:
    """The events `write` appended, checking `last` is the newest; and whether it moved
    the owner in the index (to a time between before and after the write)."""
    lay = await store.layout()
    stream, index = lay.events_of(OWNER), lay.owners_of(OWNER)
    head = await redis.xrevrange(stream, count=1)
    await redis.zadd(index, {OWNER.display_key: 0})  # so even a change within the same ms shows
    before = await server_ms(redis)
    await write
    after = await server_ms(redis)
    entries = await redis.xrange(stream, min=f"({head[0][0]}" if head else "-")
    newest_id, newest = entries[-1]
    last = await store.last_event(OWNER)
    assert last == {"id": newest_id, **{k: v for k, v in newest.items() if k in ("type", "revision", "state")}}
    assert list(last) == ["id", "type", "revision", *(["state"] if "state" in newest else [])]
    now = await redis.zscore(index, OWNER.display_key)
    moved = now != 0
    if moved:
        assert now is not None and before <= now <= after
    return [fields for _, fields in entries], moved


async def test_the_store_publishes_each_change(redis: Redis, store: CardStore) -> None:
    card = CardInput.parse({"markdown": "hi"})
    assert await published(redis, store, store.put(OWNER, card)) == ([event("progressCard.changed", "1")], True)
    got = await published(redis, store, store.update_activity(OWNER, headline="h"))
    assert got == ([event("activity.changed")], True)
    got = await published(redis, store, store.start_run(OWNER, "r1"))
    assert got == ([event("run.started", state="active")], False)
    got = await published(redis, store, store.end_run(OWNER, "r1", RunState.completed))
    assert got == ([event("run.ended", state="completed")], False)
    assert await published(redis, store, store.clear(OWNER)) == ([event("progressCard.changed")], True)
    assert await published(redis, store, store.reset(OWNER)) == ([event("progressCard.changed")], True)


async def test_a2a_updates_publish_each_change(redis: Redis, store: CardStore) -> None:
    a = UpdateApplier(redis, agent_id=None, known_agents=frozenset({"main"}), default_agent="main")

    async def apply(data: dict[str, Any]) -> None:
        update = parse_update(data)
        assert update is not None
        await a.apply(update, Source.stream)

    events, moved = await published(redis, store, apply(status("t1", at=ts(1), plan=steps(2, 0), text="Reading")))
    assert events == [
        event("run.started", state="active"),
        event("progressCard.changed", "1"),
        event("activity.changed"),
    ] and moved
    events, moved = await published(redis, store, apply(artifact("t1", "Hello")))
    assert events == [event("activity.changed")] and moved
    events, moved = await published(redis, store, apply(status("t1", "TASK_STATE_COMPLETED", at=ts(2))))
    assert events == [event("activity.changed"), event("run.ended", state="completed")] and moved
