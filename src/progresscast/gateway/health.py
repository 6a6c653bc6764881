"""`GET /healthz` and `GET /metrics`: is this process able to work, and what it did.

`/healthz` is unauthenticated (load balancers ask it) and cheap: one PING, one
`XINFO GROUPS` per shard and one GET per configured bot — never a read of a stream
or of the follows — at most once a second however often it is asked (every answer
within a second is the same observation). It names no host, process or path: Redis
reachability, consumer lag and whether this process holds each bot's lease.

`/metrics` is open unless `gateway.metricsToken` is set (then `Authorization: Bearer`
with it); its gauges are read from Redis at most once a second as well.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError, ResponseError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import metrics
from ..config.settings import Settings
from ..http import errors
from ..http.auth import bearer
from ..store import keys
from ..store.lease import INSTANCE
from ..store.sharding import layout_of
from .state import gateway_of

log = logging.getLogger("progresscast.gateway")

PING_TIMEOUT = 1.5
"""Seconds /healthz waits for Redis before it answers 503."""
MAX_LAG = 10_000
"""A consumer group further behind than this many events makes /healthz answer 503."""
FOLLOW_CHATS_SCANNED = 10_000
"""Destinations whose follows are counted, per channel (a bound on one scrape's work)."""
CACHE_SECONDS = 1.0
"""How long one observation of Redis answers /healthz and /metrics."""

T = TypeVar("T")


class Cached(Generic[T]):
    """The result of `fetch`, reused for CACHE_SECONDS; callers that arrive while it
    runs wait for the same run (one at a time, however many ask)."""

    def __init__(self, fetch: Callable[[], Awaitable[T]]) -> None:
        self.fetch = fetch
        self._value: tuple[float, T] | None = None
        self._running: asyncio.Task[T] | None = None

    async def get(self) -> T:
        if self._value is not None and time.monotonic() - self._value[0] < CACHE_SECONDS:
            return self._value[1]
        if self._running is None or self._running.done():
            self._running = asyncio.ensure_future(self._run())
        # Shielded: one caller giving up must not cancel the others' wait.
        return await asyncio.shield(self._running)

    async def _run(self) -> T:
        value = await self.fetch()
        self._value = (time.monotonic(), value)
        return value


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


async def consumer_lag(redis: Any) -> dict[str, int]:
    """Per consumer group over every shard: events not yet delivered plus those not yet
    acknowledged (`pending`). One XINFO GROUPS per shard; where Redis reports no `lag`
    (before 7.0, or after entries were deleted), one XINFO STREAM more tells a group that
    is caught up (0) or that has read nothing still kept (the stream's length); only a
    group behind in the middle of the stream is counted by reading past its position,
    at most MAX_LAG + 1 entries: never the whole stream."""
    lag: dict[str, int] = {}
    for stream in (await layout_of(redis)).streams:
        try:
            groups = await redis.xinfo_groups(stream)
        except ResponseError:
            continue  # no such stream yet
        shape: dict[str, Any] | None = None
        for info in groups:
            name = _text(info.get("name"))
            behind = info.get("lag")
            if behind is None:
                shape = shape or await redis.xinfo_stream(stream)
                behind = await _undelivered(redis, stream, shape, _text(info.get("last-delivered-id") or "0-0"))
            lag[name] = lag.get(name, 0) + int(info.get("pending") or 0) + int(behind)
    return lag


def _entry(value: Any) -> tuple[int, int]:
    ms, _, seq = _text(value).partition("-")
    return int(ms), int(seq or 0)


async def _undelivered(redis: Any, stream: str, shape: dict[str, Any], delivered: str) -> int:
    first = shape.get("first-entry")
    if not first or _entry(delivered) >= _entry(shape.get("last-generated-id") or "0-0"):
        return 0
    if _entry(delivered) < _entry(first[0]):
        return int(shape.get("length") or 0)
    return len(await redis.xrange(stream, min=f"({delivered}", max="+", count=MAX_LAG + 1))


def follow_channels(settings: Settings) -> dict[str, str]:
    """The channels whose follows are counted: label (the channel's consumer group, as
    `progresscast_consumer_lag` names it) → the namespace of its keys. The first Telegram
    bot always (its keys need no token), another bot when this process has its token
    (its id names its keys), Slack, Discord and Matrix when configured."""
    from ..telegram.standby import bots

    channels = {"telegram": keys.TG}
    for bot in bots(settings):
        channels[bot.group] = bot.namespace
    if settings.channels.slack is not None:
        channels["slack"] = keys.SLACK
    if settings.channels.matrix is not None:
        channels["matrix"] = keys.MATRIX
    if settings.channels.discord is not None:
        channels["discord"] = keys.DISCORD
    return channels


async def follows(redis: Any, namespace: str) -> int:
    """Chat topics (Slack threads) following an owner in one channel: one SCARD per
    destination (at most FOLLOW_CHATS_SCANNED of them), each a key of its own (no
    command spans Cluster slots), pipelined."""
    chats: list[str] = []
    async for chat in redis.sscan_iter(keys.channel_destinations(namespace), count=1000):
        chats.append(_text(chat))
        if len(chats) >= FOLLOW_CHATS_SCANNED:
            break
    if not chats:
        return 0
    async with redis.pipeline(transaction=False) as pipe:
        for chat in chats:
            pipe.scard(keys.channel_follows(namespace, chat))
        counts = await pipe.execute()
    return sum(int(n) for n in counts)


async def lease_holders(redis: Any, bot_ids: list[str]) -> dict[str, dict[str, bool]]:
    """Per configured bot: whether some process holds its lease now, and whether it is
    this one (who holds it is not said: it names a host and a process)."""
    out: dict[str, dict[str, bool]] = {}
    for bot_id in bot_ids:
        holder = await redis.get(keys.tg_lease(bot_id))
        holder = None if holder is None else _text(holder)
        out[bot_id] = {"held": holder is not None, "here": holder == INSTANCE}
    return out


@dataclass(frozen=True)
class Observation:
    lag: dict[str, int] = field(default_factory=dict)
    lease: dict[str, dict[str, bool]] | None = None
    failure: str | None = None
    """Why Redis could not be observed, as said to anyone (no address in it)."""


def _bot_ids(settings: Settings) -> list[str]:
    from ..telegram.standby import bots

    return [bot.bot_id for bot in bots(settings)]


async def observe(redis: Any, settings: Settings) -> Observation:
    async def look() -> Observation:
        await redis.ping()
        lag = await consumer_lag(redis)
        bot_ids = _bot_ids(settings)
        return Observation(lag=lag, lease=await lease_holders(redis, bot_ids) if bot_ids else None)

    try:
        seen = await asyncio.wait_for(look(), PING_TIMEOUT)
    except (RedisError, TimeoutError, OSError) as exc:
        # The detail (it may name Redis's host or socket) goes to the log only.
        log.warning("/healthz: Redis did not answer: %s", exc or type(exc).__name__)
        return Observation(failure=f"redis is not answering ({type(exc).__name__})")
    for group, value in seen.lag.items():
        metrics.CONSUMER_LAG.labels(group).set(value)
    return seen


async def count_follows(redis: Any, settings: Settings) -> None:
    try:
        for channel, namespace in follow_channels(settings).items():
            metrics.FOLLOWS.labels(channel).set(await asyncio.wait_for(follows(redis, namespace), PING_TIMEOUT))
            paused = await asyncio.wait_for(redis.hlen(keys.channel_paused(namespace)), PING_TIMEOUT)
            metrics.PAUSED.labels(channel).set(int(paused))
    except (RedisError, TimeoutError, OSError):
        pass  # counters are still worth scraping; the gauges keep their last value


class Probes:
    """This app's cached observations (app.state.probes)."""

    def __init__(self, redis: Any, settings: Settings) -> None:
        self.health = Cached(lambda: observe(redis, settings))
        self.follows = Cached(lambda: count_follows(redis, settings))


def _probes(request: Request) -> Probes:
    probes: Probes = request.app.state.probes
    return probes


async def healthz(request: Request) -> Response:
    seen = await _probes(request).health.get()
    if seen.failure is not None:
        return JSONResponse({"ok": False, "reason": seen.failure}, status_code=503)
    behind = {g: n for g, n in seen.lag.items() if n > MAX_LAG}
    body: dict[str, Any] = {"ok": not behind, "redis": "ok", "consumerLag": seen.lag}
    if seen.lease is not None:
        body["telegramLease"] = seen.lease
    if behind:
        group, n = max(behind.items(), key=lambda kv: kv[1])
        body["reason"] = f"consumer group {group} is {n} events behind (more than {MAX_LAG})"
        return JSONResponse(body, status_code=503)
    return JSONResponse(body)


async def metrics_page(request: Request) -> Response:
    wanted = gateway_of(request).settings.gateway.metricsToken
    if wanted and not hmac.compare_digest((bearer(request) or "").encode(), wanted.encode()):
        raise errors.ApiError(
            401, "unauthorized", "a valid metrics token is required (Authorization: Bearer <gateway.metricsToken>)"
        )
    probes = _probes(request)
    await probes.health.get()
    await probes.follows.get()
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
