"""`serve.processes = "split"`: the gateway in the process `serve` started as, the
Telegram adapter in a child of its own — a write still reaches the chat, and the child
never outlives `serve` (SIGTERM, or `serve` killed outright)."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from conftest import alive
from progresscast.testing import BotAPIEmulator
from test_serve import Serve

TOKEN = "t0ken-for-split-tests"
CHAT = 4242


class Split(Serve):
    """One split `serve`, its log, and the pid of its adapters' process."""

    async def line(self, pattern: str, timeout: float = 30, *, nth: int = 1) -> re.Match[str]:
        """The `nth` log line matching `pattern`, waiting for it."""

        async def read() -> re.Match[str]:
            found = [m for seen in self.lines if (m := re.search(pattern, seen))]
            assert self.proc.stderr is not None
            while len(found) < nth:
                raw = await self.proc.stderr.readline()
                if not raw:
                    raise AssertionError(f"serve ended without {pattern!r}:\n" + "\n".join(self.lines))
                self.lines.append(raw.decode(errors="replace").rstrip("\n"))
                if m := re.search(pattern, self.lines[-1]):
                    found.append(m)
            return found[nth - 1]

        return await asyncio.wait_for(read(), timeout)


@pytest.fixture
async def split(tmp_path: Path, redis_url: str) -> AsyncIterator[Callable[..., Any]]:
    started: list[Split] = []
    children: list[int] = []

    async def start(api: BotAPIEmulator, token: str | None = None) -> tuple[Split, str, int]:
        path = tmp_path / "progresscast.toml"
        path.write_text(
            f'[serve]\nprocesses = "split"\n[store]\nurl = "{redis_url}"\n'
            f'[gateway]\nlisten = "127.0.0.1:0"\n'
            f'[[gateway.tokens]]\ntoken = "{TOKEN}"\nscopes = ["operator.read", "operator.write"]\n'
            f'[channels.telegram]\ntoken = "{token or api.token}"\napiBaseUrl = "{api.base_url}"\n'
            f'[[channels.telegram.chats]]\nid = {CHAT}\nfollow = ["t-1"]\n'
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PROGRESSCAST_", "TELEGRAM_"))}
        env["PROGRESSCAST_HOME"] = str(tmp_path / "home")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        serve = Split(proc)
        started.append(serve)
        base = (await serve.line(r"gateway and web page on (http://\S+)")).group(1)
        child = int((await serve.line(r"the adapters' process: started \(pid (\d+)\)")).group(1))
        children.append(child)
        return serve, base, child

    yield start
    for serve in started:
        if serve.proc.returncode is None:
            serve.proc.kill()
            await serve.proc.wait()
    for pid in children:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def put(base: str, markdown: str) -> httpx.Response:
    body = {"method": "progressCard.put", "params": {"sessionKey": "t-1", "markdown": markdown}}
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.post(f"{base}/v1/rpc", json=body, headers={"Authorization": f"Bearer {TOKEN}"})


async def gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    return not alive(pid)


async def test_a_write_reaches_the_chat_through_the_adapters_process_and_sigterm_stops_both(split: Any) -> None:
    async with BotAPIEmulator() as api:
        serve, base, child = await split(api)
        assert child != serve.proc.pid and alive(child)
        assert (await put(base, "Deploying the fix")).status_code == 200
        await api.wait_for(lambda: any("Deploying the fix" in m.text for m in api.chat(CHAT).visible()), 20)
        # The Bot API calls come from the child: the gateway's process makes none.
        serve.proc.send_signal(signal.SIGTERM)
        assert await serve.finished() == 0, "\n".join(serve.lines)
    assert not alive(child), "the adapters' process outlived serve"
    log = "\n".join(serve.lines)
    assert "SIGTERM: shutting down" in log and "Traceback" not in log, log


async def test_the_adapters_process_dies_with_a_killed_serve(split: Any) -> None:
    async with BotAPIEmulator() as api:
        serve, _, child = await split(api)
        await api.wait_for(lambda: any(c.method == "getUpdates" for c in api.calls), 20)  # the child is up
        serve.proc.kill()
        await serve.proc.wait()
        assert await gone(child, 10), "the adapters' process outlived a killed serve"


async def test_an_adapters_process_that_dies_is_started_again(split: Any) -> None:
    async with BotAPIEmulator() as api:
        serve, base, child = await split(api)
        os.kill(child, signal.SIGKILL)
        await serve.line(rf"the adapters' process \(pid {child}\) exited with status -9")
        again = int((await serve.line(r"the adapters' process: started \(pid (\d+)\)", nth=2)).group(1))
        assert again != child and alive(again)
        assert (await put(base, "After the restart")).status_code == 200
        await api.wait_for(lambda: any("After the restart" in m.text for m in api.chat(CHAT).visible()), 30)


async def test_a_refused_bot_token_in_the_adapters_process_stops_serve_with_status_2(split: Any) -> None:
    async with BotAPIEmulator() as api:
        serve, _, _ = await split(api, "123:wrong")
        assert await serve.finished() == 2, "\n".join(serve.lines)
    log = "\n".join(serve.lines)
    assert "progresscast: channels.telegram.token: the Bot API refused the bot token" in log, log
    assert "Traceback" not in log, log
