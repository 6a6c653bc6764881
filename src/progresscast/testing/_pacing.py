"""Telegram's flood limits as token buckets: a short burst, then a steady rate.

Telegram publishes only approximations (about 1 message per second per chat,
20 per minute per group, 30 per second per bot) and tolerates short bursts; a
token bucket states exactly that and keeps the emulator deterministic enough to
test against. A call refused with 429 takes no token, and a call the server then
rejects (400) gets its token back — only calls that go through count.

Time runs at `timescale.time_scale()` (`PROGRESSCAST_TIME_SCALE`), as the adapter's
pacing does: at 0.05 a bucket refills 20 times faster, and a `retry_after` is counted
in scaled seconds (the adapter scales it back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ..timescale import time_scale


@dataclass(frozen=True)
class Pace:
    """``burst`` calls at once, then ``per_second`` calls per second."""

    burst: float
    per_second: float


PRIVATE_PACE = Pace(burst=3, per_second=1.0)
GROUP_PACE = Pace(burst=20, per_second=20 / 60)
BOT_PACE = Pace(burst=30, per_second=30.0)


@dataclass
class _Bucket:
    pace: Pace
    tokens: float
    updated: float
    scale: float = 1.0

    def refill(self, now: float) -> None:
        # Requests are stamped when they arrive but may take their token out of order
        # (each awaits its body first): the clock of a bucket never goes back.
        elapsed = max(0.0, now - self.updated) / self.scale
        self.tokens = min(self.pace.burst, self.tokens + elapsed * self.pace.per_second)
        self.updated = max(self.updated, now)

    def wait(self) -> float:
        """Seconds until one token is available (0 when one is)."""
        if self.tokens >= 1:
            return 0.0
        return (1 - self.tokens) / self.pace.per_second


@dataclass(frozen=True)
class Refusal:
    """Why a call was refused: the limit that had no token, and the ``retry_after``."""

    limit: str
    """``chat`` (the chat's own limit) or ``bot`` (the whole bot's)."""
    retry_after: int


@dataclass
class Pacer:
    """Per-chat and per-bot buckets; a rule set to None switches that limit off."""

    private: Pace | None = PRIVATE_PACE
    group: Pace | None = GROUP_PACE
    bot: Pace | None = BOT_PACE
    scale: float = field(default_factory=time_scale)
    _buckets: dict[object, _Bucket] = field(default_factory=dict)

    def take(self, chat_id: int, chat_type: str, now: float) -> Refusal | None:
        """Take a token for a call to ``chat_id``; why not, when there is none."""
        rule = self.private if chat_type == "private" else self.group
        found = {"chat": self._bucket(chat_id, rule, now), "bot": self._bucket("bot", self.bot, now)}
        buckets = {limit: b for limit, b in found.items() if b}
        waits = {limit: b.wait() for limit, b in buckets.items()}
        limit = max(waits, key=waits.__getitem__, default=None)
        if limit is not None and waits[limit] > 0:
            return Refusal(limit, max(1, math.ceil(waits[limit])))
        for b in buckets.values():
            b.tokens -= 1
        return None

    def give_back(self, chat_id: int) -> None:
        """Return the token of a call the server then rejected."""
        for key in (chat_id, "bot"):
            bucket = self._buckets.get(key)
            if bucket:
                bucket.tokens = min(bucket.pace.burst, bucket.tokens + 1)

    def reset(self) -> None:
        self._buckets.clear()

    def _bucket(self, key: object, rule: Pace | None, now: float) -> _Bucket | None:
        if rule is None:
            return None
        bucket = self._buckets.get(key)
        if bucket is None or bucket.pace != rule:
            bucket = self._buckets[key] = _Bucket(rule, rule.burst, now, self.scale)
        bucket.refill(now)
        return bucket
