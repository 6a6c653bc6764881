"""The warm hook server: hook calls served by it do what calls of their own do.

Every call is a real `progresscast hook …` process on a real Redis. Whether a call
was served is seen in what the process imported (a served call imports no redis-py),
via the console script of test_hook_imports.py. Each test has its own socket directory
and its servers are killed at teardown (the `hook_servers` fixture, conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import agent_fixtures as fx
from conftest import HookServers, alive, free_port
from progresscast.agents.hooks import client, wire
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.embedded import ensure_embedded, stop_embedded
from test_hook_imports import CONSOLE_SCRIPT
from test_hooks import plan_of, view_of


class Call:
    """One finished hook process: its exit status, its output, and whether it was served."""

    def __init__(self, done: subprocess.CompletedProcess[bytes], modules: list[str], elapsed: float) -> None:
        self.status, self.out, self.err = done.returncode, done.stdout, done.stderr
        self.served = "redis" not in modules and "progresscast.agents.hooks.runner" not in modules
        self.modules = modules
        self.elapsed = elapsed


def hook(
    tmp_path: Path, harness: str, stdin: bytes | dict[str, Any], *args: str, cwd: Path | None = None, **env: str
) -> Call:
    data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
    imported_to = tmp_path / "imported.json"
    imported_to.unlink(missing_ok=True)
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, "hook", harness, *args],
        input=data, capture_output=True, timeout=60, cwd=cwd,
        env={k: v for k, v in os.environ.items() if k != "PROGRESSCAST_CONFIG"} | {"IMPORTED_TO": str(imported_to)} | env,
    )
    elapsed = time.monotonic() - started
    return Call(done, json.loads(imported_to.read_text()), elapsed)


def warm(servers: HookServers, tmp_path: Path, url: str) -> int:
    """Start a server (a call that finds none starts one) and wait until it listens."""
    first = hook(tmp_path, "claude-code", fx.claude("Notification", message="warming up"), "--redis", url)
    assert first.status == 0 and first.err == b"" and not first.served
    pid = servers.wait_for_server()
    assert hook(tmp_path, "claude-code", fx.claude("Notification", message="warm"), "--redis", url).served
    return pid


@pytest.mark.backends
def test_calls_after_the_first_are_served_and_write_what_calls_of_their_own_write(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    pid = warm(hook_servers, tmp_path, redis_url)
    for event in fx.CLAUDE_TODOWRITE_SESSION:
        served = hook(tmp_path, "claude-code", event, "--redis", redis_url, "--session", "served")
        alone = hook(tmp_path, "claude-code", event, "--redis", redis_url, "--session", "alone",
                     PROGRESSCAST_HOOK_SERVER="off")
        assert served.served and not alone.served
        assert (served.status, served.out, served.err) == (alone.status, alone.out, alone.err) == (0, b"", b"")
        a, b = view_of(redis_url, Owner("main", "served")), view_of(redis_url, Owner("main", "alone"))
        assert (plan_of(a), a.run, a.activity.headline) == (plan_of(b), b.run, b.activity.headline)
        assert (a.card and a.card.revision) == (b.card and b.card.revision)
    assert a.run is RunState.completed and plan_of(a) == [(s["content"], "completed") for s in fx.TODOS_3]
    assert hook_servers.pid() == pid  # one server took every call


@pytest.mark.parametrize(
    ("harness", "stdin", "args"),
    [
        ("gemini", fx.GEMINI_SESSION[2], ()),
        ("gemini", b"not json", ()),
        ("gemini", b"[1, 2]", ()),
        ("gemini", fx.GEMINI_SESSION[2], ("--bogus",)),
        ("claude-code", b"\xff\xfe", ()),
        ("claude-code", fx.claude("UserPromptSubmit", session_id="x" * 300), ()),
        ("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], ("--agent", "nobody")),
    ],
)
def test_a_served_call_prints_byte_for_byte_what_a_call_of_its_own_prints(
    hook_servers: HookServers, redis_url: str, tmp_path: Path, harness: str, stdin: Any, args: tuple[str, ...]
) -> None:
    warm(hook_servers, tmp_path, redis_url)
    served = hook(tmp_path, harness, stdin, "--redis", redis_url, *args)
    alone = hook(tmp_path, harness, stdin, "--redis", redis_url, *args, PROGRESSCAST_HOOK_SERVER="off")
    assert served.served and not alone.served
    assert (served.status, served.out, served.err) == (alone.status, alone.out, alone.err)
    if harness == "gemini" and not args:
        assert served.out == b"{}\n"  # Gemini CLI reads stdout as JSON: that and nothing else


def test_with_the_store_down_a_served_call_exits_0_within_a_second_and_says_why(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    warm(hook_servers, tmp_path, redis_url)
    for harness, event in [("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1]), ("gemini", fx.GEMINI_SESSION[2])]:
        call = hook(tmp_path, harness, event, "--redis", f"redis://127.0.0.1:{free_port()}")
        assert call.served and call.status == 0
        assert call.elapsed < 1.0, f"the call took {call.elapsed:.2f} s"
        assert b"the card store is not answering" in call.err and b"nothing was recorded" in call.err
        assert call.out == (b"{}\n" if harness == "gemini" else b"")


def test_each_call_brings_its_own_environment(hook_servers: HookServers, redis_url: str, tmp_path: Path) -> None:
    other_home = tmp_path / "other"
    other = ensure_embedded(other_home)
    try:
        warm(hook_servers, tmp_path, redis_url)
        config = tmp_path / "progresscast.toml"
        config.write_text('[agents]\ndefault = "research"\nknown = ["research"]\n')
        event = fx.CLAUDE_TODOWRITE_SESSION[1]
        calls = [
            hook(tmp_path, "claude-code", event, "--redis", redis_url),
            hook(tmp_path, "claude-code", event, PROGRESSCAST_REDIS_URL=other, PROGRESSCAST_CONFIG=str(config)),
            # the embedded Redis of the call's PROGRESSCAST_HOME, found from the call's directory
            hook(tmp_path, "claude-code", event, "--session", "by-home", PROGRESSCAST_HOME="other", cwd=tmp_path),
        ]
        assert [(c.served, c.status, c.err) for c in calls] == [(True, 0, b"")] * 3
        main, research = Owner("main", fx.CLAUDE_SESSION), Owner("research", fx.CLAUDE_SESSION)
        assert plan_of(view_of(redis_url, main)) is not None and view_of(redis_url, research).card is None
        assert plan_of(view_of(other, research)) is not None and view_of(other, main).card is None
        assert plan_of(view_of(other, Owner("main", "by-home"))) is not None
        # and nothing of one call's environment is left for the next: this one has no config
        assert hook(tmp_path, "claude-code", event, "--agent", "research", "--redis", redis_url).err.endswith(
            b"--agent: 'research' is not a configured agent; nothing was recorded\n"
        )
    finally:
        stop_embedded(other_home)


@pytest.mark.alone  # it changes the package's code: every warm server running meanwhile exits at its next call
def test_a_server_whose_code_changed_hands_the_call_back_and_exits(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    pid = warm(hook_servers, tmp_path, redis_url)
    source = wire.PACKAGE / "timescale.py"
    os.utime(source)  # what an edit of an editable install does to the server's code
    call = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], "--redis", redis_url)
    assert not call.served and (call.status, call.err) == (0, b"")
    assert plan_of(view_of(redis_url, Owner("main", fx.CLAUDE_SESSION))) is not None
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not alive(pid)
    assert "exiting: its code changed since it started" in hook_servers.log()
    assert hook_servers.wait_for_server() != pid  # the call that ran itself started a fresh one


def test_an_idle_server_exits(hook_servers: HookServers, redis_url: str, tmp_path: Path) -> None:
    # the server reads it from the environment of the call that starts it
    hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[0], "--redis", redis_url, PROGRESSCAST_HOOK_IDLE="1")
    pid = hook_servers.wait_for_server()
    deadline = time.monotonic() + 10
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid) and list(hook_servers.dir.glob("hook-*.sock")) == []
    assert "exiting: no call for 1 s" in hook_servers.log()


def test_a_call_the_server_does_not_greet_in_time_runs_itself_once(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    pid = warm(hook_servers, tmp_path, redis_url)
    owner = Owner("main", fx.CLAUDE_SESSION)
    os.kill(pid, signal.SIGSTOP)  # busy past the greeting timeout
    try:
        call = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], "--redis", redis_url)
    finally:
        os.kill(pid, signal.SIGCONT)
    assert not call.served and (call.status, call.err) == (0, b"")
    assert call.elapsed >= client.GREETING_TIMEOUT
    view = view_of(redis_url, owner)
    assert view.card is not None and view.card.revision == 1
    # The server, going on, finds the call it never greeted gone, and does not make it too.
    second = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[2], "--redis", redis_url)
    assert second.served, hook_servers.log()
    view = view_of(redis_url, owner)
    assert view.card is not None and view.card.revision == 2
    assert plan_of(view) == [(s["content"], s["status"]) for s in fx.TODOS_2]


def test_a_dead_socket_file_is_replaced(hook_servers: HookServers, redis_url: str, tmp_path: Path) -> None:
    dead = wire.socket_path(create=True)
    with socket.socket(socket.AF_UNIX) as left_behind:  # a server killed without cleaning up
        left_behind.bind(str(dead))
    call = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], "--redis", redis_url)
    assert not call.served and (call.status, call.err) == (0, b"")
    hook_servers.wait_for_server()
    second = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[2], "--redis", redis_url)
    assert second.served, hook_servers.log()


def test_the_call_that_starts_a_server_does_not_wait_for_it(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    # capture_output waits for every holder of the pipes to close them: a server that
    # kept them would hold this call until it exits (10 minutes idle).
    started = time.monotonic()
    done = subprocess.run(
        [Path(sys.executable).with_name("progresscast"), "hook", "claude-code", "--redis", redis_url],
        input=json.dumps(fx.CLAUDE_TODOWRITE_SESSION[1]).encode(), capture_output=True, timeout=30,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"")
    assert time.monotonic() - started < 10
    assert alive(hook_servers.wait_for_server())


def test_first_calls_at_once_start_one_server(hook_servers: HookServers, redis_url: str, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("progresscast")
    calls = [
        subprocess.Popen([script, "hook", "claude-code", "--redis", redis_url, "--session", f"at-once-{i}"],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for i in range(4)
    ]
    for call in calls:
        out, err = call.communicate(json.dumps(fx.CLAUDE_TODOWRITE_SESSION[1]).encode(), timeout=60)
        assert (call.returncode, out, err) == (0, b"", b"")
    winner = hook_servers.wait_for_server()
    deadline = time.monotonic() + 10
    while hook_servers.running() - {winner}:  # the servers that lost the race see the winner and leave
        assert time.monotonic() < deadline, f"servers besides {winner} still run: {hook_servers.running()}"
        time.sleep(0.02)
    assert hook_servers.log().count("serving") == 1, hook_servers.log()
    for i in range(4):
        assert plan_of(view_of(redis_url, Owner("main", f"at-once-{i}"))) is not None


def test_a_socket_directory_others_can_enter_is_not_used(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    hook_servers.dir.chmod(0o755)
    call = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], "--redis", redis_url)
    assert not call.served and call.status == 0
    assert b"is not a directory private to this user" in call.err
    assert plan_of(view_of(redis_url, Owner("main", fx.CLAUDE_SESSION))) is not None
    time.sleep(0.5)
    assert list(hook_servers.dir.iterdir()) == []


def test_off_means_no_server(hook_servers: HookServers, redis_url: str, tmp_path: Path) -> None:
    for _ in range(2):
        call = hook(tmp_path, "claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], "--redis", redis_url,
                    PROGRESSCAST_HOOK_SERVER="off")
        assert not call.served and (call.status, call.err) == (0, b"")
    time.sleep(0.5)
    assert list(hook_servers.dir.iterdir()) == []


def test_the_server_is_asked_only_for_one_event_hooks_whatever_the_options_hold() -> None:
    """The client finds the harness the way the command line does: an option's value
    (a session named "codex") is not the harness, and every option with a value that
    `hook` accepts is one the client skips."""
    from progresscast.agents.hooks.command import hook_parser as build_hook_parser

    assert client.one_event_harness(["--redis", "gemini", "hook", "--session", "codex", "claude-code"]) == "claude-code"
    assert client.one_event_harness(["hook", "--agent", "claude-code", "codex"]) is None
    assert client.one_event_harness(["hook", "gemini", "--help"]) is None
    hook_parser = next(
        p for a in build_hook_parser()._actions if a.choices and "hook" in a.choices for p in [a.choices["hook"]]
    )
    with_value = {o for a in hook_parser._actions if a.nargs != 0 for o in a.option_strings if o.startswith("--")}
    assert with_value == set(client.GLOBAL_OPTIONS) | set(client.HOOK_OPTIONS)
    harness = next(a for a in hook_parser._actions if a.dest == "harness")
    assert tuple(harness.choices) == client.HARNESSES


def test_a_call_that_waits_for_an_answer_from_chat_runs_in_its_own_process(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    """A permission request may wait up to `--wait` for a person: the server, which takes
    one call at a time, is left free for the other calls meanwhile."""
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from progresscast.model.asks import Actor
    from progresscast.store.cards import CardStore
    from progresscast.store.connections import connect

    warm(hook_servers, tmp_path, redis_url)
    event = fx.claude("PermissionRequest", tool_name="Bash", tool_input={"command": "make deploy"})
    owner = Owner("main", fx.CLAUDE_SESSION)

    async def answer_when_asked() -> None:
        store = CardStore(connect(redis_url))
        try:
            deadline = time.monotonic() + 20
            while not (asks := (await store.asks.all(owner))[0]):
                assert time.monotonic() < deadline
                await asyncio.sleep(0.02)
            # Meanwhile another call is served at once.
            other = hook(tmp_path, "claude-code", fx.claude("Notification", message="x"), "--redis", redis_url)
            assert other.served and other.elapsed < 5
            await store.asks.answer(owner, asks[0].ask_id, Actor("telegram", "42", "7", "Ana"), options=["Allow"])
        finally:
            await store.redis.aclose()

    (tmp_path / "asking").mkdir()
    with ThreadPoolExecutor(1) as pool:
        asking = pool.submit(hook, tmp_path / "asking", "claude-code", event, "--redis", redis_url)
        asyncio.run(answer_when_asked())
        call = asking.result(timeout=30)
    assert not call.served and call.status == 0, call.err
    assert json.loads(call.out)["hookSpecificOutput"]["decision"] == {"behavior": "allow"}


def test_a_frame_over_the_bound_is_refused_before_it_is_read(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    """A peer that announces a frame of a terabyte is not waited for, nor its bytes kept:
    the server drops the connection at once and serves the next call."""
    pid = warm(hook_servers, tmp_path, redis_url)
    sock = next(hook_servers.dir.glob("hook-*.sock"))
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(5)
        conn.connect(str(sock))
        assert wire.recv_json(conn, time.monotonic() + 5)["state"] == "ready"
        started = time.monotonic()
        conn.sendall((1 << 40).to_bytes(8, "big") + b"{")
        try:
            left = conn.recv(1)
        except ConnectionResetError:  # closed with what was sent unread: a reset
            left = b""
        assert left == b""  # closed without waiting for the rest of the frame
        assert time.monotonic() - started < 2
    assert hook(tmp_path, "claude-code", fx.claude("Notification", message="next"), "--redis", redis_url).served
    assert hook_servers.pid() == pid


def test_wire_refuses_a_frame_over_its_bound_without_reading_it() -> None:
    a, b = socket.socketpair()
    with a, b:
        b.sendall((wire.MAX_FRAME_BYTES + 1).to_bytes(8, "big") + b"x" * 10)
        with pytest.raises(ValueError, match="frame of .* bytes: over the bound"):
            wire.recv_frame(a, time.monotonic() + 1)
        b.sendall((3).to_bytes(8, "big") + b"abc")
        assert a.recv(10) == b"x" * 10  # nothing of the refused frame was read past its size
