"""Discord's REST API over httpx: one request, its answer, and the buckets its
`X-RateLimit-*` headers describe.

Why not hikari's `RESTApp`: measured against the emulator, hikari answers a 429 with
`global: true` by throttling its global limiter and sending the same request again
at once (21 ms after a 429 that said `retry_after` 0.3 s) — a repeat Discord counts
as another invalid request, and one the adapter cannot stop — and it waits out route
limits inside the call, where the adapter's pacer cannot render newer content
meanwhile. Here nothing is retried: every limit comes back to the caller as
`RateLimited`, and the pacer waits.

Buckets: every answer may carry `X-RateLimit-Bucket`, `-Limit`, `-Remaining`,
`-Reset-After` and `-Scope`. A route (method and path template) learns its bucket
from them; a call to a bucket that said `Remaining: 0` is refused here, before it
leaves, until its `Reset-After` passed (per channel: Discord's message buckets are per
channel). A 429 says `retry_after` (seconds, a float) and whether it is `global`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import httpx

USER_AGENT = "DiscordBot (https://github.com/progresscast/progresscast, 0.1)"


class DiscordHTTPError(Exception):
    """A 4xx or 5xx answer: its status, Discord's JSON error `code` and `message`."""

    def __init__(self, status: int, code: int, message: str) -> None:
        super().__init__(f"{status} {message} ({code})")
        self.status, self.code, self.message = status, code, message


class RateLimited(Exception):
    """A 429 — or a call refused before it left because its bucket is empty."""

    def __init__(self, retry_after: float, *, is_global: bool, sent: bool) -> None:
        super().__init__(f"rate limited for {retry_after:.3f} s" + (" (global)" if is_global else ""))
        self.retry_after = retry_after
        self.is_global = is_global
        self.sent = sent
        """The request reached Discord (a 429 answer), as against refused here."""


@dataclass
class _Bucket:
    remaining: int
    reset_at: float


class DiscordREST:
    """Requests to `base_url` as the bot; `client` may be given (tests share one)."""

    def __init__(
        self, base_url: str, token: str, *, timeout: float = 10.0, max_connections: int = 16,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bot {token}", "User-Agent": USER_AGENT},
            timeout=timeout,
            limits=httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections),
        )
        self.clock = clock
        self._route_bucket: dict[str, str] = {}
        self._buckets: dict[tuple[str, str], _Bucket] = {}

    async def close(self) -> None:
        await self.http.aclose()

    def _check(self, route: str, major: str) -> None:
        name = self._route_bucket.get(route)
        bucket = self._buckets.get((name, major)) if name else None
        if bucket is not None and bucket.remaining <= 0:
            wait = bucket.reset_at - self.clock()
            if wait > 0:
                raise RateLimited(wait, is_global=False, sent=False)

    def _learn(self, route: str, major: str, headers: httpx.Headers) -> None:
        name = headers.get("x-ratelimit-bucket")
        if not name:
            return
        self._route_bucket[route] = name
        try:
            remaining = int(headers.get("x-ratelimit-remaining", "1"))
            after = float(headers.get("x-ratelimit-reset-after", "0"))
        except ValueError:
            return
        self._buckets[(name, major)] = _Bucket(remaining, self.clock() + after)

    async def request(
        self, method: str, template: str, *, major: str = "", path: str | None = None,
        json: Any = None, params: dict[str, str] | None = None,
    ) -> Any:
        """One call: `template` names the route (`/channels/{channel}/messages`), `path`
        is the actual one, `major` the id Discord buckets it by (the channel). Returns the
        JSON answer (None for 204); raises `RateLimited`, `DiscordHTTPError`, or
        httpx's transport errors."""
        route = f"{method} {template}"
        self._check(route, major)
        response = await self.http.request(method, path or template, json=json, params=params)
        self._learn(route, major, response.headers)
        if response.status_code == 429:
            body = _json(response)
            retry = body.get("retry_after") if isinstance(body, dict) else None
            try:
                wait = float(retry if retry is not None else response.headers.get("retry-after", "1"))
            except (TypeError, ValueError):
                wait = 1.0
            is_global = bool(isinstance(body, dict) and body.get("global")) or (
                response.headers.get("x-ratelimit-global", "").lower() == "true"
            )
            raise RateLimited(wait, is_global=is_global, sent=True)
        if response.status_code >= 400:
            body = _json(response)
            code = int(body.get("code", 0) or 0) if isinstance(body, dict) else 0
            message = str(body.get("message", "")) if isinstance(body, dict) else ""
            raise DiscordHTTPError(response.status_code, code, message or response.reason_phrase)
        if response.status_code == 204 or not response.content:
            return None
        return _json(response)


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


__all__ = ["USER_AGENT", "DiscordHTTPError", "DiscordREST", "RateLimited"]
