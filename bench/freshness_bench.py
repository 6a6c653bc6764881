"""Figure 1 — freshness: how stale a Telegram draft is under load, against the physical
limit max(1 s, N / 30 s) — one call a second per private chat, 30 a second per bot.

`serve` (gateway + adapter) against the Bot API emulator on loopback (strict pacing:
a burst of 3 then 1/s per chat, 30/s per bot, 429 past it). Cards are written through
the gateway; 429, 400, superseded sends and duplicate drafts are counted from the
emulator's call log.
"""

from __future__ import annotations

from ._common import Context, Result
from .fleet import FleetResult, run_fleet

FULL = [(20, 5.0, 20.0), (200, 2.0, 30.0), (1000, 0.2, 60.0)]
QUICK = [(20, 5.0, 8.0), (200, 2.0, 12.0)]


def report(ctx: Context, fig: str, res: FleetResult, prefix: str, calls_target: float | None = None) -> None:
    """`calls_target`: the fewest draft calls a second the run should sustain."""
    target = 1.1 * res.limit + 0.25
    ctx.add(Result(fig, f"{prefix}p50 staleness", res.p50, "s", res.limit, res.p50 / res.limit))
    ctx.add(Result(fig, f"{prefix}p99 staleness", res.p99, "s", res.limit, res.p99 / res.limit,
                   f"≤ 1.1 × limit + 0.25 s = {target:.2f} s", res.p99 <= target and res.unresolved == 0))
    ctx.add(Result(fig, f"{prefix}convergence after the last write", res.convergence, "s", res.limit,
                   res.convergence / res.limit, f"≤ {target:.2f} s", res.convergence <= target))
    most = res.chats / res.limit  # the most calls a second the pacing allows: min(N, 30)
    ctx.add(Result(fig, f"{prefix}draft calls a second", res.calls_per_s, "calls/s", most, res.calls_per_s / most,
                   "" if calls_target is None else f"≥ {calls_target:,.0f}",
                   None if calls_target is None else res.calls_per_s >= calls_target))
    ctx.add(Result(fig, f"{prefix}serve CPU while writing", res.write_cpu * 100, "% of a core"))
    bad = res.status.get(429, 0) + res.status.get(400, 0)
    ctx.add(Result(fig, f"{prefix}429 + 400 answers", bad, "calls", None, None, "0", bad == 0))
    ctx.add(Result(fig, f"{prefix}superseded sends (of {res.draft_calls})", res.superseded, "calls", None, None, "0",
                   res.superseded == 0))
    ctx.add(Result(fig, f"{prefix}duplicate drafts", res.duplicates, "", None, None, "0", res.duplicates == 0))
    budget_row(ctx, fig, res, prefix)
    if res.unresolved or res.write_errors:
        ctx.note(fig, f"{prefix}{res.unresolved} writes never shown, {res.write_errors} writes refused by the gateway.")
    if res.superseded_strict:
        ctx.note(fig, f"{prefix}{res.superseded_strict} draft calls arrived after a newer card had been acknowledged "
                      f"({res.superseded} of them more than 50 ms after).")
    if res.log_problems:
        top = "; ".join(f"{n}× `{k}`" for k, n in res.log_kinds.most_common(3))
        ctx.note(fig, f"{prefix}serve logged {res.log_problems} warnings/errors: {top}.")


def budget_row(ctx: Context, fig: str, res: FleetResult, prefix: str) -> None:
    """The busiest sliding second of the run, as the Bot API counts: paced calls by
    their arrival at the emulator, against the bot-wide budget."""
    ctx.add(Result(fig, f"{prefix}most calls in any sliding second", res.busiest, "calls", res.bot_rate,
                   res.busiest / res.bot_rate, "≤ the bot-wide budget", res.busiest <= res.bot_rate))


async def run(ctx: Context) -> None:
    for chats, rate, seconds in QUICK if ctx.quick else FULL:
        res = await run_fleet(ctx.redis_url, chats, rate, seconds)
        report(ctx, "1", res, f"{chats} chats × {rate:g} writes/s: ")
        ctx.series("p50 staleness s by chats", chats, res.p50)
        ctx.series("p99 staleness s by chats", chats, res.p99)
        ctx.series("limit s by chats", chats, res.limit)
        ctx.series("p99 staleness / limit by chats", chats, res.p99 / res.limit)
        ctx.series("serve RSS MB by chats", chats, max(res.rss_mb, res.rss_end_mb))
