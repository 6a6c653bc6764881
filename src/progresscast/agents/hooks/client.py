"""A one-event hook call handed to this user's warm hook server (server.py).

The call sends its command line, directory, environment, umask and stdin; the server
runs the very hook a call would run itself and sends back its exit status, stdout and
stderr, which the call writes out as its own. Standard library only, no asyncio: that
is the point (docs/agents.md, "The warm hook server").

When no server answers — none is running, its socket is dead, it is busy past
`GREETING_TIMEOUT`, or its code changed under it — the call runs in its own process as
before and then starts a server (`start_server`) for the next calls.
"""

from __future__ import annotations

import io
import json
import os
import socket
import sys
import time
from pathlib import Path
from typing import TextIO

from ...arguments import GLOBAL_OPTIONS
from . import wire

DEFAULT_WAIT = 50
"""Seconds a hook waits for an answer from chat: under Claude Code's default hook
timeout (60 s), so the terminal's own prompt still comes when nobody answers."""

ONE_EVENT = ("claude-code", "gemini")
"""The hooks that read one event and exit. Codex's hook follows a whole `codex exec`
stream for as long as it runs (piped in or wrapped): it gains nothing from a server
that would be busy with it throughout, so it always runs in its own process."""
HARNESSES = ("claude-code", "codex", "gemini")
"""Every `progresscast hook` harness (the command line's choices)."""
HOOK_OPTIONS = ("--session", "--agent", "--wait", "--ask-tools")
"""The hook's own options, each with a value."""
BLOCKING = (b'"PermissionRequest"', b'"AskUserQuestion"')
"""Events that may wait for an answer from chat (up to `--wait`): they run in their own
process, never on the server, which takes one call at a time. So does Gemini CLI's
`BeforeTool` when the hook asks about tools (`--ask-tools`)."""

GREETING_TIMEOUT = 2.0
"""Seconds to wait for the server to greet (it serves one call at a time), and to send
it the request. Until the whole request is sent nothing has happened, so running the
hook here after that is safe."""
ANSWER_TIMEOUT = 12.0
"""Seconds to wait for the answer once the request is sent: what a call in its own
process may take at worst (the first call starts the embedded Redis, up to 10 s)."""


def one_event_harness(argv: list[str]) -> str | None:
    """The harness of `hook …` in `argv` if it is a one-event hook the server may run
    (not --help: its width follows the caller's terminal)."""
    words = argv[argv.index("hook") + 1 :] if "hook" in argv else []
    if "-h" in words or "--help" in words:
        return None
    skip = False
    for word in words:
        if skip:
            skip = False
        elif word in GLOBAL_OPTIONS or word in HOOK_OPTIONS:
            skip = True
        elif word in HARNESSES:
            return word if word in ONE_EVENT else None
    return None


def _streams() -> dict[str, list[str | None]]:
    """How this process encodes its standard streams, for the server to do the same."""
    return {
        name: [getattr(stream, "encoding", None), getattr(stream, "errors", None)]
        for name, stream in (("stdin", sys.stdin), ("stdout", sys.stdout), ("stderr", sys.stderr))
    }


def _umask() -> int:
    mask = os.umask(0o077)
    os.umask(mask)
    return mask


def call_server(argv: list[str], harness: str) -> tuple[int | None, bool]:
    """Run `progresscast <argv>` on the server: (its exit status, or None when the server
    did not run it and the caller must; whether the caller should then start a server)."""
    if not wire.enabled() or sys.stdin is None or sys.stdout is None or sys.stderr is None:
        return None, False
    try:
        path = wire.socket_path()
        cwd = os.getcwd()
    except wire.UnsafeDirectory:
        return None, True  # starting a server says why none is used
    except OSError:
        return None, True  # no directory yet: starting a server makes it
    if not path.exists():
        return None, True
    # Read before connecting, so the server never waits on a slow writer of stdin; a
    # call the server does not run gets it back to read as ever.
    # One byte past the bound at most: the call run here then says the event is too big.
    stdin = sys.stdin.buffer.read(wire.MAX_EVENT_BYTES + 1)
    asks_tools = b'"BeforeTool"' in stdin and any(w.startswith("--ask-tools") for w in argv)
    if asks_tools or any(word in stdin for word in BLOCKING):
        status, start = None, False
    else:
        status, start = _exchange(path, argv, harness, cwd, stdin)
    if status is None:
        sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding=sys.stdin.encoding, errors=sys.stdin.errors)
    return status, start


def _exchange(path: Path, argv: list[str], harness: str, cwd: str, stdin: bytes) -> tuple[int | None, bool]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.settimeout(GREETING_TIMEOUT)
            conn.connect(str(path))
            greeting = wire.recv_json(conn, time.monotonic() + GREETING_TIMEOUT)
        except (FileNotFoundError, ConnectionRefusedError):
            return None, True  # no server, or a dead socket file: start one
        except (OSError, EOFError, ValueError):
            return None, False  # busy, or closing (idle): it is there, just not for this call
        if greeting.get("state") != "ready" or greeting.get("identity") != wire.identity():
            return None, greeting.get("state") == "stale"  # stale: it exits; start a new one
        header = {"argv": argv, "cwd": cwd, "env": dict(os.environ), "umask": _umask(), "streams": _streams()}
        try:
            wire.send_frames(conn, json.dumps(header).encode(), stdin)
        except OSError:
            return None, False  # the server acts only on a whole request, and it did not get one
        # From here on the server may have applied the event (starting a run is not
        # idempotent), so a late or lost answer is reported, never redone here.
        try:
            deadline = time.monotonic() + ANSWER_TIMEOUT
            answer = wire.recv_json(conn, deadline)
            if answer.get("status") is None:
                return None, False  # it could not take the call (the cwd is gone): nothing was done
            out, err = wire.recv_frame(conn, deadline), wire.recv_frame(conn, deadline)
        except (OSError, EOFError, ValueError) as exc:
            why = f"no answer within {ANSWER_TIMEOUT:g} s" if isinstance(exc, TimeoutError) else str(exc)
            print(
                f"progresscast hook {harness}: the hook server took the event but did not answer ({why}); "
                "it may not have been recorded",
                file=sys.stderr, flush=True,
            )
            if harness == "gemini":
                print("{}", flush=True)
            return 0, False
    _write(sys.stderr, err)  # stderr first: the one stdout line (Gemini's {}) comes last in a call too
    _write(sys.stdout, out)
    return int(answer["status"]), False


def _write(stream: TextIO, data: bytes) -> None:
    if not data:
        return
    try:
        stream.flush()
        stream.buffer.write(data)
        stream.flush()
    except (OSError, ValueError):
        pass  # the reader left; a hook says nothing more


def start_server() -> None:
    """Start a server in the background for the next calls, without waiting for it.

    Its own session, no terminal, and none of this call's pipes (an agent waiting for
    the hook's output to close must not wait for the server too): stdin and stdout are
    /dev/null, stderr a log file beside the socket. Whatever fails here, the call's own
    result stands; a socket directory others can enter is said on stderr (by each call).
    """
    try:
        path = wire.socket_path(create=True)
    except wire.UnsafeDirectory as exc:
        print(f"progresscast hook: {exc}", file=sys.stderr, flush=True)
        return
    except OSError:
        return
    import subprocess

    try:
        with open(path.with_suffix(".log"), "ab") as log:
            subprocess.Popen(
                [sys.executable, "-m", "progresscast.agents.hooks.server", str(path), wire.identity()],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
                # From the package's parent directory, so that `-m` imports this very package.
                cwd=str(wire.PACKAGE.parent), start_new_session=True, close_fds=True,
            )
    except OSError:
        pass
