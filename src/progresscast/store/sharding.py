"""The store's shard count: recorded in the store on first use, then fixed.

Every client learns it once (one SET NX and one GET) and keeps it; the first
process to use a store written by the first layout migrates it before anything
reads or writes (migrate.py). A configured `store.shards` that differs from the
recorded count is overruled, with a warning naming both.
"""

from __future__ import annotations

import logging
from typing import Any

from . import keys
from .keys import Layout
from .per_client import PerClient

log = logging.getLogger("progresscast.store")


def configure(redis: Any, shards: int) -> None:
    """The shard count `store.shards` asks for, for stores this client creates."""
    _LAYOUT.configure(redis, shards)


async def layout_of(redis: Any) -> Layout:
    """The layout of the store behind `redis` (resolved once per client)."""
    return await _LAYOUT.get(redis)


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


_LAYOUT: PerClient[int, Layout] = PerClient(_resolve)
