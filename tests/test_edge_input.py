"""Lone surrogates in every text field of every input, checked where the input comes in.

`"\\ud800"` in JSON (or an undecodable byte in argv) decodes to a lone surrogate that no
encoder accepts: Redis, a log line, an error message that repeats it. Each case here
must be refused with a 4xx (or exit status 2) naming the field, and nothing stored.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.config import AgentSettings, GatewaySettings, GatewayToken, Settings
from progresscast.embedded import stop_embedded
from progresscast.gateway import create_app

BAD = "a\ud800b"
RULE = "must be valid Unicode text (no lone surrogates)"
OWNER = {"sessionKey": "ticket-1"}
STEP = {"step": "Fix", "status": "in_progress"}


@pytest.fixture
async def client(redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        agents=AgentSettings(default="main", known=["main", "research"]),
        gateway=GatewaySettings(tokens=[GatewayToken(token="writer", scopes=["operator.read", "operator.write"])]),
    )
    app = create_app(settings, redis)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://gw", headers={"Authorization": "Bearer writer"}) as c:
        yield c


def put(**params: Any) -> dict[str, Any]:
    return {"method": "progressCard.put", "params": {**OWNER, **params}}


# (body, the field the error names). Every text field of every RPC method, the envelope included.
RPC_CASES: list[tuple[dict[str, Any], str]] = [
    ({"method": BAD}, "method"),
    ({"method": "hello", "id": BAD}, "id"),
    ({"method": "hello", BAD: 1}, "a\\ud800b"),
    ({"method": "progressCard.get", "params": {"sessionKey": BAD}}, "sessionKey"),
    ({"method": "progressCard.get", "params": {**OWNER, "agentId": BAD}}, "agentId"),
    ({"method": "progressCard.get", "params": {**OWNER, BAD: "x"}}, "a\\ud800b"),
    (put(plan=[{"step": BAD, "status": "pending"}]), "plan[0].step"),
    (put(plan=[{"step": "Fix", "status": BAD}]), "plan[0].status"),
    (put(plan=[STEP, {"step": "Ship", "status": "pending", "note": BAD}]), "plan[1].note"),
    (put(plan=[{"step": "Fix", "status": "pending", BAD: "x"}]), "plan[0].a\\ud800b"),
    (put(markdown=BAD), "markdown"),
    (put(expectedRevision=BAD), "expectedRevision"),
    ({"method": "progressCard.reset", "params": {"sessionKey": BAD}}, "sessionKey"),
    ({"method": "progressCard.clear", "params": {**OWNER, "agentId": BAD}}, "agentId"),
    ({"method": "run.start", "params": {**OWNER, "runId": BAD}}, "runId"),
    ({"method": "run.end", "params": {**OWNER, "runId": "r1", "state": BAD}}, "state"),
    ({"method": "run.end", "params": {**OWNER, "runId": BAD, "state": "completed"}}, "runId"),
    ({"method": "activity.put", "params": {**OWNER, "headline": BAD}}, "headline"),
    ({"method": "activity.put", "params": {**OWNER, "tool": BAD}}, "tool"),
    ({"method": "activity.put", "params": {**OWNER, "answer": BAD}}, "answer"),
    ({"method": "hello", "params": {"x": [BAD]}}, "x[0]"),
]


@pytest.mark.parametrize(("body", "field"), RPC_CASES, ids=[f for _, f in RPC_CASES])
async def test_rpc_refuses_a_lone_surrogate_naming_the_field(
    client: httpx.AsyncClient, redis: Redis, body: dict[str, Any], field: str
) -> None:
    # ensure_ascii: the body carries the escape `\ud800`, as a hostile client would send it.
    response = await client.post("/v1/rpc", content=json.dumps(body, ensure_ascii=True))
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == field and error["rule"] == RULE, error
    assert error["message"] == f"{field}: {RULE}"
    assert "id" not in response.json()
    assert await redis.keys("pc:*") == []


@pytest.mark.parametrize(
    "path",
    [
        "/sessions/%ED%A0%80",  # the UTF-8 encoding of U+D800, which is not UTF-8
        "/sessions/agent:main:a%ED%A0%80b",
        "/sessions/ticket-1?agentId=%ED%A0%80",
        "/v1/card?sessionKey=%ED%A0%80",
        "/v1/events?sessionKey=%ED%A0%80",
        "/v1/events?sessionKey=ticket-1&agentId=%ED%A0%80",
    ],
)
async def test_page_paths_with_surrogate_bytes_are_a_clear_4xx(client: httpx.AsyncClient, path: str) -> None:
    client.cookies.set("progresscast_token", "writer")
    # An event stream that was (wrongly) accepted would never end by itself.
    response = await asyncio.wait_for(client.get(path), 10)
    assert 400 <= response.status_code < 500, response.status_code


# -- the command line ----------------------------------------------------------


def run_cli(home: Path, *args: str | bytes, stdin: str = "") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env["PROGRESSCAST_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "progresscast.cli", *args],
        input=stdin.encode(),
        capture_output=True,
        env=env,
        timeout=60,
    )


def escaped(data: Any) -> str:
    return json.dumps(data, ensure_ascii=True)


CLI_CASES: list[tuple[list[str | bytes], str, str]] = [
    (["card", "put", "--session", "t-1"], escaped({"plan": [{"step": BAD, "status": "pending"}]}), "plan[0].step"),
    (["card", "put", "--session", "t-1"], escaped({"plan": [{"step": "x", "status": "pending", "note": BAD}]}), "plan[0].note"),
    (["card", "put", "--session", "t-1"], escaped({"markdown": BAD}), "markdown"),
    (["card", "put", "--session", "t-1"], escaped({BAD: 1}), "a\\ud800b"),
    (["card", "put", "--session", b"t-\xff"], "{}", "--session"),
    (["card", "get", "--session", "t-1", "--agent", b"m\xffain"], "", "--agent"),
    (["render", "-", "--channel", "text"], escaped({"plan": [{"step": "x", "status": BAD}]}), "plan[0].status"),
]


@pytest.mark.parametrize(("args", "stdin", "field"), CLI_CASES, ids=[f for *_, f in CLI_CASES])
def test_cli_refuses_a_lone_surrogate_naming_the_field(
    tmp_path: Path, args: list[str | bytes], stdin: str, field: str
) -> None:
    home = tmp_path / "home"
    try:
        result = run_cli(home, *args, stdin=stdin)
        err = result.stderr.decode()
        assert result.returncode == 2, err
        assert err.splitlines() == [f"progresscast: {field}: {RULE}"], err
        got = run_cli(home, "card", "get", "--session", "t-1")
        assert got.stdout.decode().strip() == "null"
    finally:
        stop_embedded(home)
