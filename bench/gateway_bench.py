"""Figure 2 — the gateway: `progressCard.put` over HTTP against `CardStore.put` called
directly, on the same Redis in the same run.

`serve` runs in a child process (as in production: its own core); this process is the
client. Direct: `CardInput.parse` + `CardStore.put` from this process, which is what a
Python caller would do with the same JSON. Over HTTP the gateway also parses the body,
checks the token and notes when the request arrived (for resets: no extra round trip).
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from redis.asyncio import Redis

from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect

from ._common import TOKEN, Context, Result, Serve, flush, percentile
from ._http import HTTPConnection

HEADERS = {"Authorization": f"Bearer {TOKEN}"}


def card_params(i: int, version: int) -> dict[str, Any]:
    """A realistic write: 10 steps, one in progress, a short note."""
    plan = [
        {"step": f"Step {k + 1}: look at part {k + 1} of the problem", "status": "completed" if k < version % 10 else "pending"}
        for k in range(10)
    ]
    plan[version % 10]["status"] = "in_progress"
    return {"plan": plan, "markdown": f"Working on **part {version % 10 + 1}**; see `notes.md` (write {version})."}


def rpc_body(i: int, version: int) -> bytes:
    params = {"sessionKey": f"bench-{i}", **card_params(i, version)}
    return json.dumps({"method": "progressCard.put", "params": params}).encode()


async def _http_writer(conn: HTTPConnection, i: int, until: float, lat: list[float], errors: list[int]) -> int:
    n = 0
    while time.perf_counter() < until:
        body = rpc_body(i, n)
        t = time.perf_counter()
        try:
            status, _ = await conn.post("/v1/rpc", body, HEADERS)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            status = 0
            await conn.close()
        lat.append(time.perf_counter() - t)
        if status != 200:
            errors.append(status)
        n += 1
    return n


async def http_run(port: int, clients: int, seconds: float) -> tuple[float, list[float], list[int]]:
    conns = [HTTPConnection("127.0.0.1", port) for _ in range(clients)]
    await asyncio.gather(*(c.connect() for c in conns))
    lat: list[float] = []
    errors: list[int] = []
    # warm up: one request per connection
    await asyncio.gather(*(c.post("/v1/rpc", rpc_body(i, 0), HEADERS) for i, c in enumerate(conns)))
    start = time.perf_counter()
    counts = await asyncio.gather(*(_http_writer(c, i, start + seconds, lat, errors) for i, c in enumerate(conns)))
    elapsed = time.perf_counter() - start
    await asyncio.gather(*(c.close() for c in conns))
    return sum(counts) / elapsed, lat, errors


async def _direct_writer(store: CardStore, i: int, until: float, lat: list[float]) -> int:
    owner = Owner("main", f"bench-{i}")
    n = 0
    while time.perf_counter() < until:
        t = time.perf_counter()
        await store.put(owner, CardInput.parse(card_params(i, n)))
        lat.append(time.perf_counter() - t)
        n += 1
    return n


async def direct_run(redis: Redis, writers: int, seconds: float) -> tuple[float, list[float]]:
    store = CardStore(redis)
    lat: list[float] = []
    await asyncio.gather(*(store.put(Owner("main", f"bench-{i}"), CardInput.parse(card_params(i, 0))) for i in range(writers)))
    start = time.perf_counter()
    counts = await asyncio.gather(*(_direct_writer(store, i, start + seconds, lat) for i in range(writers)))
    return sum(counts) / (time.perf_counter() - start), lat


async def run(ctx: Context) -> None:
    seconds = 2.0 if ctx.quick else 5.0
    flush(ctx.redis_url)
    redis = connect(ctx.redis_url)
    try:
        async with Serve(ctx.redis_url) as serve:
            conn = HTTPConnection("127.0.0.1", serve.port)
            hello = json.dumps({"method": "hello", "params": {}}).encode()
            for _ in range(20):
                await conn.post("/v1/rpc", hello, HEADERS)
            t = []
            for _ in range(200):
                s = time.perf_counter()
                await conn.post("/v1/rpc", hello, HEADERS)
                t.append(time.perf_counter() - s)
            await conn.close()
            ctx.add(Result("2", "hello, 1 connection, p50", percentile(t, 50) * 1e3, "ms"))

            rate1, lat1, err1 = await http_run(serve.port, 1, seconds)
            drate1, dlat1 = await direct_run(redis, 1, seconds)
            p50 = percentile(lat1, 50) * 1e3
            ctx.add(Result("2", "put over HTTP, 1 connection, p50", p50, "ms", percentile(dlat1, 50) * 1e3,
                           None, "p50 ≤ 3 ms", p50 <= 3.0))
            ctx.add(Result("2", "put over HTTP, 1 connection, p99", percentile(lat1, 99) * 1e3, "ms",
                           percentile(dlat1, 99) * 1e3))
            ctx.add(Result("2", "put over HTTP, 1 connection", rate1, "writes/s", drate1, rate1 / drate1))

            # Interleaved rounds, best of each: a neighbour's burst only ever slows a round.
            rate64, lat64, err64 = await http_run(serve.port, 64, seconds / 2)
            drate64, _ = await direct_run(redis, 64, seconds / 2)
            again, lat64b, err64b = await http_run(serve.port, 64, seconds / 2)
            drate64 = max(drate64, (await direct_run(redis, 64, seconds / 2))[0])
            rate64, lat64, err64 = max(rate64, again), lat64 + lat64b, err64 + err64b
            ratio = rate64 / drate64
            ctx.add(Result("2", "put over HTTP, 64 connections", rate64, "writes/s", drate64, ratio,
                           "≥ 0.5 × direct", ratio >= 0.5))
            ctx.add(Result("2", "put over HTTP, 64 connections, p99", percentile(lat64, 99) * 1e3, "ms"))

            rate300, lat300, err300 = await http_run(serve.port, 300, seconds)
            errors = len(err1) + len(err64) + len(err300)
            ctx.add(Result("2", "put over HTTP, 300 connections", rate300, "writes/s"))
            ctx.add(Result("2", "put over HTTP, 300 connections, p99", percentile(lat300, 99) * 1e3, "ms"))
            ctx.add(Result("2", "errors (non-200) at 1/64/300 connections", errors, "answers", None, None,
                           "0", errors == 0))
            if errors:
                kinds = sorted({*err1, *err64, *err300})
                ctx.note("2", f"Non-200 answers seen: statuses {kinds} "
                              f"({len(err1)} / {len(err64)} / {len(err300)} at 1 / 64 / 300 connections).")
    finally:
        await redis.aclose()
