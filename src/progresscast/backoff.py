"""The one backoff policy: after the n-th failure in a row, wait `base · 2ⁿ`, at most
`cap` seconds. Every retry loop (Bot API calls, the change stream, start-up) uses it,
through `Retrying`: run the attempt; on a failure it may retry, log (at most once per
interval and kind of failure, `failure_log.py`) and wait the policy's next delay; a
success starts the count again; a cancel stops it at once; `tries` bounds the failures
in a row where giving up is better than waiting on (looking for an unsure message)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from .failure_log import FailureLog
from .stopping import still_wanted

BASE = 0.5
CAP = 30.0

T = TypeVar("T")


@dataclass(frozen=True)
class Backoff:
    base: float = BASE
    cap: float = CAP

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` failures in a row (0: none yet)."""
        # The exponent is bounded: 2.0 ** 1024 overflows, and a Bot API down for hours
        # counts that many failures.
        return float(min(self.base * 2.0 ** min(max(failures, 0), 64), self.cap))


class Retrying:
    """One retry loop: its failures in a row under `backoff`, and how they are logged.

    `what` starts each line (`cannot reach Slack`), which goes on with the failure
    (`describe(exc)`, its text unless told) and the wait. The lines go through
    `failures` — one `FailureLog` can serve a family of loops (every shard's reader), so
    an outage they all see is one line per interval — else through a log of this loop's
    own, still at most one line per interval and kind of exception."""

    def __init__(
        self,
        what: str,
        *,
        log: logging.Logger | FailureLog,
        backoff: Backoff | None = None,
        describe: Callable[[Exception], object] = str,
        level: int = logging.WARNING,
    ) -> None:
        self.what = what
        self.failures = log if isinstance(log, FailureLog) else FailureLog(log)
        self.backoff = backoff or Backoff()
        self.describe = describe
        self.level = level
        self.in_a_row = 0

    def succeeded(self) -> None:
        """The next failure is the first of a new series (for an attempt that runs on:
        a stream that delivered something)."""
        self.in_a_row = 0

    async def run(
        self,
        attempt: Callable[[], Awaitable[T]],
        *,
        retry_on: tuple[type[Exception], ...] = (Exception,),
        give_up: tuple[type[Exception], ...] = (),
        tries: int | None = None,
    ) -> T:
        """`attempt()`'s result, retrying it after each failure of a `retry_on` type
        (any other, and one of `give_up`, is raised) until it succeeds or this task is
        cancelled — or, with `tries`, until that many failures in a row: the last is raised
        (and the count starts again)."""
        while True:
            await still_wanted()
            try:
                result = await attempt()
            except asyncio.CancelledError:
                raise
            except give_up:
                raise
            except retry_on as exc:
                # A library may turn a cancel into an error of its own: asked to stop, stop.
                await still_wanted()
                delay = self.backoff.delay(self.in_a_row)
                self.in_a_row += 1
                if tries is not None and self.in_a_row >= tries:
                    self.in_a_row = 0
                    raise
                self.failures.log_at(
                    self.level, f"{self.what}: {type(exc).__name__}", "%s (%s); retrying in %.1f s",
                    self.what, self.describe(exc), delay,
                )
                await asyncio.sleep(delay)
                continue
            self.in_a_row = 0
            return result


async def retrying(
    attempt: Callable[[], Awaitable[T]],
    what: str,
    *,
    log: logging.Logger | FailureLog,
    backoff: Backoff | None = None,
    retry_on: tuple[type[Exception], ...] = (Exception,),
    give_up: tuple[type[Exception], ...] = (),
    describe: Callable[[Exception], object] = str,
) -> T:
    """`attempt()`'s result, retried as `Retrying.run` says (a one-off: start-up calls)."""
    loop = Retrying(what, log=log, backoff=backoff, describe=describe)
    return await loop.run(attempt, retry_on=retry_on, give_up=give_up)


__all__ = ["Backoff", "Retrying", "retrying"]
