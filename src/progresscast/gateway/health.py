"""`GET /healthz` and `GET /metrics`: is this process able to work, and what it did.

Both are unauthenticated (load balancers and Prometheus scrape them) and say nothing
about cards: reachability, consumer lag and counts only.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from .. import metrics
from ..config.settings import Settings
from ..store import keys
from ..store.events import group_lag
from ..store.lease import INSTANCE
from ..store.sharding import layout_of
from .state import gateway_of

PING_TIMEOUT = 1.5
"""Seconds /healthz waits for Redis before it answers 503."""
MAX_LAG = 10_000
"""A consumer group further behind than this many events makes /healthz answer 503."""
FOLLOW_CHATS_SCANNED = 10_000
"""Destinations whose follows are counted, per channel (a bound on one scrape's work)."""


async def consumer_lag(redis: Any) -> dict[str, int]:
    """Per consumer group: undelivered + unacknowledged events over every shard."""
    lag: dict[str, int] = {}
    for stream in (await layout_of(redis)).streams:
        try:
            groups = await redis.xinfo_groups(stream)
        except RedisError:
            continue  # no such stream yet
        for info in groups:
            name = str(info.get("name"))
            lag[name] = lag.get(name, 0) + await group_lag(redis, stream, name)
    return lag


def follow_channels(settings: Settings) -> dict[str, str]:
    """The channels whose follows are counted: label (the channel's consumer group, as
    `progresscast_consumer_lag` names it) → the namespace of its keys. The first Telegram
    bot always (its keys need no token), another bot when this process has its token
    (its id names its keys), Slack and Discord when configured."""
    from ..telegram.standby import bots

    channels = {"telegram": keys.TG}
    for bot in bots(settings):
        channels[bot.group] = bot.namespace
    if settings.channels.slack is not None:
        channels["slack"] = keys.SLACK
    if settings.channels.discord is not None:
        channels["discord"] = keys.DISCORD
    return channels


async def follows(redis: Any, namespace: str) -> int:
    """Chat topics (Slack threads) following an owner in one channel: one SCARD per
    destination, each a key of its own (no command spans Cluster slots), pipelined."""
    chats = list(await redis.smembers(keys.channel_destinations(namespace)))[:FOLLOW_CHATS_SCANNED]
    if not chats:
        return 0
    async with redis.pipeline(transaction=False) as pipe:
        for chat in chats:
            pipe.scard(keys.channel_follows(namespace, chat.decode() if isinstance(chat, bytes) else chat))
        counts = await pipe.execute()
    return sum(int(n) for n in counts)


async def lease_holders(redis: Any, bot_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Per configured bot: which process holds its lease (None: nobody, now), and
    whether it is this one."""
    out: dict[str, dict[str, Any]] = {}
    for bot_id in bot_ids:
        holder = await redis.get(keys.tg_lease(bot_id))
        holder = holder.decode() if isinstance(holder, bytes) else holder
        out[bot_id] = {"holder": holder, "here": holder == INSTANCE}
    return out


def _bot_ids(request: Request) -> list[str]:
    from ..telegram.standby import bots

    return [bot.bot_id for bot in bots(gateway_of(request).settings)]


async def _observe(redis: Any, settings: Settings) -> dict[str, int]:
    await redis.ping()
    lag = await consumer_lag(redis)
    for group, value in lag.items():
        metrics.CONSUMER_LAG.labels(group).set(value)
    for channel, namespace in follow_channels(settings).items():
        metrics.FOLLOWS.labels(channel).set(await follows(redis, namespace))
        metrics.PAUSED.labels(channel).set(int(await redis.hlen(keys.channel_paused(namespace))))
    return lag


async def healthz(request: Request) -> Response:
    gw = gateway_of(request)
    try:
        lag = await asyncio.wait_for(_observe(gw.redis, gw.settings), PING_TIMEOUT)
    except (RedisError, TimeoutError, OSError) as exc:
        reason = f"redis is not answering: {exc or type(exc).__name__}"
        return JSONResponse({"ok": False, "reason": reason}, status_code=503)
    behind = {g: n for g, n in lag.items() if n > MAX_LAG}
    body: dict[str, Any] = {"ok": not behind, "redis": "ok", "consumerLag": lag}
    if bot_ids := _bot_ids(request):
        try:
            body["telegramLease"] = await asyncio.wait_for(lease_holders(gw.redis, bot_ids), PING_TIMEOUT)
        except (RedisError, TimeoutError, OSError) as exc:
            return JSONResponse({"ok": False, "reason": f"redis is not answering: {exc or type(exc).__name__}"},
                                status_code=503)
    if behind:
        group, n = max(behind.items(), key=lambda kv: kv[1])
        body["reason"] = f"consumer group {group} is {n} events behind (more than {MAX_LAG})"
        return JSONResponse(body, status_code=503)
    return JSONResponse(body)


async def metrics_page(request: Request) -> Response:
    gw = gateway_of(request)
    try:
        await asyncio.wait_for(_observe(gw.redis, gw.settings), PING_TIMEOUT)
    except (RedisError, TimeoutError, OSError):
        pass  # counters are still worth scraping; the gauges keep their last value
    return Response(generate_latest(), media_type=CONTENT_TYPE_LATEST)
