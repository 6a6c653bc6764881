"""Discord's rate limits as the emulator applies them: fixed windows per bucket.

Every message call (create, edit, delete) takes from its channel's bucket (5 per 5 s
by default) and every call from the bot's global one (50 a second). A call with no
room left is refused with 429: `retry_after` (seconds, a float) and `global` in the
body, `Retry-After` and the `X-RateLimit-*` headers. Successful message calls carry the
bucket's headers too (`Bucket`, `Limit`, `Remaining`, `Reset`, `Reset-After`,
`Scope`). Windows last `period × time_scale` real seconds, and the headers say them so.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ._discord_state import DiscordError

MESSAGE_ROUTES = frozenset({"create_message", "edit_message", "delete_message"})
BUCKET = "c0ffee0messages"


@dataclass
class Window:
    """A fixed-window bucket, as Discord's: `limit` calls, then none until it resets."""

    limit: int
    period: float
    used: int = 0
    reset_at: float = 0.0

    def wait(self, now: float) -> float:
        if now >= self.reset_at:
            self.used, self.reset_at = 0, now + self.period
        return 0.0 if self.used < self.limit else self.reset_at - now

    def headers(self, now: float) -> dict[str, str]:
        after = max(0.0, self.reset_at - now)
        return {
            "X-RateLimit-Bucket": BUCKET,
            "X-RateLimit-Limit": str(self.limit),
            "X-RateLimit-Remaining": str(max(0, self.limit - self.used)),
            "X-RateLimit-Reset": f"{time.time() + after:.3f}",
            "X-RateLimit-Reset-After": f"{after:.3f}",
            "X-RateLimit-Scope": "user",
        }


def limited(wait: float, is_global: bool, headers: dict[str, str]) -> DiscordError:
    """A 429 as Discord words it: `retry_after` a float, `global`, and `Retry-After`."""
    message = "You are being rate limited."
    body = {"message": message, "retry_after": round(wait, 3), "global": is_global, "code": 0}
    return DiscordError(429, 0, message, headers={**headers, "Retry-After": str(max(1, round(wait)))}, body=body)


@dataclass
class Limits:
    """The emulator's buckets; a limit set to None is off."""

    message_limit: int | None = 5
    message_period: float = 5.0
    global_limit: int | None = 50
    scale: float = 1.0
    _windows: dict[str, Window] = field(default_factory=dict)

    def _window(self, key: str, limit: int | None, period: float) -> Window | None:
        if limit is None:
            return None
        window = self._windows.get(key)
        if window is None:
            window = self._windows[key] = Window(limit, period * self.scale)
        return window

    def take(self, route: str, channel: str | None, headers: dict[str, str]) -> None:
        """Take from the global window and, for a message call, the channel's; raises a
        429 when there is no room. The bucket's headers are added to `headers`."""
        now = time.monotonic()
        glob = self._window("global", self.global_limit, 1.0)
        local = None
        if route in MESSAGE_ROUTES and channel is not None:
            local = self._window(f"messages:{channel}", self.message_limit, self.message_period)
        if glob is not None and (wait := glob.wait(now)) > 0:
            raise limited(wait, True, {"X-RateLimit-Global": "true", "X-RateLimit-Scope": "global"})
        if local is not None:
            wait = local.wait(now)
            headers.update(local.headers(now))
            if wait > 0:
                raise limited(wait, False, headers)
            local.used += 1
            headers.update(local.headers(now))
        if glob is not None:
            glob.used += 1


__all__ = ["MESSAGE_ROUTES", "Limits", "Window", "limited"]
