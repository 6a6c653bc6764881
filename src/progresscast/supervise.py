"""Nothing stops `serve` but a signal: every long-running task runs supervised.

`supervise(job, what)` runs `job()` until it returns or the task is cancelled. When it
raises — Redis went away mid-command, an agent sent something no handler expected, a
library bug — the failure is logged (at most once per `what` and kind of exception per
interval, `failure_log.py`), the one backoff policy (`backoff.py`) says how long to
wait, and `job()` runs again; the tasks beside it keep going. Failures count as "in a
row" until a run lasts `steady` seconds, so a job that fails at once every time backs
off to the cap and one that failed after an hour starts again at once.

Mistakes in the configuration (`ConfigError`: a bot token the server refuses) are not
retried: they end `serve` with one line, as they do at start-up.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from .backoff import Backoff
from .config.errors import ConfigError
from .failure_log import FailureLog
from .stopping import still_wanted

log = logging.getLogger("progresscast")

BACKOFF = Backoff()
"""The one retry policy."""
FAILURES = FailureLog(log)
"""One failure log for every supervised task that is given none of its own."""
STEADY = 60.0
"""Seconds a run must last for its failure to count as the first of a new series."""

Job = Callable[[], Awaitable[None]]


def _fatal(exc: BaseException, fatal: tuple[type[BaseException], ...]) -> bool:
    """Whether `exc` is, or (from a task group) holds, a failure nothing should retry."""
    if isinstance(exc, fatal):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return any(_fatal(inner, fatal) for inner in exc.exceptions)
    return False


async def supervise(
    job: Job,
    what: str,
    *,
    failures: FailureLog = FAILURES,
    backoff: Backoff = BACKOFF,
    steady: float = STEADY,
    fatal: tuple[type[BaseException], ...] = (ConfigError,),
) -> None:
    """Run `job()` until it returns or this task is cancelled, running it again after
    each failure (see the module). `what` names the task in the log, and is the kind
    under which its failures are counted: the same for a family of tasks (every chat's
    lane), so 10,000 of them failing at once log one line."""
    loop = asyncio.get_running_loop()
    in_a_row = 0
    while True:
        await still_wanted()
        began = loop.time()
        try:
            await job()
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if _fatal(exc, fatal):
                raise
            # A library may turn a cancel into an error of its own: asked to stop, stop.
            await still_wanted()
            if loop.time() - began >= steady:
                in_a_row = 0
            delay = backoff.delay(in_a_row)
            in_a_row += 1
            # %r: the exception's text may carry what an agent or a server sent.
            failures.exception(
                f"{what}: {type(exc).__name__}", "%s failed (%s: %r); restarting it in %.1f s",
                what, type(exc).__name__, str(exc), delay,
            )
        await asyncio.sleep(delay)


def spawn(job: Job, what: str, *, name: str | None = None, failures: FailureLog = FAILURES,
          backoff: Backoff = BACKOFF) -> asyncio.Task[None]:
    """A task running `job` supervised (`supervise`)."""
    return asyncio.get_running_loop().create_task(
        supervise(job, what, failures=failures, backoff=backoff), name=name or what
    )


__all__ = ["BACKOFF", "FAILURES", "STEADY", "spawn", "supervise"]
