"""Keeping far below Discord's invalid-request limit (10,000 401/403/429 answers per 10
minutes bans the bot's IP for an hour).

Every 401, 403 and 429 answer is counted in a sliding window; past `limit` of them
within `window` seconds the breaker *trips*: the bot makes no call for `pause.base` seconds
(doubling while it keeps tripping, up to `pause.cap`; the client answers
`rate_limited` meanwhile without making the call), and says so in the log once per
trip. A 429 with `global` pauses the bot for its `retry_after`.

A channel that refuses the bot (Missing Access, Missing Permissions, Unknown Channel)
is not the breaker's: the client answers `forbidden`, and the shared worker pauses that
channel (`channels/chat/pause.py`), so a refusing channel costs one call per probe.

Seconds are the service's: multiplied by the time scale, as every pace is.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ..backoff import Backoff
from ..timescale import time_scale


@dataclass(frozen=True)
class BreakerSettings:
    limit: int = 50
    """Invalid answers (401, 403, 429) within `window` that trip the breaker."""
    window: float = 60.0
    pause: Backoff = field(default_factory=lambda: Backoff(60.0, 600.0))
    """How long a trip stops the bot: doubling with each trip in a row (backoff.py)."""
    scale: float = field(default_factory=time_scale)


class Breaker:
    def __init__(
        self, settings: BreakerSettings | None = None, *, log: logging.Logger | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.settings = settings or BreakerSettings()
        self.log = log or logging.getLogger("progresscast.discord")
        self.clock = clock
        self._invalid: deque[float] = deque()
        self._paused_until = 0.0
        self._trips = 0

    def paused_for(self) -> float:
        """Seconds (service seconds, unscaled) until the bot may call again; 0: now."""
        left = self._paused_until - self.clock()
        return max(0.0, left) / self.settings.scale

    def hold(self, seconds: float) -> None:
        """Discord said the bot as a whole must wait (a global 429)."""
        self._paused_until = max(self._paused_until, self.clock() + seconds * self.settings.scale)

    def answered(self, status: int) -> None:
        """Count an answer; trips the breaker past the limit."""
        if status not in (401, 403, 429):
            return
        s = self.settings
        now = self.clock()
        self._invalid.append(now)
        while self._invalid and self._invalid[0] < now - s.window * s.scale:
            self._invalid.popleft()
        if len(self._invalid) < s.limit:
            if now > self._paused_until + s.window * s.scale:
                self._trips = 0  # quiet for a window since the last pause: start over
            return
        pause = s.pause.delay(self._trips)
        self._trips += 1
        self._invalid.clear()
        self._paused_until = max(self._paused_until, now + pause * s.scale)
        self.log.error(
            "Discord refused %d requests (401/403/429) within %.0f s: pausing the bot for %.0f s "
            "(Discord bans a bot that makes 10,000 of them in 10 minutes)", s.limit, s.window, pause,
        )


__all__ = ["Breaker", "BreakerSettings"]
