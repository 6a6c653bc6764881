"""Moving a store written by the first layout onto shards, once, on first start.

The first layout tagged each owner's keys `{<agentId>:<sessionKey>}` and kept one
global stream `pc:events` and index `pc:owners`; it could only run on one Redis
primary, so a store holding it is never a Cluster and RENAME may cross slots. Every
owner key is renamed to its shard key (but its reset epoch, dropped: see `_migrate`),
the index entry moves to the shard index, and one `progressCard.changed` per owner goes
to its shard stream, so consumers look at every owner once more (the old stream's
entries are not carried over). One process migrates under a lock; the others wait for it.
The lock is a lease (lease.py) renewed while the migration runs, however long that is:
it expires only when its holder died, and a holder that lost it stops migrating.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
from typing import Any

from ..model.owners import Owner
from . import keys
from .keys import Layout
from .lease import INSTANCE, Lease

log = logging.getLogger("progresscast.store")

LOCK_TTL = 60.0
"""Seconds the migration lock lives unless renewed (every third of it)."""


class MigrationLockLost(RuntimeError):
    """Another process took the migration lock while this one migrated."""

_KINDS = {
    "card": Layout.card,
    "rev": Layout.revision,
    "run": Layout.run,
    "activity": Layout.activity,
    "tools": Layout.tools,
}


async def _has_first_layout(redis: Any) -> bool:
    # One key per call: on a Cluster the two live in different slots.
    return bool(await redis.exists(keys.LEGACY_OWNERS)) or bool(await redis.exists(keys.LEGACY_EVENTS))


async def migrate_first_layout(redis: Any, layout: Layout, *, lock_ttl: float = LOCK_TTL) -> int:
    """Migrate if the store still holds the first layout; returns the owners moved."""
    if not await _has_first_layout(redis):
        return 0
    holder = f"{INSTANCE}:{secrets.token_hex(4)}"  # two migrations in one process are two holders
    lock = Lease(redis, keys.MIGRATION_LOCK, keys.MIGRATION_FENCE, lock_ttl, holder=holder)
    while not await lock.acquire():
        await asyncio.sleep(0.1)  # another process is migrating: wait for it to finish
        if not await _has_first_layout(redis):
            return 0
    keeper = asyncio.create_task(lock.keep(), name="migration-lock")
    try:
        if not await _has_first_layout(redis):
            return 0
        migrating = asyncio.create_task(_migrate(redis, layout), name="migration")
        await asyncio.wait({migrating, keeper}, return_when=asyncio.FIRST_COMPLETED)
        if not migrating.done():  # the keeper returned: the lock is someone else's now
            migrating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await migrating
            raise MigrationLockLost("the migration lock passed to another process; it finishes the migration")
        moved = migrating.result()
        log.warning("migrated %d card owners from the single-stream layout to %d shards", moved, layout.shards)
        return moved
    finally:
        keeper.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keeper
        await lock.release()


async def _migrate(redis: Any, layout: Layout) -> int:
    owners: dict[Owner, int] = {}
    async for key in redis.scan_iter(match=keys.LEGACY_OWNER_KEYS, count=1000):
        parsed = keys.parse_legacy_owner_key(key)
        if parsed is None:
            continue
        owner, kind = parsed
        if kind == "epoch":
            # The first layout admitted writes by a reset epoch; now a write is refused by
            # a reset after it arrived (resetAt). Every reset of the first layout came
            # before anything this version admits, so the epoch has nothing left to refuse.
            await redis.delete(key)
        else:
            await redis.rename(key, _KINDS[kind](layout, owner))
        owners.setdefault(owner, 0)
    for display_key, score in await redis.zrange(keys.LEGACY_OWNERS, 0, -1, withscores=True):
        listed = Owner.from_display_key(display_key)
        if listed is not None:
            owners[listed] = int(score)
    for owner, score in owners.items():
        revision = await redis.hget(layout.card(owner), "revision") or ""
        async with redis.pipeline(transaction=True) as pipe:
            if score:
                pipe.zadd(layout.owners_of(owner), {owner.display_key: score})
            pipe.xadd(
                layout.events_of(owner),
                {
                    "type": "progressCard.changed",
                    "sessionKey": owner.session_key,
                    "agentId": owner.agent_id,
                    "displayKey": owner.display_key,
                    "revision": revision,
                },
                maxlen=keys.EVENTS_MAXLEN,
                approximate=True,
            )
            [*_, entry_id] = await pipe.execute()
        await redis.hset(
            layout.last_event(owner),
            mapping={"id": entry_id, "type": "progressCard.changed", "revision": revision},
        )
    await redis.delete(keys.LEGACY_OWNERS)
    await redis.delete(keys.LEGACY_EVENTS)
    return len(owners)
