"""One embedded Redis per home, always: a real `serve` whose embedded server is frozen
(SIGSTOP) while writes go through the gateway and a CLI `card put` runs waits for it
rather than starting a second server on the same append-only file, and one killed
(SIGKILL) is started again once. Every acknowledged write is kept, each with its own
revision, in the order they were acknowledged."""

from __future__ import annotations

import asyncio
import json
import os
import re
import resource
import secrets
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

from progresscast.store.embedded import DescriptorShortage, embedded_health, ensure_embedded, stop_embedded
from test_serve import TOKEN, Serve, environment, running, start  # noqa: F401  (start: the fixture that runs `serve`)

SESSION = "stall-1"
STALL_SECONDS = 4.0
"""How long the server is frozen: longer than every probe's timeout (1 s) and than a
command's (4 s minus the writes' own wait)."""


def servers(home: Path) -> set[int]:
    """The redis-server processes of `home` (their working directory is the home); a
    fork of one (an append-only file rewrite, the moment it daemonizes) is not another."""
    found: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            if not os.readlink(f"/proc/{entry}/exe").split("/")[-1].startswith("redis-server"):
                continue
            if os.readlink(f"/proc/{entry}/cwd") != str(home):
                continue
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:  # gone meanwhile, or a zombie
            continue
        found[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    return {pid for pid, parent in found.items() if parent not in found}


class Census:
    """Counts the home's servers every 10 ms until stopped: the most seen at once."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.most = 0
        self.seen: set[int] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.01):
            now = servers(self.home)
            self.most = max(self.most, len(now))
            self.seen |= now

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class Writers:
    """`count` clients putting a card through the gateway's RPC, each write a new step
    (its marker); `acked` maps the marker of each acknowledged write to its revision."""

    def __init__(self, base: str, count: int = 3, most: int | None = None) -> None:
        """`most`: the writes each client makes at the most (acknowledged or not), so a
        fast run stays within the revisions the history keeps."""
        self.base = base
        self.most = most
        self.tag = secrets.token_hex(6)  # in no script: only a write puts it in the file
        self.acked: dict[str, int] = {}
        self.refused = 0
        self.stopping = asyncio.Event()
        self.tasks = [asyncio.create_task(self._write(n)) for n in range(count)]

    async def _write(self, n: int) -> None:
        async with httpx.AsyncClient(timeout=10) as client:
            i = 0
            while not self.stopping.is_set() and (self.most is None or i < self.most):
                marker = f"w-{self.tag}-{n}-{i}"
                i += 1
                body = {"method": "progressCard.put", "params": {
                    "sessionKey": SESSION, "plan": [{"step": marker, "status": "in_progress"}]}}
                try:
                    answer = await client.post(f"{self.base}/v1/rpc", json=body,
                                               headers={"Authorization": f"Bearer {TOKEN}"})
                except httpx.HTTPError:
                    answer = None
                result = answer.json().get("result") if answer is not None and answer.status_code == 200 else None
                if result is None:
                    # A store that is not answering: not a busy loop. (A refused write may
                    # still land once the store answers: each counts against the 200
                    # revisions the history keeps, so refused writes are kept few.)
                    self.refused += 1
                    await asyncio.sleep(0.25)
                    continue
                self.acked[marker] = result["revision"]

    async def until(self, acked: int, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while len(self.acked) < acked:
            assert time.monotonic() < deadline, f"only {len(self.acked)} writes acknowledged"
            await asyncio.sleep(0.02)

    async def stop(self) -> None:
        self.stopping.set()
        await asyncio.gather(*self.tasks)


async def cli_put(home: Path) -> asyncio.subprocess.Process:
    """A CLI `card put` started now; its card is sent by `cli_revision`."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "card", "put", "--session", SESSION,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment(home),
    )


async def cli_revision(proc: asyncio.subprocess.Process, marker: str) -> int:
    body = json.dumps({"plan": [{"step": marker, "status": "in_progress"}]}).encode()
    out, err = await asyncio.wait_for(proc.communicate(body), 30)
    assert proc.returncode == 0, err.decode()
    found = re.search(r"rev (\d+)", out.decode())
    assert found, out.decode()
    return int(found.group(1))


async def history(serve: Serve) -> dict[int, set[str]]:
    """Each kept revision of the card, with the steps its write added."""
    body = {"method": "progressCard.history", "params": {"sessionKey": SESSION, "limit": 200}}
    async with httpx.AsyncClient(timeout=10) as client:
        answer = await client.post(f"{serve.base}/v1/rpc", json=body, headers={"Authorization": f"Bearer {TOKEN}"})
    entries = answer.json()["result"]
    revisions = [e["revision"] for e in entries]
    assert revisions == sorted(set(revisions), reverse=True), f"revisions repeat or go back: {revisions}"
    return {e["revision"]: {c["step"] for c in e["changes"] if c["from"] is None} for e in entries}


def assert_kept(acked: dict[str, int], kept: dict[int, set[str]]) -> None:
    assert len(set(acked.values())) == len(acked), "two acknowledged writes were given one revision"
    by_writer: dict[str, list[tuple[int, int]]] = {}
    for marker, revision in acked.items():
        if marker.startswith("w-"):
            writer, i = marker.rsplit("-", 1)
            by_writer.setdefault(writer, []).append((int(i), revision))
    for writes in by_writer.values():
        revisions = [revision for _, revision in sorted(writes)]
        assert revisions == sorted(revisions), f"a writer's revisions went back: {revisions}"
    # The history keeps the newest 200 revisions: the tests write fewer (a write that was
    # refused as the server stalled may still land when it resumes, with the next one).
    assert min(kept) == 1, f"more revisions than the history keeps: {min(kept)}..{max(kept)}"
    missing = {m: r for m, r in acked.items() if m not in kept.get(r, set())}
    assert not missing, f"acknowledged but not in the store as acknowledged: {missing}"


def the_server(home: Path) -> int:
    return int((home / "redis.pid").read_text())


async def test_a_frozen_embedded_redis_is_waited_for_not_replaced(start) -> None:  # noqa: F811
    serve = await running(start)
    census = Census(start.home)
    # 3 × 60 at most: within the history's 200 however long the CLI's write and the log
    # line take after the stall (the writers go on meanwhile).
    writers = Writers(serve.base, most=60)
    try:
        await writers.until(20)
        pid = the_server(start.home)
        os.kill(pid, signal.SIGSTOP)
        try:
            cli = await cli_put(start.home)
            await asyncio.sleep(STALL_SECONDS)  # the stall itself is what is tested
        finally:
            os.kill(pid, signal.SIGCONT)
        cli_marker = f"cli-{writers.tag}"
        cli_rev = await cli_revision(cli, cli_marker)
        await serve.line_matching(r"embedded Redis under .* is not answering, but its process lives", timeout=5)
        await writers.until(100)
    finally:
        await writers.stop()
        census.stop()
    assert census.most == 1 and census.seen == {pid}, (census.most, census.seen, serve.lines)
    assert the_server(start.home) == pid
    assert not any("restarting it" in line for line in serve.lines), serve.lines
    assert_kept({**writers.acked, cli_marker: cli_rev}, await history(serve))


async def test_a_killed_embedded_redis_is_started_again_once(start) -> None:  # noqa: F811
    serve = await running(start)
    census = Census(start.home)
    writers = Writers(serve.base, most=30)  # two rounds of 3 × 30 at most: within the history's 200
    try:
        await writers.until(40)
        await writers.stop()
        # A crash may lose the last second: kill once the last write is in the file.
        last = max(writers.acked, key=writers.acked.__getitem__)
        while not any(last.encode() in f.read_bytes() for f in start.home.rglob("*.aof")):
            await asyncio.sleep(0.02)
        pid = the_server(start.home)
        before = dict(writers.acked)
        writers = Writers(serve.base, most=30)
        os.kill(pid, signal.SIGKILL)
        cli_marker = f"cli-{writers.tag}"
        cli_rev = await cli_revision(await cli_put(start.home), cli_marker)
        await writers.until(40)
    finally:
        await writers.stop()
        census.stop()
    again = the_server(start.home)
    # (`seen` may also hold the new server's first process, before it daemonized.)
    assert again != pid and census.most == 1 and {pid, again} <= census.seen, (census.most, census.seen)
    acked = {**before, **writers.acked, cli_marker: cli_rev}
    assert min(writers.acked.values()) > max(before.values()) and cli_rev > max(before.values())
    assert_kept(acked, await history(serve))


def test_no_descriptor_left_is_not_taken_for_a_dead_server(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ensure_embedded(home)
    pid = the_server(home)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    spent: list[int] = []
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (len(os.listdir("/proc/self/fd")) + 8, hard))
        with pytest.raises(OSError):
            while True:
                spent.append(os.open(os.devnull, os.O_RDONLY))
        with pytest.raises(DescriptorShortage):
            embedded_health(home)
        with pytest.raises(DescriptorShortage):
            ensure_embedded(home)
    finally:
        for fd in spent:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    try:
        assert servers(home) == {pid} and the_server(home) == pid
    finally:
        stop_embedded(home)
