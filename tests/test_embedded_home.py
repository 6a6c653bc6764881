"""The embedded Redis' home is private: made 0700, its files its user's alone, refused
when someone else owns it or may write to it, its socket never where someone else
could put one first, and a server answering there used only when it is the home's."""

from __future__ import annotations

import hashlib
import os
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis as sync_redis

from progresscast.store.embedded import ensure_embedded, stop_embedded

NOBODY = 65534


def cli(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    return subprocess.run(
        [sys.executable, "-m", "progresscast.cli", *args], capture_output=True, text=True, timeout=60,
        env={**clean, "PROGRESSCAST_HOME": str(home), **env}, input="",
    )


def one_line(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr, result.stderr
    return result.stderr


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    made = tmp_path / "data" / "home"
    yield made
    stop_embedded(made)


def test_a_new_home_is_private_and_so_is_everything_in_it(home: Path) -> None:
    client = sync_redis.Redis.from_url(ensure_embedded(home))
    client.set("k", "v")
    client.close()
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    found = list(home.rglob("*"))
    assert {p.name for p in found} >= {"redis.pid", "redis.log", "redis.conf", "redis.sock"}
    for path in found:
        assert not path.lstat().st_mode & 0o077, (path, stat.filemode(path.lstat().st_mode))


def test_a_home_an_earlier_version_left_readable_is_made_private(home: Path) -> None:
    ensure_embedded(home)
    stop_embedded(home)
    home.chmod(0o755)
    for path in home.iterdir():
        path.chmod(0o644)
    ensure_embedded(home)
    assert stat.S_IMODE(home.stat().st_mode) == 0o700
    assert all(not p.lstat().st_mode & 0o077 for p in home.iterdir())


def test_a_home_others_may_write_to_is_refused_in_one_line(home: Path) -> None:
    home.mkdir(parents=True)
    home.chmod(0o777)
    line = one_line(cli(home, "card", "get", "--session", "s"))
    assert line.startswith(f"progresscast: PROGRESSCAST_HOME: others may write to {home} (mode drwxrwxrwx)"), line
    assert "chmod 700" in line
    assert not (home / "redis.sock").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_home_of_another_user_is_refused_in_one_line(home: Path) -> None:
    home.mkdir(parents=True, mode=0o700)
    os.chown(home, NOBODY, NOBODY)
    line = one_line(cli(home, "card", "get", "--session", "s"))
    assert line.startswith(f"progresscast: PROGRESSCAST_HOME: {home} belongs to another user (uid {NOBODY})"), line


class FakeRedis:
    """A unix socket answering PONG to anything, and remembering what it was sent."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.heard = b""
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen(8)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    while data := conn.recv(65536):
                        self.heard += data
                        conn.sendall(b"+PONG\r\n")
                except OSError:
                    pass

    def close(self) -> None:
        self.server.close()
        self.path.unlink(missing_ok=True)


def test_a_long_home_path_does_not_put_the_socket_where_others_could_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    home = tmp_path / ("h" * 100)
    # Where the socket of a long home used to be: a predictable name in the shared /tmp.
    predictable = Path(tempfile.gettempdir()) / f"progresscast-{hashlib.sha256(str(home).encode()).hexdigest()[:16]}.sock"
    fake = FakeRedis(predictable)
    try:
        url = ensure_embedded(home)
        assert url != f"unix://{predictable}"
        sock = Path(url.removeprefix("unix://"))
        where = sock.parent.lstat()
        assert where.st_uid == os.getuid() and stat.S_IMODE(where.st_mode) == 0o700
        client = sync_redis.Redis.from_url(url)
        client.set("secret", "card")
        assert client.get("secret") == b"card"
        client.close()
        assert b"card" not in fake.heard
    finally:
        fake.close()
        stop_embedded(home)


@pytest.mark.skipif(os.geteuid() != 0, reason="giving a directory to another user needs root")
def test_a_runtime_directory_someone_else_made_is_not_used(tmp_path: Path) -> None:
    runtime = tmp_path / "run"
    (runtime / "progresscast").mkdir(parents=True, mode=0o700)
    os.chown(runtime / "progresscast", NOBODY, NOBODY)
    home = tmp_path / ("h" * 100)
    line = one_line(cli(home, "card", "get", "--session", "s", XDG_RUNTIME_DIR=str(runtime)))
    assert "the directory for it is unusable" in line and "not a directory private to this user" in line, line


def test_a_server_answering_on_the_socket_that_is_not_the_homes_is_not_used(home: Path) -> None:
    home.mkdir(parents=True, mode=0o700)
    fake = FakeRedis(home / "redis.sock")  # no pid file: not started for this home
    try:
        line = one_line(cli(home, "card", "get", "--session", "s"))
        assert line.startswith(f"progresscast: PROGRESSCAST_HOME: a Redis answers on {home / 'redis.sock'}, "
                               f"but it is not the one of {home}"), line
        assert b"EVALSHA" not in fake.heard and b"HSET" not in fake.heard
    finally:
        fake.close()
