"""BENCHMARKS.md and the growth plot, from one run's results."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from ._common import ROOT, Context, fmt

PLOT = "bench/growth.png"

ABOUT = {
    "1": """**Freshness.** N private chats, each following its own session, each written R
times a second through the gateway (20 × 5/s, 200 × 2/s, 1,000 × 0.2/s). Staleness of a
write: from issuing it to the first Bot API call that shows it or a newer card (the
emulator's arrival time). The physical limit is max(1 s, N / 30 s): one call a second per
private chat, 30 a second for the bot. Convergence: from the last write until every chat
shows its last card. *Most calls in any sliding second* (every fleet figure): the
calls the Bot API counts against a bot (`sendMessage`, `editMessageText`, deletions)
by their arrival at the emulator, in the busiest window [t, t + 1 s) of the whole run,
against the bot-wide budget. A *superseded send* is a draft call that reached the emulator more
than 50 ms after a newer card had been acknowledged by the gateway; a *duplicate draft*
is a second `sendMessage` in a chat (one draft per chat is edited in place). *Draft calls
a second*: what the emulator saw from the first write until convergence, against the
most the pacing allows, min(N, 30); when it falls short, the limit is not reached
because `serve` runs out of CPU (*serve CPU while writing*, in % of one core).""",
    "2": """**Gateway.** `progressCard.put` over HTTP (a minimal keep-alive HTTP/1.1 client,
one request in flight per connection) against `CardInput.parse` + `CardStore.put` called
directly from the benchmark process, on the same Redis, one after the other in the same
run. `serve` runs in its own process, as in production. Over HTTP a write also pays for
the HTTP parsing, the Starlette routing and middleware, the token check and JSON in and
out; like the direct call it makes one Redis round trip (the write script itself admits
the write against resets, by the time it arrived).""",
    "3": """**Store.** `CardStore.put` (one Lua script: reset and revision checks, the
revision bump, the card hash, the owner index, the change event) against the least a
write could cost: a pipelined `SET` + `XADD` of the same JSON, with no checks at all.""",
    "4": """**Render.** A 50-step card with an 8 KB note, one step changed per render (100
versions, fresh objects each, as a store re-read gives). Telegram classic at the
progress defaults (8 lines × 120) against a bare autoescaped Jinja2 template that prints
all 50 steps — the simplest renderer one could write. Cold render: the note's
conversion cache cleared before each render, against markdown-it-py's bare parse of the
same note with the same grammar; `telegramify-markdown`'s `convert` (text + entities) on
the same note for scale. Pinned to one core.""",
    "5": """**Memory and idle.** One `serve` with N chats following N sessions, every card
written before it starts. `botCallsPerSecond` (and the emulator's bot limit) raised to
1,000 so the first drafts take seconds. RSS of the `serve` process once every chat shows
its draft; idle CPU: its CPU time over a quiet interval after that; warnings and errors
it logged over the whole run. *Calls/s sustained*: first drafts a second from the first
to the last one shown — every chat is waiting for one, so only the budget (1,000) and
`serve`'s CPU bound it (target ≥ 900). *CPU per first draft*, from `serve`'s start until
every chat shows its draft: `serve`'s (one event loop, so one core: its reference is one
core's time per draft at the target rate), the emulator's and Redis's (the benchmark's
process, which also checks what is shown, and `INFO cpu`), and the three together
against the machine's cores' time per draft at that rate. In the full set every chat is
then written 0.05 times a second through the gateway (500 writes/s): staleness against the raised
budget's limit N / 1,000 s, and draft calls a second against what the writes ask for
(500: a chat's write needs one edit; target ≥ 0.9 × that).""",
    "6": f"""**Growth.** By steps: one render (figure 4's card cut to 10…50 steps), one write
over HTTP and directly (p50, one connection), and in the full set a 200-chat fleet's
p99 staleness at 10 and 50 steps. By chats: p50/p99 staleness (figure 1) and the RSS of
`serve` (figures 1 and 5). Plot: [`{PLOT}`]({PLOT}).""",
    "8": """**Adapter cost.** A fleet (figure 1's) of chats with the budget raised to 1,000
calls/s, written from the benchmark process straight to the store (`CardStore.put`) at
a rate the adapter keeps up with (one edit per write, *edits per write* ≈ 1), so that
`serve`'s CPU and Redis traffic are the adapter's (its idle gateway and retention sweep
included). *CPU per Bot API call*: `serve`'s CPU time from the first write until every
chat converged, over the draft calls in that time (target ≤ 1 ms). *Round trips per
edit*: Redis's own count on the benchmark's Redis, which serves nothing else —
`INFO stats` `total_reads_processed` before and after (a client that sends a request
— a command, a pipeline, a transaction — and waits for its answer costs one read
event), less what the writes cost (one `CardStore.put`, measured just before on the
same Redis: one round trip), over the edits (target ≤ 3). *Commands*:
`total_commands_processed` likewise (commands a Lua script runs count too).""",
    "9": """**Gateway and adapter under write load.** 1,000 chats (200 in the reduced set),
each written 0.5 times a second through the gateway, bot-wide budget 1,000 calls/s,
the strict emulator (1 call a second per chat, 1,000 per bot, 429 past them), on this
machine's cores; `serve` with `serve.processes = "one"` and then `"split"` (the
adapters in a child process of their own), in the same run. *Edits a second while
writing*: draft calls the emulator answered from the first write to the last, against
the writes a second (target ≥ 0.9 × them: 450 at 1,000 chats); p99 staleness as in
figure 1, a write never shown counting as infinitely stale (target ≤ 2 s); CPU of
`serve` and its children. Each layout runs twice: the emulator answering at once, and
after 150 ms (a server far from Telegram's data centres: each call holds a connection
that long); *calls in flight*: draft calls open at the emulator at once, on average,
while writing; *first drafts a second*: from the first chat shown to the last.""",
    "7": """**Hooks.** One `progresscast hook claude-code` call (the console script) for a
`TodoWrite` event, from spawning the process to its exit, on the bench Redis, against the
same interpreter doing nothing (`python -c pass`) and importing redis-py (`python -c
"import redis"`), interleaved. The typical call is served by the user's warm hook server
(started by the warm-up call, as by the first call of a session): the call imports only
the standard library and hands the event over a unix socket to a process that has
redis-py and pydantic loaded. The cold call (`PROGRESSCAST_HOOK_SERVER=off`; what the
first call of a session costs) is mostly Python importing: redis-py (which imports its
asyncio client and asyncio whichever client one uses) and pydantic, which the card rules
are written in; it imports nothing else of weight (a test checks the modules a hook call
imports) and runs with the cyclic garbage collector off.""",
}


def write_report(
    path: Path,
    ctx: Context,
    table: str,
    machine: dict[str, str],
    command: str,
    when: dt.datetime,
    elapsed: float,
    load: tuple[tuple[float, float, float], tuple[float, float, float]],
    figures: list[str],
) -> None:
    plot = _plot(ctx, path.parent / PLOT)
    out = [
        "# Benchmarks",
        "",
        f"Written by `{command}` on {when:%Y-%m-%d %H:%M} UTC in {elapsed:.0f} s"
        + (" (the reduced set: shorter runs, fewer chats)." if ctx.quick else "."),
        "",
        f"Machine: {machine['nproc']} cores ({machine['cpu']}), Python {machine['python']}, {machine['system']}. "
        f"Load average before / after: {load[0][0]:.2f} / {load[1][0]:.2f}"
        + (" — other work was running on the machine, so absolute figures are low and noisy; the "
           "ratios, measured side by side in the same run, are what to compare." if max(load[0][0], load[1][0]) > 0.5
           else "."),
        "",
        "Reproduce: `make bench` (everything, < 15 min) or `make bench-quick` (< 2 min). "
        "Benchmarks live in `bench/`; they are not tests. Each figure uses a fresh embedded Redis "
        "unless `bench/run.py --redis URL` names a database (which it flushes).",
        "",
        "## Results",
        "",
        table,
        "",
    ]
    out += ["## What each figure measures", ""]
    for fig in figures:
        out += [ABOUT[fig], ""]
        for line in ctx.notes.get(fig, []):
            out += [f"- {line}"]
        if ctx.notes.get(fig):
            out += [""]
    limits = ROOT / "bench" / "LIMITS.md"
    if limits.exists():
        out += [limits.read_text().strip(), ""]
    if ctx.growth:
        out += ["## Growth", "", _growth_table(ctx), ""]
        if plot:
            out += [f"![growth]({PLOT})", ""]
    path.write_text("\n".join(out))


def _growth_table(ctx: Context) -> str:
    rows = ["| series | points (x → y) |", "| --- | --- |"]
    for name, points in ctx.growth.items():
        rows.append(f"| {name} | " + ", ".join(f"{fmt(x)} → {fmt(y)}" for x, y in sorted(points)) + " |")
    return "\n".join(rows)


def _plot(ctx: Context, target: Path) -> bool:
    if not ctx.growth:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    by_steps = {k: v for k, v in ctx.growth.items() if "by steps" in k}
    by_chats = {k: v for k, v in ctx.growth.items() if "by chats" in k}
    panels = [(s, label, title) for s, label, title in (
        (by_steps, "steps in the card", "by steps (µs, s)"), (by_chats, "chats", "by chats (s, MB)")) if s]
    if not panels:
        return False
    fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 4.5), squeeze=False)
    for ax, (series, xlabel, title) in zip(axes[0], panels, strict=True):
        ax.set_title(title)
        for name, points in series.items():
            pts = sorted(points)
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=name)
        ax.set_xlabel(xlabel)
        ax.set_yscale("log")
        if series is by_chats:
            ax.set_xscale("log")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    target.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(target, dpi=100)
    plt.close(fig)
    return True
