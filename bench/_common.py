"""What every benchmark shares: the machine, results, a Redis of its own, `serve` in a
child process, percentiles."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import redis as sync_redis

from progresscast.store.embedded import ensure_embedded, stop_embedded

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
TOKEN = "bench-token"


@dataclass
class Result:
    """One figure: a measured value, what it is compared with in the same run, the target."""

    figure: str
    name: str
    value: float
    unit: str
    reference: float | None = None
    """The same-run reference (direct store, bare Jinja2, the physical limit …)."""
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    """None: reported, no target."""


@dataclass
class Context:
    quick: bool
    redis_url: str
    results: list[Result] = field(default_factory=list)
    notes: dict[str, list[str]] = field(default_factory=dict)
    """Per figure: lines for BENCHMARKS.md (what limits it, profiles)."""
    growth: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    """Series for the growth table and plot: name → [(x, y)]."""

    def add(self, result: Result) -> Result:
        self.results.append(result)
        ratio = "" if result.ratio is None else f"  ratio {result.ratio:.2f}"
        met = {True: "  met", False: "  MISSED", None: ""}[result.met]
        ref = "" if result.reference is None else f"  (ref {fmt(result.reference)})"
        print(f"  [{result.figure}] {result.name}: {fmt(result.value)} {result.unit}{ref}{ratio}{met}", flush=True)
        return result

    def note(self, figure: str, text: str) -> None:
        self.notes.setdefault(figure, []).append(text)

    def series(self, name: str, x: float, y: float) -> None:
        self.growth.setdefault(name, []).append((x, y))


def fmt(value: float) -> str:
    if value == 0:
        return "0"
    if float(value).is_integer() and abs(value) < 100:
        return str(int(value))
    if abs(value) >= 100:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def percentile(values: Sequence[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


def machine() -> dict[str, str]:
    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return {
        "nproc": str(os.cpu_count()),
        "cpu": model,
        "python": platform.python_version(),
        "system": f"{platform.system()} {platform.release()} {platform.machine()}",
    }


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def no_collector_pauses() -> Iterator[None]:
    """The emulator's clock out of reach of this process's cyclic garbage collector.
    The emulator stamps each call as it arrives and answers it; at 10,000 chats its
    records make a heap whose full collections took 130–370 ms here, while calls kept
    arriving: stamped together afterwards, 100 ms of them looked like a burst (the
    busiest second over the budget while the calls left within it), and every answer
    was held as long. A real Bot API does not pause for our collector: off while
    measuring (what start-up made frozen), on again after."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


@contextlib.contextmanager
def bench_redis(url: str | None) -> Iterator[str]:
    """`url` (its database flushed before and after), else a fresh embedded Redis."""
    if url:
        client = sync_redis.Redis.from_url(url)
        client.flushdb()
        try:
            yield url
        finally:
            client.flushdb()
            client.close()
        return
    home = Path(tempfile.mkdtemp(prefix="progresscast-bench-"))
    try:
        yield ensure_embedded(home)
    finally:
        stop_embedded(home)
        shutil.rmtree(home, ignore_errors=True)


def flush(url: str) -> None:
    client = sync_redis.Redis.from_url(url)
    client.flushdb()
    client.close()


def toml_str(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Serve:
    """`progresscast serve --config …` in a child process, gateway on a free port."""

    def __init__(self, redis_url: str, extra_toml: str = "", *, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="progresscast-serve-"))
        self.config = self.dir / "progresscast.toml"
        self.config.write_text(
            f"[store]\nurl = {toml_str(redis_url)}\n\n"
            f"[gateway]\nlisten = \"127.0.0.1:{self.port}\"\n"
            f"[[gateway.tokens]]\ntoken = \"{TOKEN}\"\nscopes = [\"operator.read\", \"operator.write\"]\n\n"
            + extra_toml
        )
        self.log = self.dir / "serve.log"
        self.env = {**os.environ, "PROGRESSCAST_HOME": str(self.dir / "home"), **(env or {})}
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_at = 0.0
        self.lines: list[str] = []
        """The child's log, kept when it stops (its directory is removed)."""

    async def __aenter__(self) -> Serve:
        self.started_at = time.monotonic()
        self.proc = subprocess.Popen(
            [str(BIN / "progresscast"), "serve", "--config", str(self.config)],
            stdout=self.log.open("wb"), stderr=subprocess.STDOUT, env=self.env,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"serve exited with {self.proc.returncode}:\n{self.log.read_text()[-2000:]}")
            with contextlib.suppress(OSError):
                _, writer = await asyncio.open_connection("127.0.0.1", self.port)
                writer.close()
                return self
            await asyncio.sleep(0.05)
        raise RuntimeError("serve did not listen within 60 s")

    async def __aexit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                await asyncio.to_thread(self.proc.wait, 15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                await asyncio.to_thread(self.proc.wait)
        self.lines = self.log_lines()
        shutil.rmtree(self.dir, ignore_errors=True)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def log_lines(self) -> list[str]:
        with contextlib.suppress(OSError):
            return self.log.read_text(errors="replace").splitlines()
        return []
