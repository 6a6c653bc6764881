"""Which Redis to talk to, and the asyncio client for it.

Order (docs/cli.md): `--redis URL`, else PROGRESSCAST_REDIS_URL, else the config's
`store.url`, else the embedded Redis under PROGRESSCAST_HOME.
"""

from __future__ import annotations

import os

from redis.asyncio import Redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from .config import ConfigError, Settings
from .embedded import ensure_embedded

URL_SCHEMES = ("redis://", "rediss://", "unix://")


def redis_url(cli_url: str | None = None, settings: Settings | None = None) -> str:
    """The URL to use; raises ConfigError naming where a malformed one came from."""
    for source, url in (
        ("--redis", cli_url),
        ("PROGRESSCAST_REDIS_URL", os.environ.get("PROGRESSCAST_REDIS_URL")),
        ("store.url", settings.store.url if settings is not None else None),
    ):
        if url:
            if not url.startswith(URL_SCHEMES):
                raise ConfigError(f"{source}: {url!r} is not a Redis URL (it must start with {', '.join(URL_SCHEMES)})")
            return url
    return ensure_embedded()


# A client made by `connect` decodes every reply to str, which redis-py's annotations
# cannot express (they allow bytes too): readers `cast` replies to these shapes.
StreamEntry = tuple[str, dict[str, str]]
StreamReply = list[tuple[str, list[StreamEntry]]]


def connect(url: str) -> Redis:
    return Redis.from_url(url, decode_responses=True, health_check_interval=30)


HOOK_TIMEOUT = 0.25
"""Seconds a hook waits to connect to, or hear from, Redis: a hook must never hold its
agent up, so a store that is down is given up on at once (and said so on stderr)."""


def connect_quick(url: str) -> Redis:
    """A client for short-lived callers (the agent hooks): short timeouts, no retries."""
    return Redis.from_url(
        url,
        decode_responses=True,
        socket_connect_timeout=HOOK_TIMEOUT,
        socket_timeout=HOOK_TIMEOUT,
        retry=Retry(NoBackoff(), 0),
    )
