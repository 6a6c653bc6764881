"""At most one log line per kind of failure per interval (chat lanes, and every task
`serve` supervises).

When Redis or the channel's API is down, every destination's lane fails the same way at
about the same time: 10,000 followed chats would log 10,000 lines per retry. A kind of
failure (a short fixed name, such as `draft failed: ConnectionError`) is logged the
first time, then at most once per `interval`, that line saying how many more were seen.
A problem of one thing (a destination, a task) is logged once for good (`Once`).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

INTERVAL = 60.0


class FailureLog:
    def __init__(
        self, log: logging.Logger, interval: float = INTERVAL, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.log = log
        self.interval = interval
        self.clock = clock
        self._last: dict[str, float] = {}
        self._unsaid: dict[str, int] = {}

    def warning(self, kind: str, message: str, *args: object) -> None:
        self._emit(logging.WARNING, kind, message, args, exc_info=False)

    def log_at(self, level: int, kind: str, message: str, *args: object) -> None:
        """A line at `level`, without a traceback."""
        self._emit(level, kind, message, args, exc_info=False)

    def error(self, kind: str, message: str, *args: object) -> None:
        self._emit(logging.ERROR, kind, message, args, exc_info=False)

    def exception(self, kind: str, message: str, *args: object, error: BaseException | None = None) -> None:
        """An error with a traceback: `error`'s, else the current exception's (in an `except`)."""
        self._emit(logging.ERROR, kind, message, args, exc_info=error if error is not None else True)

    def _emit(
        self, level: int, kind: str, message: str, args: tuple[object, ...], *, exc_info: bool | BaseException
    ) -> None:
        now = self.clock()
        last = self._last.get(kind)
        if last is not None and now - last < self.interval:
            self._unsaid[kind] = self._unsaid.get(kind, 0) + 1
            return
        self._last[kind] = now
        unsaid = self._unsaid.pop(kind, 0)
        if unsaid:
            message += f" (and {unsaid} more like it in the last {self.interval:.0f} s)"
        self.log.log(level, message, *args, exc_info=exc_info)


class Once:
    """The keys seen lately, so that a repeated problem of one thing is logged once. It
    forgets its oldest keys past `limit`: a long-running process must not grow without
    bound."""

    def __init__(self, limit: int = 1024) -> None:
        self.limit = limit
        self._seen: OrderedDict[Hashable, None] = OrderedDict()

    def first(self, key: Hashable) -> bool:
        """True the first time `key` is seen (or once it was forgotten)."""
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self.limit:
            self._seen.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._seen)


__all__ = ["INTERVAL", "FailureLog", "Once"]
