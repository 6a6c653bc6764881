"""One time scale for pacing: `PROGRESSCAST_TIME_SCALE` (default 1).

Every pacing interval of the channel adapters and of the emulators in
`progresscast.testing` is multiplied by it (and every rate divided by it), so tests run
the real pacing logic at a fraction of real time: at 0.05, Telegram's one call per
second per chat becomes one per 50 ms, on both sides. Production leaves it unset.
"""

from __future__ import annotations

import os

ENV = "PROGRESSCAST_TIME_SCALE"


def time_scale() -> float:
    """The scale, read when a pacer or an emulator is made; bad values mean 1."""
    raw = os.environ.get(ENV, "")
    try:
        value = float(raw) if raw else 1.0
    except ValueError:
        return 1.0
    return value if 0 < value <= 1000 else 1.0


__all__ = ["ENV", "time_scale"]
