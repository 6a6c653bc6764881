"""The lock of the one-time migration from the first layout is renewed while the
migration runs: a migration that outlasts the lock's time to live keeps it, so a
second process waits instead of migrating the same keys at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.connections import connect
from progresscast.store.keys import Layout
from progresscast.store.migrate import migrate_first_layout

OWNERS = 1500


async def first_layout(redis: Any, owners: int) -> None:
    """What the first layout wrote for `owners` owners."""
    async with redis.pipeline(transaction=False) as pipe:
        for i in range(owners):
            owner = Owner("main", f"s-{i}")
            pipe.hset(keys.legacy_owner_key(owner, "card"), mapping={"body": '{"markdown": "m"}', "revision": 1,
                                                                     "updatedAt": 1_700_000_000_000})
            pipe.set(keys.legacy_owner_key(owner, "rev"), 1)
            pipe.zadd(keys.LEGACY_OWNERS, {owner.display_key: 1_700_000_000_000 + i})
        await pipe.execute()


async def test_a_migration_longer_than_its_lock_keeps_it(redis_url: str) -> None:
    if redis_url.startswith("redis+cluster://"):
        pytest.skip("the first layout never ran on a Cluster")
    first, second = connect(redis_url), connect(redis_url)
    try:
        await first_layout(first, OWNERS)
        ttl = 0.2  # far shorter than migrating 1500 owners takes
        one = asyncio.create_task(migrate_first_layout(first, Layout(4), lock_ttl=ttl))
        while not await second.exists(keys.MIGRATION_LOCK):
            await asyncio.sleep(0.005)
        loop = asyncio.get_running_loop()
        taken = loop.time()
        while loop.time() - taken < ttl * 3:  # held all along, past its time to live
            assert await second.exists(keys.MIGRATION_LOCK), "the lock expired while the migration ran"
            await asyncio.sleep(0.01)
        assert not one.done(), "the migration should outlast its lock's time to live"
        other = asyncio.create_task(migrate_first_layout(second, Layout(4), lock_ttl=ttl))
        moved = await asyncio.wait_for(asyncio.gather(one, other), 120)
        assert sorted(moved) == [0, OWNERS]  # one migrated everything, the other waited for it
        assert not await second.exists(keys.MIGRATION_LOCK)  # released at the end
        assert await second.zcard(keys.owners(0)) + await second.zcard(keys.owners(1)) + await second.zcard(
            keys.owners(2)) + await second.zcard(keys.owners(3)) == OWNERS
    finally:
        await first.aclose()
        await second.aclose()
