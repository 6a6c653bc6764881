"""`progresscast emulator … --write-config FILE`: the config it writes is taken as it
is by `doctor` and `serve` (only the gateway's port is made free for the test), and
the console's chat, granted every session, follows a card and sees its draft."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from conftest import free_port
from progresscast.store.embedded import stop_embedded
from test_emulator_cli import read_until
from test_serve import Serve, environment

PLAN = json.dumps({"plan": [{"step": "Fix the login page", "status": "in_progress"}]})


@dataclass
class Emulator:
    proc: asyncio.subprocess.Process
    seen: list[str] = field(default_factory=list)

    async def shows(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        assert self.proc.stdout is not None
        try:
            return await read_until(self.proc.stdout, pattern, self.seen, timeout)
        except TimeoutError:
            raise AssertionError(f"the emulator never showed {pattern!r}:\n{''.join(self.seen)}") from None

    async def type(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()


@dataclass
class Trial:
    home: Path
    config: Path
    procs: list[asyncio.subprocess.Process] = field(default_factory=list)

    def env(self) -> dict[str, str]:
        return environment(self.home, PROGRESSCAST_TIME_SCALE="0.05")

    async def emulator(self, *args: str) -> Emulator:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "emulator", *args, "--write-config", str(self.config),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
            env=self.env(),
        )
        self.procs.append(proc)
        return Emulator(proc)

    def run(self, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "progresscast.cli", *args], input=stdin, capture_output=True, text=True,
            env=self.env(), timeout=60,
        )

    async def serve(self) -> Serve:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(self.config),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=self.env(),
        )
        self.procs.append(proc)
        serve = Serve(proc)
        serve.base = (await serve.line_matching(r"gateway and web page on (http://\S+)")).group(1)
        return serve


@pytest.fixture
async def trial(tmp_path: Path) -> AsyncIterator[Trial]:
    made = Trial(tmp_path / "home", tmp_path / "progresscast.toml")
    yield made
    for proc in made.procs:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    stop_embedded(made.home)



async def written(emulator: Emulator, trial: Trial) -> str:
    """The config the emulator wrote, once it says so, checked by `doctor`."""
    await emulator.shows(rf"Wrote {re.escape(str(trial.config))}: .*granted every session")
    await emulator.shows(rf"progresscast serve --config {re.escape(str(trial.config))}")
    text = trial.config.read_text()
    assert trial.config.stat().st_mode & 0o077 == 0  # it holds the emulator's secrets and the gateway token
    doctor = trial.run("doctor", "--config", str(trial.config))
    assert doctor.returncode == 0, doctor.stdout + doctor.stderr
    return text


async def follow_and_see(emulator: Emulator, trial: Trial, follow: str, followed: str, drafted: str) -> None:
    await trial.serve()
    await emulator.type(follow)
    await emulator.shows(followed)
    put = trial.run("card", "put", "--config", str(trial.config), "--session", "ticket-4821", stdin=PLAN)
    assert put.returncode == 0, put.stderr
    await emulator.shows(drafted)


async def test_telegram_config_serves_the_console_chat(trial: Trial) -> None:
    emulator = await trial.emulator("telegram")
    text = await written(emulator, trial)
    assert '[[channels.telegram.chats]]  # the emulator\'s console: granted every session\nid = 4821\nsessions = ["*"]' in text
    assert re.search(r'\[\[gateway\.tokens\]\]\ntoken = "[0-9a-f]{32}"\nscopes = \["operator\.read", "operator\.write", "operator\.answer"\]', text)
    trial.config.write_text(text.replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:0"'))
    await follow_and_see(
        emulator, trial, "/follow ticket-4821", r"Following agent:main:ticket-4821", r"│ .*Fix the login page"
    )
    status = trial.run("status", "--config", str(trial.config))
    assert status.returncode == 0, status.stderr
    assert re.search(r"^serve     running, pid \d+", status.stdout, re.M), status.stdout
    assert "channels  telegram\n" in status.stdout
    assert "follows   telegram bot 123456: an adapter holds its lease" in status.stdout
    assert re.search(r"^follows   telegram 4821: .*ticket-4821", status.stdout, re.M), status.stdout


@pytest.mark.parametrize("admin", [True, False])
async def test_telegram_group_follow_needs_the_admin_option(trial: Trial, admin: bool) -> None:
    emulator = await trial.emulator("telegram", "--chat", "-1004821", *(["--admin"] if admin else []))
    text = await written(emulator, trial)
    trial.config.write_text(text.replace('listen = "127.0.0.1:8787"', 'listen = "127.0.0.1:0"'))
    if admin:
        await emulator.shows(r"Chat -1004821 is a group: you are its creator")
        await follow_and_see(
            emulator, trial, "/follow ticket-4821", r"Following agent:main:ticket-4821", r"│ .*Fix the login page"
        )
    else:
        await emulator.shows(r"Chat -1004821 is a group: you are an ordinary member.*--admin")
        await trial.serve()
        await emulator.type("/follow ticket-4821")
        await emulator.shows(r"Only the chat's administrators can change what it follows")


async def test_slack_config_serves_the_console_channel(trial: Trial) -> None:
    port = free_port()
    emulator = await trial.emulator("slack", "--app", f"http://127.0.0.1:{port}")
    text = await written(emulator, trial)
    assert f'listen = "127.0.0.1:{port}"' in text and '[[channels.slack.channels]]' in text
    await follow_and_see(
        emulator, trial, "/progresscast follow ticket-4821", r"app → Following agent:main:ticket-4821",
        r"the app posts message [\d.]+:\n    │ .*ticket-4821",
    )


async def test_discord_config_serves_the_console_channel(trial: Trial) -> None:
    port = free_port()
    emulator = await trial.emulator("discord", "--interactions", f"http://127.0.0.1:{port}/discord/interactions")
    await written(emulator, trial)
    register = (await emulator.shows(r"  (progresscast discord register --config \S+ --guild \d+)")).group(1)
    serving: Callable[[], Awaitable[Serve]] = trial.serve
    await serving()
    registered = trial.run(*register.split()[1:])
    assert registered.returncode == 0, registered.stderr
    await emulator.type("follow ticket-4821")
    await emulator.shows(r"ⓘ Following agent:main:ticket-4821")
    put = trial.run("card", "put", "--config", str(trial.config), "--session", "ticket-4821", stdin=PLAN)
    assert put.returncode == 0, put.stderr
    await emulator.shows(r"the bot sends message \d+:\n    │ .*ticket-4821")
