"""`progresscast serve` as an operator runs it: a separate process, its start-up
mistakes (one line, exit 2), SIGTERM, and the embedded Redis it owns."""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import signal
import socket
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from progresscast.store.embedded import stop_embedded
from progresscast.testing import BotAPIEmulator

TOKEN = "t0ken-for-tests"


class Serve:
    """One `serve` process; `lines` collects its log."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.lines: list[str] = []
        self.base = ""

    async def line_matching(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        async def read() -> re.Match[str]:
            for line in self.lines:
                if found := re.search(pattern, line):
                    return found
            assert self.proc.stderr is not None
            while raw := await self.proc.stderr.readline():
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                if found := re.search(pattern, self.lines[-1]):
                    return found
            raise AssertionError(f"serve ended without {pattern!r}:\n" + "\n".join(self.lines))

        return await asyncio.wait_for(read(), timeout)

    async def finished(self, timeout: float = 30) -> int:
        assert self.proc.stderr is not None
        rest = await asyncio.wait_for(self.proc.stderr.read(), timeout)
        self.lines += rest.decode(errors="replace").splitlines()
        return await asyncio.wait_for(self.proc.wait(), timeout)


def environment(home: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PROGRESSCAST_", "TELEGRAM_"))}
    env["PROGRESSCAST_HOME"] = str(home)
    env.update(extra)
    return env


def config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "progresscast.toml"
    path.write_text(text)
    return path


GATEWAY = """
[gateway]
listen = "{listen}"
[[gateway.tokens]]
token = "env:PROGRESSCAST_TOKEN"
scopes = ["operator.read", "operator.write"]
"""


@pytest.fixture
async def start(tmp_path: Path) -> AsyncIterator:
    procs: list[Serve] = []
    home = tmp_path / "home"

    async def start(text: str, **env: str) -> Serve:
        path = config(tmp_path, text)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=environment(home, **env),
        )
        procs.append(Serve(proc))
        return procs[-1]

    start.home = home  # type: ignore[attr-defined]
    yield start
    for serve in procs:
        if serve.proc.returncode is None:
            serve.proc.kill()
            await serve.proc.wait()
    stop_embedded(home)


async def running(start, text: str = GATEWAY.format(listen="127.0.0.1:0"), **env: str) -> Serve:
    serve = await start(text, PROGRESSCAST_TOKEN=TOKEN, **env)
    serve.base = (await serve.line_matching(r"gateway and web page on (http://\S+)")).group(1)
    return serve


async def put(base: str, markdown: str) -> httpx.Response:
    body = {"method": "progressCard.put", "params": {"sessionKey": "t-1", "markdown": markdown}}
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.post(f"{base}/v1/rpc", json=body, headers={"Authorization": f"Bearer {TOKEN}"})


def one_line(serve: Serve) -> str:
    mistakes = [line for line in serve.lines if line.startswith("progresscast:")]
    assert len(mistakes) == 1 and not any("Traceback" in line for line in serve.lines), "\n".join(serve.lines)
    return mistakes[0]


async def test_a_port_in_use_is_one_line_naming_the_setting(start) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        serve = await start(GATEWAY.format(listen=f"127.0.0.1:{port}"), PROGRESSCAST_TOKEN=TOKEN)
        assert await serve.finished() == 2
    line = one_line(serve)
    assert line.startswith(f"progresscast: gateway.listen: cannot listen on 127.0.0.1:{port} (Address already in use)")


@pytest.mark.parametrize(
    ("extra", "setting", "variable"),
    [
        ("", "gateway.tokens[0].token", "PROGRESSCAST_TOKEN"),
        ('[channels.telegram]\ntoken = "env:TELEGRAM_BOT_TOKEN"\n', "channels.telegram.token", "TELEGRAM_BOT_TOKEN"),
    ],
)
async def test_an_unset_env_secret_is_one_line_naming_the_variable(start, extra: str, setting: str, variable: str) -> None:
    env = {"PROGRESSCAST_TOKEN": TOKEN} if variable != "PROGRESSCAST_TOKEN" else {}
    serve = await start(GATEWAY.format(listen="127.0.0.1:0") + extra, **env)
    assert await serve.finished() == 2
    line = one_line(serve)
    assert f"{setting}: the environment variable {variable} is not set" in line, line


async def test_a_refused_bot_token_is_one_line(start) -> None:
    async with BotAPIEmulator() as api:
        text = GATEWAY.format(listen="127.0.0.1:0") + (
            f'[channels.telegram]\ntoken = "env:TELEGRAM_BOT_TOKEN"\napiBaseUrl = "{api.base_url}"\n'
        )
        serve = await start(text, PROGRESSCAST_TOKEN=TOKEN, TELEGRAM_BOT_TOKEN="123:wrong")
        assert await serve.finished() == 2
    line = one_line(serve)
    assert line.startswith("progresscast: channels.telegram.token: the Bot API refused the bot token"), line
    assert "TELEGRAM_BOT_TOKEN" in line


async def test_sigterm_shuts_down_gracefully_and_says_so(start) -> None:
    serve = await running(start)
    assert (await put(serve.base, "before")).status_code == 200
    serve.proc.send_signal(signal.SIGTERM)
    assert await serve.finished() == 0, "\n".join(serve.lines)
    log = "\n".join(serve.lines)
    # Once: the gateway's HTTP server leaves the signal to `serve` (uvicorn's own capture
    # would raise it again as it stops, a second shutdown in the middle of the first).
    assert log.count("SIGTERM: shutting down") == 1 and log.rstrip().endswith("stopped"), log
    assert "Traceback" not in log


async def test_a_killed_embedded_redis_is_restarted_and_a_put_succeeds_within_5_s(start) -> None:
    serve = await running(start)
    # Only the write puts this in the file ("before" is in the write script's source,
    # whose SCRIPT LOAD reaches the file first).
    marker = f"before-{secrets.token_hex(8)}"
    assert (await put(serve.base, marker)).status_code == 200
    # The contract allows losing the last second: kill once the write is in the file.
    while not any(marker.encode() in f.read_bytes() for f in start.home.rglob("*.aof")):
        await asyncio.sleep(0.05)
    pid = int((start.home / "redis.pid").read_text())
    os.kill(pid, signal.SIGKILL)
    killed = time.monotonic()
    answer = None
    while time.monotonic() - killed < 5:
        try:
            answer = await put(serve.base, "after")
        except httpx.HTTPError:
            answer = None
        if answer is not None and answer.status_code == 200:
            break
    assert answer is not None and answer.status_code == 200, answer and answer.text
    await serve.line_matching(r"embedded Redis under .* has stopped \(its process is gone\); restarting it", timeout=5)
    assert int((start.home / "redis.pid").read_text()) != pid
    # What was written before the kill came back from the append-only file.
    async with httpx.AsyncClient(timeout=5) as client:
        got = await client.post(
            f"{serve.base}/v1/rpc",
            content=json.dumps({"method": "progressCard.get", "params": {"sessionKey": "t-1"}}),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )
    assert got.json()["result"]["revision"] == 2, (answer.json(), got.json(), serve.lines, (start.home / "redis.log").read_text()[-3000:])


async def test_webhook_updates_posted_to_a_gateway_without_the_token_reach_the_adapter_process(
    start, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two `serve` processes on one store: the one with the bot token runs the adapter,
    the other (no token) is where the load balancer sends the webhook."""
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.05")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    hook = f"http://127.0.0.1:{port}/telegram/hook-7"
    webhook = f'[channels.telegram.webhook]\nurl = "{hook}"\nsecretToken = "env:TELEGRAM_WEBHOOK_SECRET"\n'
    env = {"TELEGRAM_WEBHOOK_SECRET": "s3cret_1", "PROGRESSCAST_TIME_SCALE": "0.05"}
    async with BotAPIEmulator() as api:
        gateway = await running(
            start, GATEWAY.format(listen=f"127.0.0.1:{port}") + f'[channels.telegram]\napiBaseUrl = "{api.base_url}"\n'
            + webhook, **env,
        )
        await gateway.line_matching(r"the Telegram adapter is off; webhook updates posted to /telegram/hook-7 here")
        adapter = await running(
            start, GATEWAY.format(listen="127.0.0.1:0")
            + f'[channels.telegram]\ntoken = "env:TELEGRAM_BOT_TOKEN"\napiBaseUrl = "{api.base_url}"\naccess = "open"\n'
            + webhook,
            TELEGRAM_BOT_TOKEN=api.token, **env,
        )
        await adapter.line_matching(r"updates by webhook at /telegram/hook-7")
        assert api.webhook is not None and (api.webhook.url, api.webhook.secret_token) == (hook, "s3cret_1")
        sent = api.send_user_message(4242, "/follow t-1")["message"]["message_id"]

        def bot_messages() -> list[str]:
            return [m.text for m in api.chat(4242).visible() if m.message_id > sent]

        await api.wait_for(bot_messages, 15)
        assert bot_messages()[0].startswith("Following agent:main:t-1"), bot_messages()
        assert (await put(gateway.base, "Deploying the fix")).status_code == 200
        await api.wait_for(lambda: any("Deploying the fix" in t for t in bot_messages()), 15)
        assert [d.status for d in api.webhook_deliveries] == [200]
        assert not [c for c in api.calls if c.method == "getUpdates"]
