"""The store's shard count: recorded in the store on first use, then fixed.

Every client learns it once (one SET NX and one GET) and keeps it; the first
process to use a store written by the first layout migrates it before anything
reads or writes (migrate.py). A configured `store.shards` that differs from the
recorded count is overruled, with a warning naming both.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from typing import Any

from . import keys
from .keys import Layout

log = logging.getLogger("progresscast.store")

_configured: weakref.WeakKeyDictionary[Any, int] = weakref.WeakKeyDictionary()
_resolved: weakref.WeakKeyDictionary[Any, asyncio.Task[Layout]] = weakref.WeakKeyDictionary()


def configure(redis: Any, shards: int) -> None:
    """The shard count `store.shards` asks for, for stores this client creates."""
    _configured[redis] = shards


async def layout_of(redis: Any) -> Layout:
    """The layout of the store behind `redis` (resolved once per client)."""
    task = _resolved.get(redis)
    if task is None or (task.done() and (task.cancelled() or task.exception() is not None)):
        task = asyncio.get_running_loop().create_task(_resolve(redis, _configured.get(redis)))
        _resolved[redis] = task
    # Shielded: one caller giving up must not cancel the others' wait.
    return await asyncio.shield(task)


async def _resolve(redis: Any, configured: int | None) -> Layout:
    from .migrate import migrate_first_layout

    wanted = configured or keys.DEFAULT_SHARDS
    await redis.set(keys.SHARDS, wanted, nx=True)
    recorded = int(await redis.get(keys.SHARDS) or wanted)
    if configured is not None and configured != recorded:
        log.warning(
            "store.shards is %d but this store was created with %d shards: using %d "
            "(the shard count cannot change once a store is in use)",
            configured,
            recorded,
            recorded,
        )
    layout = Layout(recorded)
    await migrate_first_layout(redis, layout)
    return layout
