"""Render throughput: re-rendering a 50-step card with an 8 KB note after one step changes.

Run: .venv/bin/python bench/render_bench.py [--seconds S]

Builds 100 versions of one card (50 steps, an 8 KB Markdown note), each differing
from the previous in one step's status, the way a store re-read after a write gives
them: a new Card object every time, with an equal note string. Then renders them in
turn for a fixed time per renderer and prints renders per second (one core, one
process). The note's conversion is cached by content, so only the first render pays
for parsing it; the Jinja templates are compiled once.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable

from progresscast.activity import Activity
from progresscast.card import Card, Step
from progresscast.config import Mode, RenderSettings
from progresscast.owners import Owner
from progresscast.render import render_telegram, render_text, render_web
from progresscast.render.markdown import markdown_lines, markdown_web_html
from progresscast.view import RunState, View

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
    rate = measure("telegram classic, progress (8 lines)", lambda v: render_telegram(v, progress), views, args.seconds)
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
    print(f"\ntarget: ≥ 5,000 renders/s for telegram classic — {'met' if rate >= 5000 else 'NOT met'}")
    return 0 if rate >= 5000 else 1


if __name__ == "__main__":
    sys.exit(main())
