"""Figure 9 — one `serve` with the gateway under write load: 1,000 chats (200 in the
reduced set) each written once every 2 s through the gateway (a 15-step card with a
Markdown note, one step changing per write), bot-wide budget 1,000 calls/s, the
strict emulator in the benchmark's process; `serve` in one process against `serve.processes = "split"` (the
adapters in a child process of their own), one after the other in the same run, with
the emulator answering at once and after 150 ms (a server far from Telegram's data
centres), so the calls in flight, not only the CPU, are measured.
"""

from __future__ import annotations

import math

from ._common import Context, Result, percentile
from .fleet import run_fleet
from .freshness_bench import budget_row

RATE, BOT_RATE = 0.5, 1000.0
STEPS = 15
"""A real agent's card: 15 steps and a Markdown note, one step changing per write."""
FULL_CHATS, QUICK_CHATS = 1000, 200
EDITS_SHARE = 0.9
"""Of the writes a second, the share to be shown as edits (450 of 500 at 1,000 chats)."""
P99_TARGET = 2.0
LAYOUTS = {"one process": "one", "split": "split"}
LATENCIES = (0.0, 0.15)
"""Seconds the Bot API emulator holds every answer."""


async def run(ctx: Context) -> None:
    chats, seconds, settle = (QUICK_CHATS, 3.0, 5.0) if ctx.quick else (FULL_CHATS, 30.0, 60.0)
    for latency in LATENCIES:
        for label, processes in LAYOUTS.items():
            await one(ctx, chats, seconds, settle, latency, label, processes)


async def one(ctx: Context, chats: int, seconds: float, settle: float, latency: float, label: str,
              processes: str) -> None:
    res = await run_fleet(ctx.redis_url, chats, RATE, seconds, bot_rate=BOT_RATE, settle=settle, latency=latency,
                          steps=STEPS, extra_toml=f"botCallsPerSecond = {BOT_RATE:g}\n",
                          serve_toml=f'[serve]\nprocesses = "{processes}"\n\n')
    prefix = f"{chats:,} chats × {RATE:g} writes/s over HTTP, {label}, answers after {latency * 1000:g} ms: "
    edits, target = res.edits_while_writing, EDITS_SHARE * chats * RATE
    # A write never shown by the end counts as infinitely stale.
    p99 = percentile(res.staleness + [math.inf] * res.unresolved, 99)
    ctx.add(Result("9", f"{prefix}edits a second while writing", edits, "edits/s", chats * RATE,
                   edits / (chats * RATE), f"≥ {target:g}", edits >= target))
    ctx.add(Result("9", f"{prefix}p50 staleness", percentile(res.staleness, 50), "s"))
    ctx.add(Result("9", f"{prefix}p99 staleness", p99, "s", None, None, f"≤ {P99_TARGET:g} s", p99 <= P99_TARGET))
    ctx.add(Result("9", f"{prefix}serve CPU while writing (all its processes)", res.write_cpu * 100,
                   "% of a core"))
    ctx.add(Result("9", f"{prefix}calls in flight while writing (mean)", res.in_flight, "calls"))
    ctx.add(Result("9", f"{prefix}first drafts a second", res.first_drafts_per_s, "/s"))
    bad = res.status.get(429, 0) + res.status.get(400, 0)
    ctx.add(Result("9", f"{prefix}429 + 400 answers", bad, "calls", None, None, "0", bad == 0))
    budget_row(ctx, "9", res, prefix)
    if res.unresolved or res.write_errors:
        ctx.note("9", f"{prefix}{res.unresolved} writes not shown {settle:g} s after the last one, "
                      f"{res.write_errors} refused by the gateway.")
