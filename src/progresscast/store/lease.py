"""A lease in Redis: one process at a time does a job (polls and edits for one bot),
the others stand by and take over when it dies.

The lease is one key holding the holder's name, set with `SET NX PX` and renewed
(compare the name, then `PEXPIRE`) every third of its time to live; taking it bumps a
counter beside it (same hash slot), whose value is the holder's **fence number**.

Fencing. A holder that stops for a while (SIGSTOP, a long GC pause, a lost network)
may come back after its lease expired and someone else took it. It must then make no
call in the bot's name. Two guards:

- `Fence.deadline`: a local deadline from the last successful renew — the moment the
  renew was *sent* plus `SAFETY` of the TTL. Redis starts the TTL when it runs the
  command, which is later, so the deadline passes before the key can expire even if
  this process' clock runs a little fast. Every Bot API call and every draft write
  checks it first (`Fence.check`), so a process that resumes past its deadline does
  nothing before its keeper has renewed — which fails once someone else holds it.
- The fence number: draft writes are conditioned on it in Redis (`channels.state.drafts`),
  so a write that passed the local check just before a pause and reaches Redis after
  a newer holder wrote the draft is refused instead of undoing the newer state.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
import time
from typing import Any

from ..stopping import still_wanted

log = logging.getLogger("progresscast.store.lease")

SAFETY = 0.8
"""Fraction of the TTL, counted from when a renew was sent, during which the holder acts."""
RENEW_EVERY = 1 / 3
"""Renew after this fraction of the TTL: two renews may fail before the deadline passes."""

INSTANCE = f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"
"""This process' name in the leases it holds (shown by /healthz and the standby log)."""

# Take the lease if nobody holds it; the new fence number, or 0.
_ACQUIRE = """
local lease_key = KEYS[1]
local fence_key = KEYS[2]
local holder = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
if redis.call('SET', lease_key, holder, 'NX', 'PX', ttl_ms) then
  return redis.call('INCR', fence_key)
end
return 0
"""

# Extend the lease only while it is still ours (1), else 0.
_RENEW = """
local lease_key = KEYS[1]
local holder = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
if redis.call('GET', lease_key) == holder then
  redis.call('PEXPIRE', lease_key, ttl_ms)
  return 1
end
return 0
"""

# Give the lease up only while it is still ours.
_RELEASE = """
local lease_key = KEYS[1]
local holder = ARGV[1]
if redis.call('GET', lease_key) == holder then
  return redis.call('DEL', lease_key)
end
return 0
"""


class FenceClosed(Exception):
    """The lease may have passed to another process: no call, no write."""


class Fence:
    """What the holder checks before every call: its deadline and its fence number."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self.number = 0
        """The fence number of the current holding (0: not held)."""
        self.deadline = 0.0
        """`clock()` past which the lease may have passed to another process."""

    def is_open(self) -> bool:
        return self.number > 0 and self.clock() < self.deadline

    def check(self) -> None:
        if not self.is_open():
            raise FenceClosed("the lease may have passed to another process")

    def close(self) -> None:
        self.deadline = 0.0


class Lease:
    def __init__(self, redis: Any, lease_key: str, fence_key: str, ttl: float, *, holder: str = INSTANCE) -> None:
        self.redis = redis
        self.lease_key = lease_key
        self.fence_key = fence_key
        self.ttl = ttl
        self.holder = holder
        self.fence = Fence()
        self._acquire = redis.register_script(_ACQUIRE)
        self._renew = redis.register_script(_RENEW)
        self._release = redis.register_script(_RELEASE)

    @property
    def _ttl_ms(self) -> int:
        return max(1, int(self.ttl * 1000))

    def _extend(self, sent: float) -> None:
        self.fence.deadline = sent + self.ttl * SAFETY

    async def acquire(self) -> bool:
        """Take the lease if nobody holds it."""
        sent = self.fence.clock()
        number = int(await self._acquire(keys=[self.lease_key, self.fence_key], args=[self.holder, self._ttl_ms]))
        if number <= 0:
            return False
        self.fence.number = number
        self._extend(sent)
        return True

    async def renew(self) -> bool:
        """Extend the lease; False (and the fence closed) when it is no longer ours."""
        sent = self.fence.clock()
        if int(await self._renew(keys=[self.lease_key], args=[self.holder, self._ttl_ms])):
            self._extend(sent)
            return True
        self.fence.close()
        return False

    async def release(self) -> None:
        """Give the lease up (a graceful stop): a standby may take it at once."""
        self.fence.close()
        await self._release(keys=[self.lease_key], args=[self.holder])

    async def current_holder(self) -> str | None:
        value = await self.redis.get(self.lease_key)
        return value.decode() if isinstance(value, bytes) else value

    async def keep(self) -> None:
        """Renew until the lease is lost (then return). A Redis that does not answer is
        retried; meanwhile the deadline passes and the fence closes by itself."""
        while True:
            await still_wanted()
            await asyncio.sleep(self.ttl * RENEW_EVERY)
            try:
                if not await self.renew():
                    return
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.warning("renewing the lease %s failed (%s); retrying", self.lease_key, exc)


__all__ = ["INSTANCE", "SAFETY", "Fence", "FenceClosed", "Lease"]
