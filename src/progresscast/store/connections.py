"""Which Redis to talk to, and the asyncio clients for it, one per connection role.

Order (docs/cli.md): `--redis URL`, else PROGRESSCAST_REDIS_URL, else the config's
`store.url`, else the embedded Redis under PROGRESSCAST_HOME. A URL with the scheme
`redis+cluster://host:port` (`rediss+cluster://` for TLS) names any node of a Redis
Cluster; every other URL one server.

Every timeout is chosen here, per role:

- **commands** (card writes and reads, RPC, pages): one bounded *blocking* pool of
  `store.maxConnections` per process — a burst waits for a free connection instead
  of failing with "Too many connections" — with short connect and socket timeouts
  and one quick retry, so an unreachable Redis answers an error within 2 s. A pool
  keeps one of its connections per `KEEP_FROM` (at most `KEEP_MOST`) for the client's
  batches (`coalescing.py`).
- **readers** (the live hub's XREAD and consumer groups' XREADGROUP, which BLOCK for
  `READ_BLOCK_MS`): their own small pool, whose socket timeout is well above
  the block time, so a quiet spell is never mistaken for a dead server.
- **quick** (the agent hooks): a short-lived caller that must never hold its agent
  up: tiny timeouts, no retries.
"""

from __future__ import annotations

import asyncio
import os
from enum import StrEnum
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

from redis.asyncio import BlockingConnectionPool, RedisCluster
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError as RedisConnectionError

from ..config.errors import ConfigError
from . import retention, sharding
from .coalescing import CoalescingRedis, LoadsOnce
from .embedded import ensure_embedded, home_dir, socket_path
from .packing import packing

if TYPE_CHECKING:  # a hook connects without building the settings models (see connect_quick)
    from ..config.settings import Settings

READ_BLOCK_MS = 1_000
"""How long one blocking reader (XREAD, XREADGROUP) waits for news: kept well under
the socket timeout of every role that may run it."""
CONNECT_TIMEOUT = 1.9
"""Seconds to open a connection. A refused connection is retried once at once; a
connect that times out is not retried, so an unreachable Redis fails within 2 s."""
COMMAND_TIMEOUT = READ_BLOCK_MS / 1000 + 3.0
"""Seconds an ordinary command may take. Above the block time too, so a blocking read
that does run on this role (a consumer group sharing the adapter's client) is safe."""
READER_TIMEOUT = READ_BLOCK_MS / 1000 + 5.0
"""Seconds a blocking read may take: the block time plus a wide margin."""
POOL_WAIT = 5.0
"""Seconds a command waits for a free pooled connection before it fails."""
READER_CONNECTIONS = 48
"""Blocking readers per process: one per shard for the live hub and for each group."""
KEEP_FROM = 8
"""A commands pool keeps one connection for batches per this many of its connections
(none under 8): one in eight fewer for the rest (a blocking read on this role among
them) is no shortage."""
KEEP_MOST = 4
"""The most connections a commands pool keeps for batches."""

CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
URL_SCHEMES = ("redis://", "rediss://", "unix://", "redis+cluster://", "rediss+cluster://")


HOOK_CONNECT_TIMEOUT = 0.25
"""Seconds a hook waits to connect to Redis: a hook must never hold its agent up, so a
store that is down is given up on at once (and said so on stderr)."""
HOOK_ANSWER_TIMEOUT = 2.0
"""Seconds a hook waits for a connected Redis to answer: a store busy for a moment (a
loaded machine, a slow fsync of the append-only file) is waited for, since a hook that
gave up would lose its write — the card wrong until the agent's next event, or for good
at the end of a run. A store silent for longer is given up on."""


class Role(StrEnum):
    commands = "commands"
    readers = "readers"
    quick = "quick"


class UrlError(ValueError):
    pass


def redis_url(cli_url: str | None = None, settings: Settings | None = None, *, start: bool = True) -> str:
    """The URL to use; raises ConfigError naming where a malformed one came from.
    `start=False`: the embedded Redis' URL without starting it (to name it, not use it)."""
    return choose_url(cli_url, settings.store.url if settings is not None else None, start=start)


def choose_url(cli_url: str | None, store_url: str | None, *, start: bool = True) -> str:
    """`redis_url` given the config's `store.url` itself."""
    for source, url in (
        ("--redis", cli_url),
        ("PROGRESSCAST_REDIS_URL", os.environ.get("PROGRESSCAST_REDIS_URL")),
        ("store.url", store_url),
    ):
        if url:
            if not url.startswith(URL_SCHEMES):
                raise ConfigError(f"{source}: {url!r} is not a Redis URL (it must start with {', '.join(URL_SCHEMES)})")
            return url
    return ensure_embedded() if start else f"unix://{socket_path(home_dir())}"


# A client made by `connect` decodes every reply to str, which redis-py's annotations
# cannot express (they allow bytes too): readers `cast` replies to these shapes.
StreamEntry = tuple[str, dict[str, str]]
StreamReply = list[tuple[str, list[StreamEntry]]]


def is_cluster(url: str) -> bool:
    return urlsplit(url).scheme in CLUSTER_SCHEMES


def _retry() -> Retry:
    # Once, quickly, and only on a lost connection: a timed-out write is not repeated
    # blindly (it may have run), and an unreachable Redis fails fast.
    return Retry(ExponentialBackoff(cap=0.2, base=0.05), retries=1, supported_errors=(RedisConnectionError,))


class _BoundedCluster(LoadsOnce, RedisCluster):  # type: ignore[misc]  # redis-py's own bases disagree on command_info
    """A RedisCluster whose commands and pipelines together use at most `limit`
    connections, waiting for a turn past that (its own node pools would raise); the
    callers that find a script missing together load it once."""

    def __init__(self, *args: Any, limit: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._turns = asyncio.Semaphore(limit)

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        async with self._turns:
            return await super().execute_command(*args, **kwargs)

    def pipeline(self, transaction: Any | None = None, shard_hint: Any | None = None) -> Any:
        pipe = super().pipeline(transaction, shard_hint)
        execute = pipe.execute
        turns = self._turns

        async def bounded(*args: Any, **kwargs: Any) -> Any:
            async with turns:
                return await execute(*args, **kwargs)

        pipe.execute = bounded  # type: ignore[method-assign]
        return pipe


def connect(url: str, settings: Settings | None = None, *, role: Role = Role.commands) -> Any:
    """A client for `url` in `role`, on a Redis server or a Redis Cluster."""
    if role is Role.quick:
        return connect_quick(url, settings.store.shards if settings is not None else None)
    if settings is None:
        from ..config.settings import Settings

        settings = Settings()
    store = settings.store
    limit = store.maxConnections if role is Role.commands else READER_CONNECTIONS
    timeout = COMMAND_TIMEOUT if role is Role.commands else READER_TIMEOUT
    keep = min(KEEP_MOST, limit // KEEP_FROM) if role is Role.commands else 0
    client = _client(url, timeout, CONNECT_TIMEOUT, limit, _retry(), store.shards, keep=keep)
    if "retention" in store.model_fields_set:  # set in the config: recorded in the store
        retention.configure(client, store.retention)
    return client


def connect_quick(url: str, shards: int | None = None) -> Any:
    """A client for short-lived callers (the agent hooks): short timeouts, no retries.
    `shards` is the configured `store.shards` (a hook does not load every setting)."""
    return _client(url, HOOK_ANSWER_TIMEOUT, HOOK_CONNECT_TIMEOUT, 4, Retry(NoBackoff(), 0), shards)


def _client(
    url: str, socket_timeout: float, connect_timeout: float, limit: int, retry: Retry, shards: int | None,
    *, keep: int = 0,
) -> Any:
    """`keep`: connections the client keeps for its batches (a server, not a Cluster)."""
    parts = urlsplit(url)
    common: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": connect_timeout,
        "retry": retry,
        "health_check_interval": 30,
    }
    if parts.scheme in CLUSTER_SCHEMES:
        if not parts.hostname:
            raise UrlError(f"{url}: a cluster URL names one node, as redis+cluster://host:port")
        node_url = urlunsplit(parts._replace(scheme=CLUSTER_SCHEMES[parts.scheme]))
        client: Any = _BoundedCluster.from_url(node_url, limit=limit, max_connections=limit, **common)
    else:
        pool = BlockingConnectionPool.from_url(url, max_connections=limit, timeout=POOL_WAIT, **common)
        pool.connection_class = packing(pool.connection_class)  # the class the URL chose (TCP, TLS, unix)
        client = CoalescingRedis(connection_pool=pool, keep_connections=keep)
    if shards is not None:
        sharding.configure(client, shards)
    return client
