"""Figure 7 — the agent hooks: one `progresscast hook claude-code` call, from spawning
the process to its exit, for a `PostToolUse` of `TodoWrite` (read the note and the
revision, write the plan compare-and-set, set the headline) on a running Redis. The
reference is the same interpreter doing nothing (`python -c pass`): what any hook
written in Python pays before it starts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time

from ._common import Context, Result, flush, percentile

EVENT = {
    "session_id": "bench-hook",
    "transcript_path": "/tmp/bench-hook.jsonl",
    "cwd": "/tmp",
    "permission_mode": "default",
    "hook_event_name": "PostToolUse",
    "tool_name": "TodoWrite",
    "tool_input": {
        "todos": [
            {"content": f"Step {i}", "status": "completed" if i < 3 else ("in_progress" if i == 3 else "pending"),
             "activeForm": f"Doing step {i}"}
            for i in range(8)
        ]
    },
    "tool_response": {},
}


def _timed(command: list[str], stdin: bytes) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(f"{command}: {done.returncode} {done.stderr.decode()[-300:]}")
    return elapsed


def run(ctx: Context) -> None:
    flush(ctx.redis_url)
    calls = 15 if ctx.quick else 60
    hook = [sys.executable, "-m", "progresscast.cli", "hook", "claude-code", "--redis", ctx.redis_url]
    bare = [sys.executable, "-c", "pass"]
    stdin = json.dumps(EVENT).encode()
    hooks: list[float] = []
    bares: list[float] = []
    _timed(hook, stdin)  # warm the page cache and the store
    for _ in range(calls):  # interleaved, so a neighbour's burst hits both
        hooks.append(_timed(hook, stdin))
        bares.append(_timed(bare, b""))
    p50, p50_bare = percentile(hooks, 50) * 1000, percentile(bares, 50) * 1000
    ctx.add(Result("7", "hook claude-code (TodoWrite), p50", p50, "ms", p50_bare, p50 / p50_bare,
                   "≤ 200 ms", p50 <= 200))
    ctx.add(Result("7", "hook claude-code (TodoWrite), p95", percentile(hooks, 95) * 1000, "ms"))
    ctx.note("7", f"{calls} calls; the reference is `python -c pass` on the same interpreter.")
