"""One process at a time acts for a bot account: whoever holds its lease runs the job
(its adapter: reading updates, sending and editing); every other process stands by,
tries the lease every `poll` seconds, and takes over when the holder dies (its lease
expires) or stops (it releases it). A holder that loses its lease stops its job and
stands by again. The job gets the lease's `Fence` to check before every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from .. import metrics
from ..backoff import Backoff, Retrying
from ..store.lease import Fence, Lease

Job = Callable[[Fence], Coroutine[Any, Any, None]]


async def while_held(
    lease: Lease, job: Job, *, name: str, label: str, poll: float, log: logging.Logger
) -> None:
    """Stand by until this process holds `lease`, run `job` while it does, and start
    over when it is lost. Until cancelled; an exception of the job (a refused token)
    ends it. `name` starts its log lines (`bot 123`); `label` is the account in the
    `progresscast_lease_held` metric."""
    retry = Retrying(f"{name}: cannot reach Redis for its lease", log=log, backoff=Backoff())
    said: str | None = None
    held = metrics.LEASE_HELD.labels(label)
    held.set(0)
    while True:
        got, holder = await retry.run(partial(_try, lease))
        if not got:
            if holder is not None and holder != said:
                log.info("%s: standing by; its lease is held by %s", name, holder)
                said = holder
            await asyncio.sleep(poll)
            continue
        said = None
        log.info("%s: took its lease (fence %d): this process polls and edits for it", name, lease.fence.number)
        held.set(1)
        try:
            await _hold(lease, job(lease.fence), name, log)
        finally:
            held.set(0)
            with contextlib.suppress(Exception):
                await lease.release()


async def _try(lease: Lease) -> tuple[bool, str | None]:
    """Whether this process took `lease`, and if not, who holds it."""
    got = await lease.acquire()
    return got, None if got else await lease.current_holder()


async def _hold(lease: Lease, run: Coroutine[Any, Any, None], name: str, log: logging.Logger) -> None:
    job = asyncio.create_task(run, name=f"{name}-job")
    keeper = asyncio.create_task(lease.keep(), name=f"{name}-lease")
    try:
        done, _ = await asyncio.wait({job, keeper}, return_when=asyncio.FIRST_COMPLETED)
        if job in done:
            job.result()
            return
        lease.fence.close()  # no call from here on, whatever is still running
        log.warning("%s: lost its lease to %s: standing by", name, await lease.current_holder())
    finally:
        # A graceful stop keeps the fence open while the job stops (its last reads
        # confirm what it handled), and the keeper renewing meanwhile.
        for task in (job, keeper):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


__all__ = ["Job", "while_held"]
