"""Where a hook call finds this user's warm hook server, and how the two talk.

Standard library only, and little of it: a hook call served by the server imports this
module, client.py and the command line, nothing more.

- The socket lives in a directory only this user can enter: PROGRESSCAST_HOOK_SOCKET_DIR,
  else `$XDG_RUNTIME_DIR/progresscast`, else `/tmp/progresscast-<uid>` (mode 0700, owned
  by us, else it is not used). Its name carries a hash of the interpreter, its
  environment (virtualenv) and the package's location, so two virtualenvs or checkouts
  never share a server; the server names all three in its greeting, and a call that is
  not its own does not use it.
- Every message is a frame: an 8-byte big-endian length, then that many bytes. The
  server greets with a JSON frame; the client sends a JSON header and its stdin; the
  server answers a JSON header, the hook's stdout and its stderr.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
import zlib
from pathlib import Path
from typing import Any

from ...private import UnsafeDirectory as UnsafeDirectory
from ...private import check_private, runtime_dir

SERVER_ENV = "PROGRESSCAST_HOOK_SERVER"
"""`off` (or 0, false, no): every hook call runs in its own process, no server is used."""
SOCKET_DIR_ENV = "PROGRESSCAST_HOOK_SOCKET_DIR"
IDLE_ENV = "PROGRESSCAST_HOOK_IDLE"
"""Seconds the server waits for a call before it exits."""
DEFAULT_IDLE = 600.0

PACKAGE = Path(__file__).resolve().parents[2]  # src/progresscast
"""The progresscast package this code runs from (the server watches its .py files)."""


MAX_EVENT_BYTES = 16 << 20
"""A hook event read from stdin: a tool's whole output fits; an endless stdin does not."""
MAX_FRAME_BYTES = 2 * MAX_EVENT_BYTES
"""A frame between a hook call and its server: a call's stdin (one byte past
`MAX_EVENT_BYTES` at most), its environment and arguments, or what it printed."""


def enabled() -> bool:
    return os.environ.get(SERVER_ENV, "").strip().lower() not in ("off", "0", "false", "no")


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_IDLE
    except ValueError:
        return DEFAULT_IDLE
    return value if value > 0 else DEFAULT_IDLE


def identity() -> str:
    """What makes a server ours: the same interpreter in the same environment running
    the same package (`python` and `python3` of one virtualenv are one)."""
    return f"{os.path.realpath(sys.executable)}\n{sys.prefix}\n{PACKAGE}"


def socket_dir(*, create: bool) -> Path:
    """The directory, checked to be ours and private; `create` makes it when missing
    (the client never does: no directory, no server). Raises OSError, UnsafeDirectory."""
    chosen = os.environ.get(SOCKET_DIR_ENV)
    try:
        if not chosen:
            return runtime_dir(create=create)
        path = Path(chosen)
        if create:
            os.makedirs(path, mode=0o700, exist_ok=True)
        check_private(path)
    except UnsafeDirectory as exc:
        raise UnsafeDirectory(f"{exc}; not using a hook server there") from None
    return path


def socket_path(*, create: bool = False) -> Path:
    digest = zlib.crc32(identity().encode("utf-8", "surrogateescape"))
    return socket_dir(create=create) / f"hook-{digest:08x}.sock"


def pid_path(sock: Path) -> Path:
    """Where the server serving `sock` writes its process id."""
    return sock.with_suffix(".pid")


def send_frames(conn: socket.socket, *parts: bytes) -> None:
    conn.sendall(b"".join(len(part).to_bytes(8, "big") + part for part in parts))


def send_json(conn: socket.socket, *parts: Any) -> None:
    send_frames(conn, *(json.dumps(part).encode() for part in parts))


def recv_frame(conn: socket.socket, deadline: float) -> bytes:
    """One frame, all of it by `deadline` (time.monotonic()); EOFError if the peer left,
    TimeoutError if it is late, ValueError for one over `MAX_FRAME_BYTES` (none of it read)."""
    size = int.from_bytes(_exactly(conn, 8, deadline), "big")
    if size > MAX_FRAME_BYTES:
        raise ValueError(f"a frame of {size:,} bytes: over the bound of {MAX_FRAME_BYTES:,}")
    return _exactly(conn, size, deadline)


def recv_json(conn: socket.socket, deadline: float) -> Any:
    return json.loads(recv_frame(conn, deadline))


def _exactly(conn: socket.socket, size: int, deadline: float) -> bytes:
    data = bytearray()
    while len(data) < size:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("timed out")
        conn.settimeout(left)
        chunk = conn.recv(min(size - len(data), 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the connection")
        data += chunk
    return bytes(data)
