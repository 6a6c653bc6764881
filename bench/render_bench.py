"""Figure 4 — render throughput: re-rendering a 50-step card with an 8 KB note after one
step changes, against the simplest renderers one could write, in the same run.

Run alone: .venv/bin/python bench/render_bench.py [--seconds S]  (every renderer)
In `make bench`: `run(ctx)` (the ratios).

Builds 100 versions of one card (50 steps, an 8 KB Markdown note), each differing
from the previous in one step's status, the way a store re-read after a write gives
them: a new Card object every time, with an equal note string. Then renders them in
turn for a fixed time per renderer and prints renders per second (one core, one
process). The note's conversion is cached by content, so only the first render pays
for parsing it; the Jinja templates are compiled once.
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import sys
import time
from collections.abc import Callable

import jinja2
import telegramify_markdown
from markdown_it import MarkdownIt

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, Step
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render import render_telegram, render_text, render_web
from progresscast.render.markdown import compact_lines, markdown_lines, markdown_web_html

if __package__:
    from ._common import Context, Result
else:  # run as a script
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from bench._common import Context, Result

OWNER = Owner("main", "ticket-4821")
STATUSES = ["completed", "in_progress", "pending", "blocked", "skipped"]


def note_8k() -> str:
    parts = ["# Findings\n\nThe checkout **times out** for EU users; see [the runbook](https://example.com/runbook).\n"]
    k = 0
    while sum(len(p.encode()) for p in parts) < 8000:
        k += 1
        parts.append(
            f"\n## Section {k}\n\n- item *{k}* with `code` & <b>raw html</b>\n"
            f"- a [link {k}](https://example.com/{k})\n\n```py\nprint({k} < {k + 1})\n```\n"
        )
    text = "".join(parts)
    return text.encode()[:8192].decode("utf-8", "ignore")


def cards(count: int = 100) -> list[Card]:
    note = note_8k()
    statuses = ["completed"] * 20 + ["in_progress"] + ["pending"] * 29
    out = []
    for version in range(count):
        s = list(statuses)
        # one step changes per version: a pending step flips to blocked and back, a
        # completed one to skipped and back
        j = 21 + version % 29
        s[j] = "blocked" if version % 2 else "pending"
        plan = [
            Step(step=f"Step {i + 1}: do the thing number {i + 1} carefully", status=st, note="a short note" if i % 7 == 0 else None)
            for i, st in enumerate(s)
        ]
        # an equal (not identical) note string, as a fresh read from the store gives
        out.append(
            Card(
                sessionKey=OWNER.session_key,
                agentId=OWNER.agent_id,
                displayKey=OWNER.display_key,
                revision=version + 1,
                plan=plan,
                markdown="".join([note[:10], note[10:]]),
                updatedAt="2026-06-01T12:00:00Z",
            )
        )
    return out


def rate_of(fn: Callable[[View], object], views: list[View], seconds: float) -> float:
    """Calls per second of `fn` over `views` in turn, for about `seconds`."""
    fn(views[0])  # warm the caches and the templates
    count = 0
    n = len(views)
    gc.collect()
    start = time.perf_counter()
    deadline = start + seconds
    while True:
        for _ in range(10):
            fn(views[count % n])
            count += 1
        if time.perf_counter() >= deadline:
            break
    return count / (time.perf_counter() - start)


BARE = jinja2.Environment(autoescape=True).from_string(
    "<b>{{ label }}</b>\n{% for s in plan %}{{ icons[s.status.value] }} {{ s.step }}"
    "{% if s.note %} — <i>{{ s.note }}</i>{% endif %}\n{% endfor %}"
)
"""The simplest Telegram renderer one could write: every step, escaped, no fitting."""
ICONS = {"completed": "✅", "in_progress": "▶️", "pending": "⬜", "blocked": "⛔", "skipped": "⏭️"}


def bare_jinja(view: View) -> str:
    assert view.card is not None
    return BARE.render(label=view.owner.display_key, plan=view.card.plan, icons=ICONS)


def views_50() -> list[View]:
    activity = Activity(headline="Running the EU checkout tests", tools=("run: pytest -k eu", "read: queries.py"))
    return [View(owner=OWNER, card=c, activity=activity, run=RunState.active) for c in cards()]


def run(ctx: Context) -> None:
    seconds = 1.0 if ctx.quick else 3.0
    pinned = _pin_one_core()
    try:
        views = views_50()
        progress = RenderSettings(mode=Mode.progress)
        # Interleaved rounds, best of each: a neighbour's burst only ever slows a round.
        ours, bare = [], []
        for _ in range(3):
            ours.append(rate_of(lambda v: render_telegram(v, progress), views, seconds / 3))
            bare.append(rate_of(bare_jinja, views, seconds / 3))
        r_ours, r_bare = max(ours), max(bare)
        ctx.add(Result("4", "Telegram classic, progress defaults (8 × 120)", r_ours, "renders/s", r_bare,
                       r_ours / r_bare, "≥ 1.0 × bare Jinja2", r_ours >= r_bare))

        note = views[0].card.markdown if views[0].card else ""

        def cold(view: View) -> object:
            markdown_lines.cache_clear()
            compact_lines.cache_clear()
            return render_telegram(view, progress)

        parser = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
        cold_rate = max(rate_of(cold, views, seconds / 4) for _ in range(2))
        parse_rate = max(rate_of(lambda v: parser.parse(note), views, seconds / 4) for _ in range(2))
        cold_ms, parse_ms = 1e3 / cold_rate, 1e3 / parse_rate
        ctx.add(Result("4", "cold render, 8 KB note (caches cleared)", cold_ms, "ms", parse_ms,
                       cold_ms / parse_ms, "≤ 2 × markdown-it-py parse", cold_ms <= 2 * parse_ms))
        tgfy_rate = max(rate_of(lambda v: telegramify_markdown.convert(note), views, seconds / 4) for _ in range(2))
        tgfy_ms = 1e3 / tgfy_rate
        ctx.add(Result("4", "telegramify-markdown convert, same 8 KB note", tgfy_ms, "ms", cold_ms, tgfy_ms / cold_ms))
        ctx.note("4", f"One render at the defaults takes {1e6 / r_ours:.0f} µs; the bare template "
                      f"{1e6 / r_bare:.0f} µs (it prints all 50 steps and fits nothing).")
        for steps in (10, 20, 30, 40, 50):
            sized = [View(owner=v.owner, card=v.card.model_copy(update={"plan": v.card.plan[:steps]}),
                          activity=v.activity, run=v.run) for v in views if v.card]
            r = max(rate_of(lambda v: render_telegram(v, progress), sized, seconds / 8) for _ in range(2))
            ctx.series("render µs by steps", steps, 1e6 / r)
    finally:
        _unpin(pinned)


def _pin_one_core() -> set[int] | None:
    if not hasattr(os, "sched_setaffinity"):
        return None
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {min(before)})
    return before


def _unpin(before: set[int] | None) -> None:
    if before is not None:
        os.sched_setaffinity(0, before)


def measure(name: str, fn: Callable[[View], object], views: list[View], seconds: float) -> float:
    fn(views[0])  # warm the caches and the templates
    count = 0
    start = time.perf_counter()
    deadline = start + seconds
    n = len(views)
    while True:
        for _ in range(50):
            fn(views[count % n])
            count += 1
        if time.perf_counter() >= deadline:
            break
    rate = count / (time.perf_counter() - start)
    print(f"{name:<44} {rate:>10,.0f} renders/s")
    return rate


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="time per renderer (default 2)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    activity = Activity(headline="Running the EU checkout tests", tools=("run: pytest -k eu", "read: queries.py"))
    views = [View(owner=OWNER, card=c, activity=activity, run=RunState.active) for c in cards()]
    answer = Activity(answer="Here is what I found so far. " * 150)
    answer_views = [View(owner=OWNER, card=c, activity=answer, run=RunState.active) for c in cards()]
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    print("50-step card, 8 KB note, one step changed per render\n")
    progress = RenderSettings(mode=Mode.progress)
    measure("telegram classic, progress (8 lines)", lambda v: render_telegram(v, progress), views, args.seconds)
    big = RenderSettings(mode=Mode.progress, maxLines=50, maxLineChars=4096)
    measure("telegram classic, progress (50 lines)", lambda v: render_telegram(v, big), views, args.seconds)
    partial = RenderSettings(mode=Mode.partial)
    measure("telegram classic, partial (4 KB answer)", lambda v: render_telegram(v, partial), answer_views, args.seconds)
    rich = RenderSettings(mode=Mode.progress, rich=True)
    measure("telegram rich, progress", lambda v: render_telegram(v, rich), views, args.seconds)
    measure("text, progress", lambda v: render_text(v, progress), views, args.seconds)
    measure("web card", lambda v: render_web(v, progress), views, args.seconds)
    markdown_lines.cache_clear()
    markdown_web_html.cache_clear()
    note = views[0].card.markdown if views[0].card else ""
    measure("uncached 8 KB note → Telegram lines", lambda v: (markdown_lines.cache_clear(), markdown_lines(note)), views, args.seconds / 2)
    measure("bare Jinja2 template, all 50 steps", bare_jinja, views, args.seconds)
    return 0


if __name__ == "__main__":
    sys.exit(main())
