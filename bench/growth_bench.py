"""Figure 6 — growth: how render time, write time, staleness and memory grow from 10 to
50 steps and from 20 to 10,000 chats.

Measured here: write time by steps (one connection, over HTTP and directly) and, in the
full set, staleness of a 200-chat fleet at 50 steps. Render time by steps comes from
figure 4, staleness and memory by chats from figures 1 and 5 of the same run; the table
and the plot (`bench/growth.png`) are written with BENCHMARKS.md.
"""

from __future__ import annotations

import json
import time

from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect

from ._common import TOKEN, Context, Serve, flush, percentile
from ._http import HTTPConnection
from .fleet import card_params, run_fleet

STEPS = (10, 20, 30, 40, 50)


async def run(ctx: Context) -> None:
    flush(ctx.redis_url)
    count = 150 if ctx.quick else 500
    redis = connect(ctx.redis_url)
    store = CardStore(redis)
    headers = {"Authorization": f"Bearer {TOKEN}"}
    try:
        async with Serve(ctx.redis_url) as serve:
            conn = HTTPConnection("127.0.0.1", serve.port)
            best_http: dict[int, float] = {}
            best_direct: dict[int, float] = {}
            for _ in range(3):  # interleaved rounds, best p50 of each: the least disturbed
                for steps in STEPS:
                    bodies = [json.dumps({"method": "progressCard.put",
                                          "params": {"sessionKey": f"growth-{steps}", **card_params(v, steps)}}).encode()
                              for v in range(count // 3)]
                    for b in bodies[:5]:
                        await conn.post("/v1/rpc", b, headers)
                    http = []
                    for b in bodies:
                        t = time.perf_counter()
                        await conn.post("/v1/rpc", b, headers)
                        http.append(time.perf_counter() - t)
                    owner = Owner("main", f"growth-direct-{steps}")
                    direct = []
                    for v in range(count // 3):
                        t = time.perf_counter()
                        await store.put(owner, CardInput.parse(card_params(v, steps)))
                        direct.append(time.perf_counter() - t)
                    best_http[steps] = min(best_http.get(steps, float("inf")), percentile(http, 50) * 1e6)
                    best_direct[steps] = min(best_direct.get(steps, float("inf")), percentile(direct, 50) * 1e6)
            for steps in STEPS:
                ctx.series("write µs by steps (HTTP p50)", steps, best_http[steps])
                ctx.series("write µs by steps (direct p50)", steps, best_direct[steps])
            await conn.close()
    finally:
        await redis.aclose()
    if not ctx.quick:
        for steps in (10, 50):
            res = await run_fleet(ctx.redis_url, 200, 2.0, 15.0, steps=steps)
            ctx.series("p99 staleness s by steps (200 chats)", steps, res.p99)
