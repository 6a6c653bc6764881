"""The warm hook server: this user's one-event hook calls, run in one process that has
already imported redis-py and pydantic.

A hook call that finds no server starts one in the background (client.start_server):
`python -m progresscast.agents.hooks.server SOCKET IDENTITY`. It runs each call exactly as the
call would run itself (`command.hook_status`), with the call's command line, directory,
environment, umask and stdin, and sends back its exit status, stdout and stderr.

One call at a time: the hook reads os.environ, the working directory and sys.std*,
which belong to the whole process, so each call sets them and puts them back after.

It exits after PROGRESSCAST_HOOK_IDLE seconds without a call (default 600), and as soon
as a .py file of the package changed since it started (an editable install being edited,
an upgrade): that call is answered "stale" and runs in its own process, which starts a
fresh server. Its log (start, exit and why) is the socket's name with `.log`.
"""

from __future__ import annotations

import fcntl
import io
import json
import os
import signal
import socket
import struct
import sys
import time
import traceback
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ... import collector
from . import wire


class Terminated(BaseException):
    """SIGTERM: raised past everything a hook call catches, so the server stops at once."""


def _terminate(*_: object) -> None:
    raise Terminated


REQUEST_TIMEOUT = 5.0
"""Seconds a greeted client has to send its whole request (it has it at hand)."""


def code_stamp() -> dict[str, int]:
    """The modification time of every .py file of the package, by path."""
    stamp: dict[str, int] = {}
    for folder, _, files in os.walk(wire.PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                try:
                    stamp[path] = os.stat(path).st_mtime_ns
                except FileNotFoundError:
                    pass
    return stamp


def _log(message: str) -> None:
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} hook server {os.getpid()}: {message}", file=sys.__stderr__, flush=True)


@contextmanager
def _locked(sock: Path) -> Iterator[None]:
    """Binding and unbinding `sock` one server at a time (two first calls at once start two)."""
    with open(sock.with_suffix(".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _answers(sock: Path) -> bool:
    """Whether a server listens on `sock` (a refused connect: a dead socket file)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(str(sock))
        except (FileNotFoundError, ConnectionRefusedError):
            return False
        except OSError:
            return True  # there but busy (a full backlog)
        return True


class HookServer:
    def __init__(self, sock: Path, listener: socket.socket) -> None:
        self.sock = sock
        self.listener = listener
        self.inode = os.stat(sock).st_ino
        self.stamp = code_stamp()
        self.home = os.getcwd()

    @classmethod
    def bind(cls, sock: Path) -> HookServer | None:
        """Listen on `sock`, replacing a dead socket file; None if a server already does."""
        with _locked(sock):
            if _answers(sock):
                return None
            sock.unlink(missing_ok=True)
            listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            listener.bind(str(sock))
            os.chmod(sock, 0o600)
            listener.listen(64)
            wire.pid_path(sock).write_text(f"{os.getpid()}\n")
            return cls(sock, listener)

    def serve(self, idle: float) -> str:
        """Take calls until idle for `idle` seconds or stale; why it stopped."""
        self.listener.settimeout(idle)
        while True:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                return f"no call for {idle:g} s"
            with conn:
                if not self._call(conn):
                    return "its code changed since it started"

    def _call(self, conn: socket.socket) -> bool:
        """Greet, take one request, answer; False once the code is stale (the caller runs it)."""
        conn.settimeout(REQUEST_TIMEOUT)
        if not _same_user(conn):
            return True  # the directory should keep others out; this is the second lock
        stale = code_stamp() != self.stamp
        if stale:
            self.unbind()  # first, so the caller's fallback starts a fresh server at once
        try:
            state = "stale" if stale else "ready"
            wire.send_json(conn, {"state": state, "identity": wire.identity(), "pid": os.getpid()})
            if stale:
                return False
            deadline = time.monotonic() + REQUEST_TIMEOUT
            header = wire.recv_json(conn, deadline)
            stdin = wire.recv_frame(conn, deadline)
        except (OSError, EOFError, ValueError):
            return not stale  # a probe, or a client that gave up before sending: nothing done
        status, out, err = self._run(header, stdin)
        try:
            wire.send_frames(conn, json.dumps({"status": status}).encode(), out, err)
        except OSError:
            pass  # the client left; the call was made all the same
        return True

    def _run(self, header: dict[str, Any], stdin: bytes) -> tuple[int | None, bytes, bytes]:
        """The hook call, in this process's clothes for the time of it."""
        from .command import hook_status

        try:
            os.chdir(header["cwd"])
        except OSError:
            return None, b"", b""  # the caller's directory is gone: let it run the call itself
        streams = header.get("streams", {})
        out, err = io.BytesIO(), io.BytesIO()
        saved = dict(os.environ), os.umask(header.get("umask", 0o022)), sys.stdin, sys.stdout, sys.stderr
        wrappers = [_text(io.BytesIO(stdin), streams.get("stdin")), _text(out, streams.get("stdout")),
                    _text(err, streams.get("stderr"))]
        os.environ.clear()
        os.environ.update(header["env"])
        sys.stdin, sys.stdout, sys.stderr = wrappers
        try:
            status = hook_status(list(header["argv"]))
        except Exception:  # what the interpreter would do with it
            traceback.print_exc()
            status = 1
        finally:
            for wrapper in wrappers:
                wrapper.flush()
                wrapper.detach()  # the bytes stay readable
            os.environ.clear()
            os.environ.update(saved[0])
            os.umask(saved[1])
            sys.stdin, sys.stdout, sys.stderr = saved[2:]
            os.chdir(self.home)
        return status, out.getvalue(), err.getvalue()

    def unbind(self) -> None:
        """Remove the socket file if it is still ours (a newer server may have replaced it)."""
        with _locked(self.sock):
            try:
                if os.stat(self.sock).st_ino == self.inode:
                    self.sock.unlink()
                    wire.pid_path(self.sock).unlink(missing_ok=True)
            except FileNotFoundError:
                pass


def _same_user(conn: socket.socket) -> bool:
    """Whether the peer runs as this user (Linux tells; elsewhere the directory's mode must do)."""
    if not hasattr(socket, "SO_PEERCRED"):
        return True
    credentials = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    uid: int = struct.unpack("3i", credentials)[1]
    return uid == os.getuid()


def _text(buffer: io.BytesIO, how: list[str | None] | None) -> io.TextIOWrapper:
    encoding, errors = how or (None, None)
    return io.TextIOWrapper(buffer, encoding=encoding or "utf-8", errors=errors or "strict", write_through=True)


def _preload() -> None:
    """Import what hook calls use, once (most of what a call in its own process spends)."""
    from ...config import load  # noqa: F401  (for calls with a config file)
    from . import claude_code, command, gemini, runner  # noqa: F401

    collector.settle()  # what is loaded now stays: the collector need not walk it on every call


def main(argv: list[str] | None = None) -> None:
    sock, expected = (sys.argv[1:] if argv is None else argv)[:2]
    if wire.identity() != expected:
        _log(f"not the package the call runs ({expected!r}); not serving")
        return
    # Absolute import paths: each call changes the working directory.
    sys.path[:] = [os.path.abspath(entry) for entry in sys.path]
    signal.signal(signal.SIGTERM, _terminate)
    server = HookServer.bind(Path(sock))
    if server is None:
        return  # another call started one first
    try:
        _log(f"serving {sock}")
        _preload()
        why = server.serve(wire.idle_seconds())
        _log(f"exiting: {why}")
    except Terminated:
        _log("exiting: terminated")
    finally:
        server.listener.close()
        server.unbind()


if __name__ == "__main__":
    main()
