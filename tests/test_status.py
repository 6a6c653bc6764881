"""Which store a command uses: `progresscast status` says it (and whether a `serve` runs
on it) without starting anything, and a command whose store is not the running
`serve`'s, or not the one of ./progresscast.toml it did not read, says so on stderr."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from progresscast.store.embedded import is_running, stop_embedded
from test_serve import Serve

TOKEN = "t0ken-for-tests"


class Shell:
    """A user's shell: its own PROGRESSCAST_HOME, working directory and runtime
    directory (so that other tests' `serve` processes are not this user's)."""

    def __init__(self, tmp_path: Path, home: str) -> None:
        self.home = tmp_path / home
        self.cwd = tmp_path
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
        self.env |= {"PROGRESSCAST_HOME": str(self.home), "XDG_RUNTIME_DIR": str(tmp_path / "run"),
                     "PROGRESSCAST_HOOK_SERVER": "off", "PROGRESSCAST_TOKEN": TOKEN}

    def __call__(self, *args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "progresscast.cli", *args], capture_output=True, text=True, env=self.env,
            cwd=self.cwd, timeout=60, stdin=subprocess.DEVNULL,
        )


@pytest.fixture
async def shells(tmp_path: Path) -> AsyncIterator[tuple[Shell, Shell]]:
    (tmp_path / "run").mkdir(mode=0o700)
    made = Shell(tmp_path, "home"), Shell(tmp_path, "other-home")
    yield made
    for shell in made:
        stop_embedded(shell.home)


async def serving(shell: Shell, config: Path) -> Serve:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "serve", "--config", str(config),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env=shell.env, cwd=shell.cwd,
    )
    serve = Serve(proc)
    await serve.line_matching(r"gateway and web page on (http://\S+)")
    return serve


async def test_a_command_on_another_store_than_the_running_serve_says_so(shells: tuple[Shell, Shell], tmp_path: Path) -> None:
    mine, other = shells
    config = tmp_path / "gateway.toml"
    config.write_text('[gateway]\nlisten = "127.0.0.1:0"\n[[gateway.tokens]]\ntoken = "env:PROGRESSCAST_TOKEN"\n')
    serve = await serving(mine, config)
    try:
        status = mine("status", "--config", str(config))
        assert status.returncode == 0, status.stderr
        assert f"store     unix://{mine.home}/redis.sock (the embedded Redis of {mine.home})" in status.stdout
        assert f"serve     running, pid {serve.proc.pid}, config {config}" in status.stdout
        assert "channels  none configured" in status.stdout

        same = mine("card", "get", "--session", "t-1")
        assert same.returncode == 0 and same.stderr == "", same.stderr
        elsewhere = other("card", "get", "--session", "t-1")
        assert elsewhere.returncode == 0 and elsewhere.stdout == "null\n"
        assert elsewhere.stderr == (
            f"progresscast: note: this command used the store unix://{other.home}/redis.sock, but the running "
            f"`serve` (pid {serve.proc.pid}, config {config}) uses unix://{mine.home}/redis.sock\n"
        )
        assert f"serve     none on this store (one runs on unix://{mine.home}/redis.sock" in other("status").stdout
    finally:
        serve.proc.terminate()
        assert await serve.finished() == 0
    assert other("card", "get", "--session", "t-1").stderr == ""  # the serve ended: its record went with it
    assert list((tmp_path / "run" / "progresscast").glob("serve-*")) == []


def test_a_command_that_did_not_read_the_config_here_says_when_its_store_differs(shells: tuple[Shell, Shell]) -> None:
    mine, _ = shells
    (mine.cwd / "progresscast.toml").write_text('[store]\nurl = "redis://127.0.0.1:9/0"\n')
    quiet = mine("status")
    assert quiet.returncode == 0 and "serve     none on this store" in quiet.stdout
    assert "follows   not read: the embedded Redis is not running" in quiet.stdout
    assert not is_running(mine.home)  # status starts nothing
    noted = mine("card", "get", "--session", "t-1")
    assert noted.returncode == 0
    assert noted.stderr == (
        f"progresscast: note: this command used the store unix://{mine.home}/redis.sock, but ./progresscast.toml "
        "(not read: no --config) uses redis://127.0.0.1:9/0\n"
    )
    (mine.cwd / "progresscast.toml").write_text("[agents]\ndefault = 'main'\n")  # the same store: nothing to say
    assert mine("card", "get", "--session", "t-1").stderr == ""
