"""`make bench` / `make bench-quick`: every benchmark, a table, and BENCHMARKS.md.

    .venv/bin/python bench/run.py [--quick] [--only 1,2,…] [--redis URL] [--no-write]

Without `--redis`, a fresh embedded Redis in a temporary directory for each figure; with
it, that database is FLUSHED before and after each figure (give a database of its own,
e.g. `/14`).
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import shlex
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import _common
from bench._common import Context, bench_redis, fmt, machine

FIGURES = {
    "1": ("Freshness: staleness of Telegram drafts under load", "freshness_bench"),
    "2": ("Gateway: progressCard.put over HTTP vs CardStore.put", "gateway_bench"),
    "3": ("Store: CardStore.put vs pipelined raw SET+XADD", "store_bench"),
    "4": ("Render: Telegram classic vs the simplest renderers", "render_bench"),
    "5": ("Memory and idle: one serve with many followed chats", "memory_bench"),
    "6": ("Growth: steps and chats", "growth_bench"),
    "7": ("Hooks: one Claude Code hook call, spawn to exit", "hook_bench"),
    "8": ("Adapter: CPU per Bot API call, Redis round trips per edit", "adapter_bench"),
    "9": ("Gateway and adapter under write load: one process vs split", "split_bench"),
}


def table(ctx: Context) -> str:
    rows = ["| # | measurement | value | same-run reference | ratio | target | |",
            "| --- | --- | ---: | ---: | ---: | --- | --- |"]
    for r in ctx.results:
        met = {True: "met", False: "**missed**", None: ""}[r.met]
        ref = "" if r.reference is None else fmt(r.reference)
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        rows.append(f"| {r.figure} | {r.name} | {fmt(r.value)} {r.unit} | {ref} | {ratio} | {r.target} | {met} |")
    return "\n".join(rows)


def print_table(ctx: Context) -> None:
    width = max((len(r.name) for r in ctx.results), default=20)
    print()
    print(f"{'#':<2} {'measurement':<{width}} {'value':>22} {'reference':>12} {'ratio':>6}  target")
    for r in ctx.results:
        met = {True: "met", False: "MISSED", None: ""}[r.met]
        ref = "" if r.reference is None else fmt(r.reference)
        ratio = "" if r.ratio is None else f"{r.ratio:.2f}"
        value = f"{fmt(r.value)} {r.unit}"
        print(f"{r.figure:<2} {r.name:<{width}} {value:>22} {ref:>12} {ratio:>6}  {r.target} {met}")


async def run_all(ctx: Context, figures: list[str], redis: str | None) -> None:
    import importlib

    for fig in figures:
        title, module = FIGURES[fig]
        print(f"\n== {fig}. {title}", flush=True)
        started = time.monotonic()
        mod = importlib.import_module(f"bench.{module}")
        # A fresh embedded Redis per figure: what one figure wrote (a grown append-only
        # file and its rewrites) never weighs on the next one's measurements.
        with bench_redis(redis) as url:
            ctx.redis_url = url
            result = mod.run(ctx)
            if asyncio.iscoroutine(result):
                await result
        print(f"   ({time.monotonic() - started:.0f} s)", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the reduced set (under 2 minutes)")
    parser.add_argument("--only", default="", help="comma-separated figure numbers (default: all)")
    parser.add_argument("--redis", default=None, help="a Redis database to use (it is flushed)")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite BENCHMARKS.md")
    parser.add_argument("--output", default=str(_common.ROOT / "BENCHMARKS.md"))
    args = parser.parse_args()
    figures = [f.strip() for f in args.only.split(",") if f.strip()] or list(FIGURES)
    unknown = [f for f in figures if f not in FIGURES]
    if unknown:
        parser.error(f"--only: unknown figure {unknown[0]!r} (known: {', '.join(FIGURES)})")
    started = time.monotonic()
    when = dt.datetime.now(dt.UTC)
    load_before = os.getloadavg()
    ctx = Context(quick=args.quick, redis_url=args.redis or "")
    asyncio.run(run_all(ctx, figures, args.redis))
    elapsed = time.monotonic() - started
    load_after = os.getloadavg()
    print_table(ctx)
    print(f"\n{len(ctx.results)} figures in {elapsed:.0f} s")
    if not args.no_write:
        from bench.report import write_report

        command = "make bench-quick" if args.quick else "make bench"
        if args.only or args.redis:
            command = "python bench/run.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        write_report(Path(args.output), ctx, table(ctx), machine(), command, when, elapsed,
                     (load_before, load_after), figures)
        print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
