"""The one backoff policy: after the n-th failure in a row, wait `base · 2ⁿ`, at most
`cap` seconds. Every retry loop (Bot API calls, the change stream, start-up) uses it."""

from __future__ import annotations

from dataclasses import dataclass

BASE = 0.5
CAP = 30.0


@dataclass(frozen=True)
class Backoff:
    base: float = BASE
    cap: float = CAP

    def delay(self, failures: int) -> float:
        """Seconds to wait after `failures` failures in a row (0: none yet)."""
        # The exponent is bounded: 2.0 ** 1024 overflows, and a Bot API down for hours
        # counts that many failures.
        return float(min(self.base * 2.0 ** min(max(failures, 0), 64), self.cap))


__all__ = ["Backoff"]
