"""Figure 7 — the agent hooks: one `progresscast hook claude-code` call, from spawning
the process to its exit, for a `PostToolUse` of `TodoWrite` (read the note and the
revision, write the plan compare-and-set, set the headline) on a running Redis. It runs
the `progresscast` console script, as an agent's hook configuration does. The references,
interleaved with it: the same interpreter doing nothing (`python -c pass`), what any hook
written in Python pays before it starts, and importing redis-py (`python -c "import
redis"`), which every hook call pays too and which is most of what it costs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

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


# Without it every call would compile progresscast's modules anew, which an installed
# package never does (pip writes their bytecode): the warm-up call writes it here.
_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _timed(command: list[str], stdin: bytes) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, check=False, env=_ENV)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(f"{command}: {done.returncode} {done.stderr.decode()[-300:]}")
    return elapsed


def run(ctx: Context) -> None:
    flush(ctx.redis_url)
    calls = 15 if ctx.quick else 60
    script = Path(sys.executable).with_name("progresscast")
    hook = [str(script), "hook", "claude-code", "--redis", ctx.redis_url]
    bare = [sys.executable, "-c", "pass"]
    redis = [sys.executable, "-c", "import redis"]
    stdin = json.dumps(EVENT).encode()
    hooks: list[float] = []
    bares: list[float] = []
    redises: list[float] = []
    _timed(hook, stdin)  # warm the page cache, the bytecode and the store
    for _ in range(calls):  # interleaved, so a neighbour's burst hits all three
        hooks.append(_timed(hook, stdin))
        bares.append(_timed(bare, b""))
        redises.append(_timed(redis, b""))
    p50, p50_bare, p50_redis = (percentile(x, 50) * 1000 for x in (hooks, bares, redises))
    ctx.add(Result("7", "hook claude-code (TodoWrite), p50", p50, "ms", p50_bare, p50 / p50_bare,
                   "≤ 200 ms", p50 <= 200))
    ctx.add(Result("7", "hook claude-code (TodoWrite), p95", percentile(hooks, 95) * 1000, "ms"))
    ctx.add(Result("7", "hook claude-code (TodoWrite), p50 against `import redis`", p50, "ms", p50_redis,
                   p50 / p50_redis))
    ctx.note("7", f"{calls} calls of each, interleaved; the references are `python -c pass` and "
                  "`python -c \"import redis\"` on the same interpreter.")
