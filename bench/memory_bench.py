"""Figure 5 — memory and idle: one `serve` following N sessions in N chats, each with a
card. Start-up (first getUpdates, every first draft shown), the RSS once every draft is
shown, the CPU it uses while nothing changes, and what it logged.

The adapter's bot-wide budget is raised for this measurement (`botCallsPerSecond`, and
the emulator's bot limit with it) so that showing 10,000 drafts takes seconds, not the
333 s that 30 calls a second would.
"""

from __future__ import annotations

import os

from ._common import Context, Result
from .fleet import FleetResult, run_fleet
from .freshness_bench import budget_row, report

FULL_CHATS, QUICK_CHATS = 10_000, 2_000
BOT_RATE = 1000.0
SUSTAINED = 900.0
"""Draft calls a second one `serve` should sustain at that budget."""
FAR = 0.15
"""A Bot API this far away (seconds per answer: a server far from Telegram's data centres)."""
SUSTAINED_FAR = 800.0
"""First drafts a second one `serve` should sustain with every answer `FAR` away."""


async def run(ctx: Context) -> None:
    chats = QUICK_CHATS if ctx.quick else FULL_CHATS
    idle = 5.0 if ctx.quick else 15.0
    # The full set also writes to every chat once in 20 s (500 writes/s through the
    # gateway): staleness at 10,000 chats, against the raised budget's limit N / 1,000 s.
    rate, seconds = (0.0, 0.0) if ctx.quick else (0.05, 20.0)
    res = await run_fleet(ctx.redis_url, chats, rate, seconds, bot_rate=BOT_RATE, idle_seconds=idle,
                          extra_toml=f"botCallsPerSecond = {BOT_RATE:g}\n")
    prefix = f"{chats:,} chats: "
    ctx.add(Result("5", f"{prefix}first getUpdates after start", res.first_poll, "s"))
    ctx.add(Result("5", f"{prefix}every first draft shown after start", res.all_shown, "s", chats / BOT_RATE,
                   res.all_shown / (chats / BOT_RATE)))
    machine_rows(ctx, prefix, res, SUSTAINED)
    # Every chat waits for its first draft at once: the budget, not the demand, bounds this rate.
    ctx.add(Result("5", f"{prefix}first drafts a second, first to last (calls/s sustained)", res.first_drafts_per_s,
                   "calls/s", BOT_RATE, res.first_drafts_per_s / BOT_RATE, f"≥ {SUSTAINED:,.0f}",
                   res.first_drafts_per_s >= SUSTAINED))
    ctx.add(Result("5", f"{prefix}RSS once every draft is shown", res.rss_mb, "MB", None, None, "≤ 200 MB",
                   res.rss_mb <= 200))
    ctx.add(Result("5", f"{prefix}idle CPU ({idle:g} s, nothing changes)", res.idle_cpu * 100, "% of a core", None,
                   None, "≤ 2 %", res.idle_cpu <= 0.02))
    ctx.add(Result("5", f"{prefix}warnings/errors logged", res.log_problems, "lines", None, None,
                   "no storm (≤ 10)", res.log_problems <= 10))
    bad = res.status.get(429, 0) + res.status.get(400, 0)
    ctx.add(Result("5", f"{prefix}429 + 400 answers", bad, "calls", None, None, "0", bad == 0))
    if seconds:
        # The writes ask for chats × rate calls a second (500): the most this phase can sustain.
        asked = min(BOT_RATE, chats * rate)
        report(ctx, "5", res, f"{prefix}then 0.05 writes/s each, budget {BOT_RATE:,.0f}/s: ", 0.9 * asked)
    else:
        budget_row(ctx, "5", res, prefix)
        ctx.series("p99 staleness / limit by chats", chats, res.p99 / res.limit)
    if res.log_problems and not seconds:  # else `report` said it
        top = "; ".join(f"{n}× `{k}`" for k, n in res.log_kinds.most_common(3))
        ctx.note("5", f"{prefix}serve logged {res.log_problems} warnings/errors: {top}.")
    ctx.series("serve RSS MB by chats", chats, res.rss_mb)
    # The same start-up with every answer 150 ms away: calls in flight, not CPU alone.
    far = await run_fleet(ctx.redis_url, chats, 0.0, 0.0, bot_rate=BOT_RATE, latency=FAR,
                          extra_toml=f"botCallsPerSecond = {BOT_RATE:g}\n")
    ctx.add(Result("5", f"{prefix}answers after {FAR * 1000:g} ms: first drafts a second, first to last",
                   far.first_drafts_per_s, "calls/s", BOT_RATE, far.first_drafts_per_s / BOT_RATE,
                   f"≥ {SUSTAINED_FAR:,.0f}", far.first_drafts_per_s >= SUSTAINED_FAR))
    machine_rows(ctx, f"{prefix}answers after {FAR * 1000:g} ms: ", far, SUSTAINED_FAR)
    bad = far.status.get(429, 0) + far.status.get(400, 0)
    ctx.add(Result("5", f"{prefix}answers after {FAR * 1000:g} ms: 429 + 400 answers", bad, "calls", None, None, "0",
                   bad == 0))


def machine_rows(ctx: Context, prefix: str, res: FleetResult, target: float) -> None:
    """CPU per first draft against what `target` first drafts a second leave: `serve` runs
    on one core (one event loop), and it shares the machine's cores with the emulator
    and Redis."""
    chats = res.chats
    serve_ms = res.cpu_shown / chats * 1e3
    others_ms = res.others_cpu_shown / chats * 1e3
    cores = os.cpu_count() or 1
    one_core, machine = 1e3 / target, cores * 1e3 / target
    ctx.add(Result("5", f"{prefix}serve CPU per first draft (start-up included)", serve_ms, "ms", one_core,
                   serve_ms / one_core))
    ctx.add(Result("5", f"{prefix}the emulator's and Redis's CPU per first draft", others_ms, "ms"))
    ctx.add(Result("5", f"{prefix}the machine's CPU per first draft (the three)", serve_ms + others_ms, "ms", machine,
                   (serve_ms + others_ms) / machine))
