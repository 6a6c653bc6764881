"""Figure 7 — the agent hooks: one `progresscast hook claude-code` call, from spawning
the process to its exit, for a `PostToolUse` of `TodoWrite` (read the note and the
revision, write the plan compare-and-set, set the headline) on a running Redis. It runs
the `progresscast` console script, as an agent's hook configuration does.

The typical call is served by the user's warm hook server (started by the warm-up
call, as the first call of a session starts it). The cold call, a second line, runs
with the server off (PROGRESSCAST_HOOK_SERVER=off): what every call cost before, and
what the first call of a session still costs. The references, interleaved with both:
the same interpreter doing nothing (`python -c pass`), what any hook written in Python
pays before it starts, and importing redis-py (`python -c "import redis"`), most of
what a cold call costs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
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
_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PROGRESSCAST_HOOK_SERVER")}
_COLD = _ENV | {"PROGRESSCAST_HOOK_SERVER": "off"}


def _timed(command: list[str], stdin: bytes, env: dict[str, str] = _ENV) -> float:
    started = time.perf_counter()
    done = subprocess.run(command, input=stdin, capture_output=True, check=False, env=env)
    elapsed = time.perf_counter() - started
    if done.returncode != 0 or done.stderr:
        raise RuntimeError(f"{command}: {done.returncode} {done.stderr.decode()[-300:]}")
    return elapsed


def _server_pid(sockets: Path, timeout: float = 20.0) -> int:
    """The warm hook server the warm-up call started, once it listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pid_file in sockets.glob("hook-*.pid"):
            if pid_file.with_suffix(".sock").exists():
                return int(pid_file.read_text())
        time.sleep(0.02)
    raise RuntimeError(f"no hook server started in {sockets}")


def run(ctx: Context) -> None:
    flush(ctx.redis_url)
    # A socket directory of its own: the bench's server is its own, and stopped after.
    sockets = Path(tempfile.mkdtemp(prefix="pc-bench-hooks-", dir="/tmp"))
    _ENV["PROGRESSCAST_HOOK_SOCKET_DIR"] = _COLD["PROGRESSCAST_HOOK_SOCKET_DIR"] = str(sockets)
    try:
        _run(ctx, sockets)
    finally:
        for pid_file in sockets.glob("hook-*.pid"):
            try:
                os.kill(int(pid_file.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass
        deadline = time.monotonic() + 5  # it removes its socket on the way out
        while list(sockets.glob("hook-*.sock")) and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(sockets, ignore_errors=True)


def _run(ctx: Context, sockets: Path) -> None:
    calls = 15 if ctx.quick else 60
    script = Path(sys.executable).with_name("progresscast")
    hook = [str(script), "hook", "claude-code", "--redis", ctx.redis_url]
    bare = [sys.executable, "-c", "pass"]
    redis = [sys.executable, "-c", "import redis"]
    stdin = json.dumps(EVENT).encode()
    warms: list[float] = []
    colds: list[float] = []
    bares: list[float] = []
    redises: list[float] = []
    _timed(hook, stdin)  # warm the page cache, the bytecode and the store; starts the server
    server = _server_pid(sockets)
    _timed(hook, stdin)  # the server's first call
    for _ in range(calls):  # interleaved, so a neighbour's burst hits them all
        warms.append(_timed(hook, stdin))
        colds.append(_timed(hook, stdin, _COLD))
        bares.append(_timed(bare, b""))
        redises.append(_timed(redis, b""))
    if _server_pid(sockets, 0.1) != server:
        raise RuntimeError("the hook server did not serve every warm call (it exited or was replaced)")
    p50, p50_cold, p50_bare, p50_redis = (percentile(x, 50) * 1000 for x in (warms, colds, bares, redises))
    ctx.add(Result("7", "hook claude-code (TodoWrite), p50", p50, "ms", p50_bare, p50 / p50_bare,
                   "≤ 200 ms", p50 <= 200))
    ctx.add(Result("7", "hook claude-code (TodoWrite), p95", percentile(warms, 95) * 1000, "ms"))
    ctx.add(Result("7", "hook claude-code (TodoWrite), server off (cold), p50 against `import redis`", p50_cold,
                   "ms", p50_redis, p50_cold / p50_redis))
    ctx.note("7", f"{calls} calls of each, interleaved; the typical call is served by the warm hook server, "
                  "the cold one runs with PROGRESSCAST_HOOK_SERVER=off; the references are `python -c pass` "
                  "and `python -c \"import redis\"` on the same interpreter.")
