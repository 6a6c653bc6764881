"""Every body bounded, as an attacker tries it: 200 MB streamed at every route of every
server the project runs — `progresscast serve` (the gateway's RPC, A2A push, Telegram
webhook, login, logout, health, Slack's commands and events, Discord's interactions) and
`progresscast mcp --http` — each in its own process, on a real Redis.

Each route answers 413 (or refuses the caller first, without reading) as soon as the
body is known to be over its limit, and closes the connection: the client gets to send
little more than what the sockets hold, and the server's peak memory (`VmHWM`) stays
where it was. A server that buffered the body would grow by 200 MB.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from conftest import free_port
from progresscast.testing import DiscordAPIEmulator, SlackAPIEmulator

pytestmark = [
    pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads a process's peak memory from /proc"),
]

MiB = 1024 * 1024
TOTAL = 200 * MiB
BLOCK = b"x" * (64 * 1024)
SENT_AT_MOST = 32 * MiB
"""What the client may get to send before the refusal reaches it: the sockets' buffers."""
GROWTH_AT_MOST = 40 * MiB
"""How much a server's peak memory may grow over all the attempts."""

TOKEN = "writer-token-0123456789"
SECRET = "hook-s3cret"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
JSON = {"Content-Type": "application/json"}
FORM = {"Content-Type": "application/x-www-form-urlencoded"}



def peak_memory(pid: int) -> int:
    """The process's peak resident memory, in bytes."""
    status = Path(f"/proc/{pid}/status").read_text()
    found = re.search(r"^VmHWM:\s+(\d+) kB", status, re.M)
    assert found, status
    return int(found.group(1)) * 1024


@dataclass
class Attempt:
    status: int | None
    sent: int
    seconds: float


async def stream_oversized(port: int, path: str, headers: dict[str, str], *, chunked: bool) -> Attempt:
    """POST 200 MB to `path`, declared up front (`Content-Length`) or not (chunked),
    reading the answer while sending; stops sending once the answer (or the close)
    arrives."""
    began = time.monotonic()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    lines = [f"POST {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", *(f"{k}: {v}" for k, v in headers.items())]
    lines.append("Transfer-Encoding: chunked" if chunked else f"Content-Length: {TOTAL}")
    writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
    answer = asyncio.ensure_future(reader.readuntil(b"\r\n\r\n"))
    piece = (f"{len(BLOCK):x}\r\n".encode() + BLOCK + b"\r\n") if chunked else BLOCK
    sent = 0
    try:
        while sent < TOTAL and not answer.done():
            writer.write(piece)
            await writer.drain()
            sent += len(BLOCK)
            # drain() returns without yielding while the kernel takes the bytes: yield, so
            # the answer is seen as soon as it arrives, not once the buffers are full.
            await asyncio.sleep(0)
        if chunked and not answer.done():
            writer.write(b"0\r\n\r\n")
    except ConnectionError:
        pass  # the server closed its side: its answer was sent before
    status = None
    try:
        head = await asyncio.wait_for(answer, 30)
        status = int(head.split(b" ", 2)[1])
    except (asyncio.IncompleteReadError, ConnectionError):
        pass
    writer.close()
    return Attempt(status, sent, time.monotonic() - began)


async def wait_listening(proc: asyncio.subprocess.Process, port: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        assert proc.returncode is None, "the server exited"
        assert time.monotonic() < deadline, "the server did not listen within 60 s"
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(0.05)
            continue
        writer.close()
        return


@asynccontextmanager
async def process(tmp_path: Path, port: int, *args: str) -> AsyncIterator[int]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env["PROGRESSCAST_HOME"] = str(tmp_path / f"home-{port}")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", *args, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    try:
        await wait_listening(proc, port)
        yield proc.pid
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


def write_config(
    tmp_path: Path, redis_url: str, port: int, slack: SlackAPIEmulator, discord: DiscordAPIEmulator
) -> Path:
    config = tmp_path / "serve.toml"
    config.write_text(
        f"[store]\nurl = {json.dumps(redis_url)}\n\n"
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n'
        f'[[gateway.tokens]]\ntoken = "{TOKEN}"\nscopes = ["operator.read", "operator.write"]\n\n'
        f'[channels.telegram.webhook]\nurl = "http://127.0.0.1:{port}/telegram/hook-1"\nsecretToken = "{SECRET}"\n\n'
        f"[channels.slack]\ntoken = {json.dumps(slack.token)}\nsigningSecret = {json.dumps(slack.signing_secret)}\n"
        f"apiBaseUrl = {json.dumps(slack.base_url)}\n\n"
        f"[channels.discord]\ntoken = {json.dumps(discord.token)}\napplicationId = {json.dumps(discord.application_id)}\n"
        f"publicKey = {json.dumps(discord.public_key)}\napiBaseUrl = {json.dumps(discord.base_url)}\n"
    )
    return config


async def check_routes(pid: int, port: int, routes: list[tuple[str, dict[str, str], set[int]]]) -> None:
    """Every route, both ways of sending; then the server's peak memory."""
    before = peak_memory(pid)
    for path, headers, statuses in routes:
        for chunked in (False, True):
            attempt = await asyncio.wait_for(stream_oversized(port, path, headers, chunked=chunked), 90)
            where = f"{path} {'chunked' if chunked else 'declared'}: {attempt}"
            assert attempt.status in statuses, where
            assert attempt.sent <= SENT_AT_MOST, where
    grown = peak_memory(pid) - before
    assert grown <= GROWTH_AT_MOST, f"the server's peak memory grew by {grown / MiB:.0f} MiB"


async def test_serve_bounds_every_body_on_every_route(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    async with SlackAPIEmulator() as slack, DiscordAPIEmulator() as discord:
        config = write_config(tmp_path, redis_url, port, slack, discord)
        async with process(tmp_path, port, "serve", "--config", str(config)) as pid:
            base = f"http://127.0.0.1:{port}"
            async with httpx.AsyncClient(base_url=base, timeout=10) as http:
                # Each route once with a normal body first, so what it loads on first use
                # is loaded before the peak is read.
                hello = {"method": "hello"}
                assert (await http.post("/v1/rpc", json=hello, headers=BEARER)).status_code == 200
                assert (await http.post("/v1/a2a/push", json={}, headers=BEARER)).status_code == 400
                hook = await http.post("/telegram/hook-1", json={"update_id": 1},
                                       headers={"X-Telegram-Bot-Api-Secret-Token": SECRET})  # fmt: skip
                assert hook.status_code == 503  # no adapter runs the bot: nothing to hand it to
                assert (await http.post("/slack/commands", content=b"text=help", headers=FORM)).status_code == 401
                assert (await http.post("/slack/events", json={}, headers=JSON)).status_code == 401
                assert (await http.post("/discord/interactions", json={}, headers=JSON)).status_code == 401
                assert (await http.post("/login", content=b"token=x", headers=FORM)).status_code == 401
                assert (await http.post("/logout")).status_code == 303
                assert (await http.get("/healthz")).status_code == 200
            secret = {"X-Telegram-Bot-Api-Secret-Token": SECRET}
            await check_routes(pid, port, [
                ("/v1/rpc", {**BEARER, **JSON}, {413}),
                # Who first: a stranger's body is never read (a length declared over what any
                # route takes is refused before that).
                ("/v1/rpc", JSON, {401, 413}),
                ("/v1/a2a/push", {**BEARER, **JSON}, {413}),
                ("/telegram/hook-1", {**secret, **JSON}, {413}),
                ("/telegram/hook-1", JSON, {403, 413}),
                ("/slack/commands", FORM, {413}),  # the signature covers the body: bounded first
                ("/slack/events", JSON, {413}),
                ("/discord/interactions", JSON, {413}),  # signed too: bounded first
                ("/login", FORM, {413}),
                ("/logout", FORM, {303, 413}),  # takes no body: 413 when declared, else never read
            ])  # fmt: skip


async def test_mcp_over_http_bounds_every_body(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    config = tmp_path / "mcp.toml"
    config.write_text(
        f"[store]\nurl = {json.dumps(redis_url)}\n\n"
        f'[[gateway.tokens]]\ntoken = "{TOKEN}"\nscopes = ["operator.write"]\n'
    )
    args = ("mcp", "--config", str(config), "--session", "s1", "--http", f"127.0.0.1:{port}")
    async with process(tmp_path, port, *args) as pid:
        accept = {"Accept": "application/json, text/event-stream"}
        init = {
            "jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
        }  # fmt: skip
        async with httpx.AsyncClient(timeout=10) as http:
            answer = await http.post(f"http://127.0.0.1:{port}/mcp", json=init, headers={**BEARER, **accept})
            assert answer.status_code == 200, answer.text
        await check_routes(pid, port, [
            ("/mcp", {**BEARER, **JSON, **accept}, {413}),
            ("/mcp", {**JSON, **accept}, {401}),  # no token: the body is never read
        ])  # fmt: skip
