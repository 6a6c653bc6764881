"""How long what nobody touches is kept: `store.retention`, a property of the store.

An owner untouched for the retention — counted from its last write's arrival, on the
Redis server's clock — is gone with every key it has: each write script sets the time
to live of all of the owner's keys (scripts.py), and `serve` sweeps the index entries
of owners whose keys expired (`sweep`, below) so listings stay short. What chats create
(follows, overrides, drafts, message ids) expires the same way once unused
(channels/state/).

The retention is recorded in the store (`pc:retention`, in ms) by a process whose
config sets it, and read from there by every other — an agent hook that runs without
the config keeps cards exactly as long as `serve` does. Nothing recorded: 30 days.
0 keeps everything for ever.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, cast

from ..model.owners import Owner
from ..stopping import still_wanted
from . import keys
from .per_client import PerClient
from .sharding import layout_of

log = logging.getLogger("progresscast.store")

DEFAULT = 30 * 24 * 3600.0
"""Seconds, when no process recorded another (the config's default too)."""
SWEEP_PAGE = 500
"""Index entries looked at per shard and turn of the sweep."""
SWEEP_EVERY_MAX = 3600.0
"""The sweep runs every tenth of the retention, at most this many seconds apart."""


def configure(redis: Any, seconds: float) -> None:
    """The retention this client's config sets: recorded in the store at first use."""
    _RETENTION.configure(redis, seconds)


async def retention_ms(redis: Any) -> int:
    """The store's retention in ms (0: for ever), learnt once per client."""
    return await _RETENTION.get(redis)


async def _resolve(redis: Any, configured: float | None) -> int:
    if configured is not None:
        wanted = int(configured * 1000)
        await redis.set(keys.RETENTION, wanted)
        return wanted
    recorded = await redis.get(keys.RETENTION)
    return int(recorded) if recorded is not None and str(recorded).isdigit() else int(DEFAULT * 1000)


_RETENTION: PerClient[float, int] = PerClient(_resolve)


# The index entries, on the owners' shard, of owners whose keys expired: an entry older
# than the retention goes once its owner's `last` key (rewritten by every write) is
# gone. Checked here, in one script per shard, so a write landing meanwhile keeps it.
_SWEEP = """
local index_key = KEYS[1]
local cutoff = tonumber(ARGV[1])
local removed = 0
for i = 2, #KEYS do
  local member = ARGV[i]
  local score = tonumber(redis.call('ZSCORE', index_key, member) or '-1')
  if score >= 0 and score <= cutoff and redis.call('EXISTS', KEYS[i]) == 0 then
    removed = removed + redis.call('ZREM', index_key, member)
  end
end
return removed
"""


async def sweep(redis: Any, *, pages: int = 20) -> int:
    """Remove the index entries of expired owners (at most `pages` pages of each shard's
    oldest entries); how many were removed."""
    ms = await retention_ms(redis)
    if ms <= 0:
        return 0
    lay = await layout_of(redis)
    script = redis.register_script(_SWEEP)
    removed = 0
    for index in lay.indexes:
        seconds, micros = await redis.time()  # the clock the scores were written on
        cutoff = int(seconds) * 1000 + int(micros) // 1000 - ms
        kept = 0  # old entries whose owner lives on (written since by a run's start or end)
        for _ in range(pages):
            members = cast("list[str]", await redis.zrangebyscore(index, "-inf", cutoff, start=kept, num=SWEEP_PAGE))
            owners = [(m, owner) for m in members if (owner := Owner.from_display_key(m)) is not None]
            gone = 0
            if owners:
                gone = int(await script(
                    keys=[index, *(lay.last_event(owner) for _, owner in owners)],
                    args=[cutoff, *(m for m, _ in owners)],
                ))
            removed += gone
            kept += len(members) - gone
            if len(members) < SWEEP_PAGE:
                break
    return removed


def sweep_every(ms: int) -> float:
    return min(max(ms / 1000 / 10, 0.05), SWEEP_EVERY_MAX)


async def keep_sweeping(redis: Any) -> None:
    """`sweep` now and then, until cancelled (serve runs it supervised)."""
    while True:
        removed = await sweep(redis)
        if removed:
            log.info("retention: %d owners untouched for store.retention left the index", removed)
        every = sweep_every(await retention_ms(redis))
        await still_wanted()  # before a wait of up to an hour: a Redis call may have lost the cancel (stopping.py)
        await asyncio.sleep(every)


__all__ = ["DEFAULT", "configure", "keep_sweeping", "retention_ms", "sweep"]
