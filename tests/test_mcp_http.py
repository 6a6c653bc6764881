"""`progresscast mcp --http` as an attacker meets it: its own process on a free port,
a real Redis, a real MCP client (the `mcp` SDK) and raw HTTP.

It takes only a configured gateway token with `operator.write` for its session
(`Authorization: Bearer`), checks `Host`/`Origin` against its listen address and
`mcp.allowedHosts`, and does not start without such a token.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from test_mcp import PLAN, server_env, text_of

# What is checked here happens before any Redis command: the embedded Redis is enough (not `backends`).

WRITER = "writer-token-0123456789"
READER = "reader-token-0123456789"
TEAM = "team-token-0123456789ab"
INIT = {
    "jsonrpc": "2.0", "id": 1, "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}  # fmt: skip
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}


def config(tmp_path: Path, tokens: list[tuple[str, list[str], list[str]]], *, allowed_hosts: tuple[str, ...] = ()) -> Path:
    lines = []
    for token, scopes, sessions in tokens:
        lines += ["[[gateway.tokens]]", f"token = {json.dumps(token)}", f"scopes = {json.dumps(scopes)}",
                  f"sessions = {json.dumps(sessions)}", ""]  # fmt: skip
    if allowed_hosts:
        lines += ["[mcp]", f"allowedHosts = {json.dumps(list(allowed_hosts))}"]
    path = tmp_path / "mcp.toml"
    path.write_text("\n".join(lines))
    return path


STANDARD = [
    (WRITER, ["operator.read", "operator.write"], ["*"]),
    (READER, ["operator.read"], ["*"]),
    (TEAM, ["operator.read", "operator.write"], ["team-*"]),
]


async def refused_start(env: dict[str, str], *args: str) -> str:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "mcp", *args, env=env,
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 2, err
    lines = err.decode().strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@asynccontextmanager
async def http_mcp(env: dict[str, str], *args: str) -> AsyncIterator[tuple[str, list[str]]]:
    """The server's URL, and the lines it wrote to stderr before it listened."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "mcp", *args,
        env=env, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    said: list[str] = []
    try:
        while True:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, f"the server exited before it said where it listens: {said}"
            said.append(line.strip())
            if "streamable HTTP on" in line:
                break
        yield said[-1].split("streamable HTTP on ")[1], said
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


@asynccontextmanager
async def session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(timeout=30, headers=headers) as client:
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write) as mcp:
                yield mcp


def messages(exc: BaseException) -> list[str]:
    if isinstance(exc, BaseExceptionGroup):
        return [m for inner in exc.exceptions for m in messages(inner)]
    return [str(exc)]


async def refused_client(url: str, token: str | None) -> str:
    """What a real MCP client reports when the server refuses it."""
    try:
        async with session(url, token) as mcp:
            await mcp.initialize()
    except Exception as exc:  # the client's task group wraps what it raised
        return " | ".join(messages(exc))
    raise AssertionError("the client was let in")


async def test_without_a_token_that_could_write_its_session_it_does_not_start(redis_url: str, tmp_path: Path) -> None:
    env = server_env(redis_url, tmp_path)
    line = await refused_start(env, "--session", "s1", "--http", "127.0.0.1:0")
    assert line.startswith("progresscast: gateway.tokens:") and "Authorization: Bearer" in line, line
    # Tokens that could not write this session do not count either.
    only_others = config(tmp_path, [(READER, ["operator.read"], ["*"]), (TEAM, ["operator.write"], ["team-*"])])
    line = await refused_start(env, "--config", str(only_others), "--session", "s1", "--http", "127.0.0.1:0")
    assert "gateway.tokens" in line and "agent:main:s1" in line, line


async def test_a_short_token_is_refused_beyond_loopback_and_warned_about_on_it(redis_url: str, tmp_path: Path) -> None:
    env = server_env(redis_url, tmp_path)
    short = config(tmp_path, [("short-token", ["operator.write"], ["*"])])
    line = await refused_start(env, "--config", str(short), "--session", "s1", "--http", "0.0.0.0:0")
    assert line.startswith("progresscast: gateway.tokens[0].token: 11 characters is too short"), line
    async with http_mcp(env, "--config", str(short), "--session", "s1", "--http", "127.0.0.1:0") as (_, said):
        assert any("warning: gateway.tokens[0].token: 11 characters is short" in s for s in said), said


async def test_only_a_write_token_for_its_session_gets_in(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    env = server_env(redis_url, tmp_path)
    args = ("--config", str(config(tmp_path, STANDARD)), "--session", "s1", "--http", "127.0.0.1:0")
    async with http_mcp(env, *args) as (url, _):
        async with httpx2.AsyncClient(timeout=10) as http:
            for token, status in [(None, 401), ("guess", 401), (READER, 403), (TEAM, 403)]:
                headers = {**MCP_HEADERS, **({"Authorization": f"Bearer {token}"} if token else {})}
                answer = await http.post(url, json=INIT, headers=headers)
                assert answer.status_code == status, (token, answer.text)
                assert answer.json()["error"]["message"]  # a JSON-RPC error an MCP client shows
            assert (await http.post(url, json=INIT, headers=MCP_HEADERS)).headers["www-authenticate"].startswith("Bearer")
        # A real client: refused without a token (the message says why), served with one.
        assert "a valid token is required" in await refused_client(url, None)
        assert "may not touch the session agent:main:s1" in await refused_client(url, TEAM)
        async with session(url, WRITER) as mcp:
            await mcp.initialize()
            result = await mcp.call_tool("progress_card", {"plan": PLAN})
            assert text_of(result) == "Progress card updated (rev 1, 1/3 done)"
    card = await store.get(Owner("main", "s1"))
    assert card is not None and len(card.plan or []) == 3


async def test_host_and_origin_are_checked_before_anything_else(redis_url: str, tmp_path: Path) -> None:
    env = server_env(redis_url, tmp_path)
    path = config(tmp_path, STANDARD, allowed_hosts=("mcp.example.org:*",))
    async with http_mcp(env, "--config", str(path), "--session", "s1", "--http", "127.0.0.1:0") as (url, _):
        port = url.rsplit(":", 1)[1].split("/")[0]
        auth = {**MCP_HEADERS, "Authorization": f"Bearer {WRITER}"}

        async def post(**headers: str) -> httpx2.Response:
            async with httpx2.AsyncClient(timeout=10) as http:
                return await http.post(url, json=INIT, headers={**auth, **headers})

        # DNS rebinding: a page on evil.example resolves its name to this machine.
        assert (await post(Host=f"evil.example:{port}")).status_code == 421
        assert (await post(Host=f"evil.example:{port}", Authorization="")).status_code == 421
        assert (await post(Origin=f"http://evil.example:{port}")).status_code == 403
        # The listen address, its loopback names and mcp.allowedHosts are fine.
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "mcp.example.org:443"):
            answer = await post(Host=host)
            assert answer.status_code == 200, (host, answer.text)
        assert (await post(Origin=f"http://localhost:{port}")).status_code == 200
