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
        return float(min(self.base * 2.0 ** max(failures, 0), self.cap))


__all__ = ["Backoff"]
