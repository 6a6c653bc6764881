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
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import mcp_types
import pytest
import redis as sync_redis
from mcp import ClientSession
from mcp.shared.message import SessionMessage
from redis.asyncio import Redis

import a2a_updates as a2a
from conftest import all_keys
from progresscast.agents.a2a.mapping import EXTENSION_URI
from progresscast.config.agents import AgentSettings
from progresscast.config.gateway import GatewaySettings, GatewayToken
from progresscast.config.settings import Settings
from progresscast.gateway import create_app
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.embedded import ensure_embedded, stop_embedded

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
    assert await all_keys(redis, "pc:*") == []


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
    env["PROGRESSCAST_HOOK_SERVER"] = "off"  # a hook call starts no server outliving the test
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
        stored = sync_redis.Redis.from_url(ensure_embedded(home))  # the store the command would write
        try:
            assert stored.keys("pc:*") == []
        finally:
            stored.close()
    finally:
        stop_embedded(home)


# -- the MCP server's tools ----------------------------------------------------------


@asynccontextmanager
async def escaping_mcp(env: dict[str, str], *args: str) -> AsyncIterator[ClientSession]:
    """A real `mcp` ClientSession on `progresscast mcp` over stdio that sends lone surrogates.

    The SDK's client refuses to encode one, so the tests hand it U+E000 (a private-use
    character) and the wire carries `\\ud800` in its place, as a hostile client sends it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "mcp", *args, env=env,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout
    to_server, from_client = anyio.create_memory_object_stream[SessionMessage](0)
    to_client, from_server = anyio.create_memory_object_stream[SessionMessage | Exception](0)

    async def write() -> None:
        async for sent in from_client:
            data = sent.message.model_dump(by_alias=True, exclude_unset=True, mode="json")
            stdin.write((on_the_wire(json.dumps(data, ensure_ascii=True)) + "\n").encode())
            await stdin.drain()

    async def read() -> None:
        while line := await stdout.readline():
            await to_client.send(SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)))
        to_client.close()

    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(write)
            tg.start_soon(read)
            async with ClientSession(from_server, to_server, read_timeout_seconds=30) as session:
                await session.initialize()
                yield session
            tg.cancel_scope.cancel()
    finally:
        if proc.returncode is None:
            proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


def on_the_wire(text: str) -> str:
    """JSON written with ensure_ascii, each U+E000 sent as a lone surrogate."""
    return text.replace("\\ue000", "\\ud800")


SENT_AS_BAD = "a\ue000b"


def mcp_env(redis_url: str, tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env.update(PROGRESSCAST_REDIS_URL=redis_url, PROGRESSCAST_HOME=str(tmp_path / "home"))
    return env


# BAD is spelled SENT_AS_BAD here: see escaping_mcp.
MCP_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("progress_card", {"plan": [{"step": SENT_AS_BAD, "status": "pending"}]}, "plan[0].step"),
    ("progress_card", {"plan": [STEP, {"step": "Ship", "status": "pending", "note": SENT_AS_BAD}]}, "plan[1].note"),
    ("progress_card", {"plan": [{"step": "Fix", "status": SENT_AS_BAD}]}, "plan[0].status"),
    ("progress_card", {"markdown": SENT_AS_BAD}, "markdown"),
    ("progress_card", {"plan": [{"step": "Fix", "status": "pending", SENT_AS_BAD: "x"}]}, "plan[0].a\\ud800b"),
    ("progress_card", {SENT_AS_BAD: "x"}, "a\\ud800b"),
    ("update_plan", {"steps": [{"label": SENT_AS_BAD, "state": "active"}]}, "steps[0].label"),
    ("update_plan", {"steps": [{"label": "Fix", "state": "active", "note": SENT_AS_BAD}]}, "steps[0].note"),
    ("update_plan", {"steps": [{"label": "Fix", "state": SENT_AS_BAD}]}, "steps[0].state"),
    ("update_plan", {"plan": [{"step": SENT_AS_BAD, "status": "in_progress"}]}, "plan[0].step"),
    ("update_plan", {"plan": [{"step": "Fix", "status": SENT_AS_BAD}]}, "plan[0].status"),
    ("update_plan", {"explanation": SENT_AS_BAD, "plan": [{"step": "Fix", "status": "in_progress"}]}, "explanation"),
    ("update_plan", {"steps": [], SENT_AS_BAD: 1}, "a\\ud800b"),
]


async def test_mcp_tools_refuse_a_lone_surrogate_naming_the_field(redis_url: str, redis: Redis, tmp_path: Path) -> None:
    # One server for the whole table: a bad call must not take it down.
    async with escaping_mcp(mcp_env(redis_url, tmp_path), "--session", "t-mcp") as mcp:
        for tool, arguments, field in MCP_CASES:
            result = await mcp.call_tool(tool, arguments)
            text = result.content[0].text
            assert result.is_error, (tool, field, text)
            assert text.startswith(f"{field}: {RULE}. Nothing was stored"), (tool, field, text)
            assert await all_keys(redis, "pc:*") == [], (tool, field)
        result = await mcp.call_tool("progress_card", {"plan": [STEP]})
        assert not result.is_error and result.content[0].text == "Progress card updated (rev 1, 0/1 done)"


async def test_mcp_over_http_refuses_a_lone_surrogate_naming_the_field(
    redis_url: str, redis: Redis, tmp_path: Path
) -> None:
    from test_mcp import http_server

    token = "edge-input-token-0123456789"
    headers = {
        "Accept": "application/json, text/event-stream", "Content-Type": "application/json",
        "Authorization": f"Bearer {token}",
    }  # fmt: skip
    config = tmp_path / "mcp.toml"
    config.write_text(f'[[gateway.tokens]]\ntoken = "{token}"\nscopes = ["operator.write"]\n')

    def answer(response: httpx.Response) -> dict[str, Any]:
        assert response.status_code == 200, response.text
        if response.headers["content-type"].startswith("application/json"):
            return response.json()
        data = [line[5:] for line in response.text.splitlines() if line.startswith("data:")]
        return json.loads(data[-1])

    async with http_server(mcp_env(redis_url, tmp_path), "--config", str(config), "--session", "t-mcp-http") as url:
        async with httpx.AsyncClient(timeout=30) as http:
            hello = await http.post(url, headers=headers, content=json.dumps({
                "jsonrpc": "2.0", "id": 1, "method": "initialize",
                "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
            }))
            answer(hello)
            if "mcp-session-id" in hello.headers:
                headers["mcp-session-id"] = hello.headers["mcp-session-id"]
            headers["mcp-protocol-version"] = "2025-06-18"
            await http.post(url, headers=headers, content=json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            for number, (tool, arguments, field) in enumerate(MCP_CASES[:2] + MCP_CASES[6:7], start=2):
                call = {"jsonrpc": "2.0", "id": number, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
                body = on_the_wire(json.dumps(call, ensure_ascii=True))
                result = answer(await http.post(url, headers=headers, content=body))
                assert result["result"]["isError"] is True, result
                assert result["result"]["content"][0]["text"].startswith(f"{field}: {RULE}"), result
    assert await all_keys(redis, "pc:*") == []


# -- A2A: `a2a ingest` and the push route ------------------------------------------------

PLAN_FIELD = f"statusUpdate.metadata[{EXTENSION_URI}].steps"

# (update, the field named). Every text an update carries; each refuses the whole update.
A2A_CASES: list[tuple[dict[str, Any], str]] = [
    (a2a.status("t1", at=a2a.ts(1), text=BAD), "statusUpdate.status.message.parts[0].text"),
    (a2a.snapshot("t1", at=a2a.ts(1), text=BAD), "task.status.message.parts[0].text"),
    (a2a.status(BAD, at=a2a.ts(1)), "statusUpdate.taskId"),
    (a2a.status("t1", at=a2a.ts(1), context=BAD), "statusUpdate.contextId"),
    (a2a.snapshot(BAD, at=a2a.ts(1)), "task.id"),
    (a2a.artifact("t1", BAD), "artifactUpdate.artifact.parts[0].text"),
    (a2a.artifact("t1", "text", artifact_id=BAD), "artifactUpdate.artifact.artifactId"),
    (a2a.artifact(BAD, "text"), "artifactUpdate.taskId"),
]

# (update, the plan field named): the plan is not applied; the rest of the update is.
A2A_PLAN_CASES: list[tuple[dict[str, Any], str]] = [
    (a2a.status("t1", at=a2a.ts(1), text="Working", plan=[{"label": BAD, "state": "active"}]), f"{PLAN_FIELD}[0].label"),
    (a2a.status("t1", at=a2a.ts(1), text="Working", plan=[{"label": "Fix", "state": "active", "note": BAD}]),
     f"{PLAN_FIELD}[0].note"),
    (a2a.status("t1", at=a2a.ts(1), text="Working", plan=[{"label": "Fix", "state": BAD}]), f"{PLAN_FIELD}[0].state"),
]


async def push(client: httpx.AsyncClient, update: dict[str, Any]) -> httpx.Response:
    return await client.post("/v1/a2a/push", content=json.dumps(update, ensure_ascii=True))


@pytest.mark.parametrize(("update", "field"), A2A_CASES, ids=[f for _, f in A2A_CASES])
async def test_a2a_push_refuses_a_lone_surrogate_naming_the_field(
    client: httpx.AsyncClient, redis: Redis, update: dict[str, Any], field: str
) -> None:
    response = await push(client, update)
    assert response.status_code == 400, response.text
    error = response.json()["error"]
    assert error["field"] == field and error["rule"] == RULE, error
    assert await all_keys(redis, "pc:*") == []


@pytest.mark.parametrize(("update", "field"), A2A_PLAN_CASES, ids=[f for _, f in A2A_PLAN_CASES])
async def test_a2a_push_of_a_bad_plan_applies_the_rest_and_names_the_field(
    client: httpx.AsyncClient, store: CardStore, update: dict[str, Any], field: str
) -> None:
    response = await push(client, update)
    assert response.status_code == 200, response.text
    result = response.json()["result"]
    assert result["outcome"] == "applied"
    rule = "must be one of" if field.endswith(".state") else RULE
    assert result["planNotApplied"].startswith(f"{field}: {rule}"), result
    view = await store.view(Owner("main", "ctx-1"))
    assert view.card is None and view.activity.headline == "Working"


def test_a2a_ingest_names_each_bad_line_and_applies_the_rest(tmp_path: Path) -> None:
    home = tmp_path / "home"
    good = a2a.status("t1", at=a2a.ts(9), plan=a2a.steps(2, 1), context="ctx-good")
    cases = A2A_CASES + A2A_PLAN_CASES
    lines = [escaped(update) for update, _ in cases] + [escaped(good)]
    source = tmp_path / "updates.jsonl"
    source.write_text("\n".join(lines) + "\n")
    try:
        for args, stdin in ((["a2a", "ingest", "-"], source.read_text()), (["a2a", "ingest", str(source)], "")):
            result = run_cli(home, *args, stdin=stdin)
            err, out = result.stderr.decode(), result.stdout.decode()
            assert result.returncode == 0, err
            assert "Traceback" not in err
            expected = [f"progresscast: line {n}: {field}: {RULE}" for n, (_, field) in enumerate(A2A_CASES, start=1)]
            for n, (_, field) in enumerate(A2A_PLAN_CASES, start=len(A2A_CASES) + 1):
                rule = "must be one of" if field.endswith(".state") else RULE
                expected.append(f"progresscast: line {n}: plan not applied: {field}: {rule}")
            got = err.splitlines()
            assert len(got) == len(expected) and all(g.startswith(e) for g, e in zip(got, expected, strict=True)), got
            assert f"malformed {len(A2A_CASES)}" in out, out
        shown = run_cli(home, "card", "get", "--session", "ctx-good")
        assert json.loads(shown.stdout)["plan"][1]["status"] == "in_progress"
        assert run_cli(home, "card", "get", "--session", "ctx-1").stdout.decode().strip() == "null"
    finally:
        stop_embedded(home)


def test_a2a_ingest_of_bytes_that_are_not_utf8_is_exit_2_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    source = tmp_path / "updates.jsonl"
    source.write_bytes(json.dumps(a2a.status("t1", at=a2a.ts(1), text="x")).encode().replace(b'"x"', b'"\xed\xa0\x80"'))
    try:
        result = run_cli(home, "a2a", "ingest", str(source))
        assert result.returncode == 2
        assert result.stderr.decode().splitlines() == [f"progresscast: {source}: not UTF-8 text"]
    finally:
        stop_embedded(home)


# -- the agent hooks -------------------------------------------------------------------

CC = {"session_id": "s-hook", "transcript_path": "/t", "cwd": "/w"}


def todo_write(*todos: dict[str, Any]) -> dict[str, Any]:
    return {**CC, "hook_event_name": "PostToolUse", "tool_name": "TodoWrite", "tool_input": {"todos": list(todos)}}


TODO = {"content": "Fix", "status": "in_progress", "activeForm": "Fixing"}

# (harness, the event, the field named). Each must exit 0, say the field and the rule in
# one line on stderr, and record nothing of the event.
HOOK_CASES: list[tuple[str, dict[str, Any], str]] = [
    ("claude-code", {**CC, "session_id": BAD, "hook_event_name": "UserPromptSubmit"}, "session_id"),
    ("claude-code", {**CC, "hook_event_name": "UserPromptSubmit", "prompt_id": BAD}, "prompt_id"),
    ("claude-code", todo_write({**TODO, "content": BAD}), "tool_input.todos[0].content"),
    ("claude-code", todo_write({**TODO, "activeForm": BAD}), "tool_input.todos[0].activeForm"),
    ("claude-code", todo_write({**TODO, "status": BAD}), "tool_input.todos[0].status"),
    ("claude-code", {**CC, "hook_event_name": "PostToolUse", "tool_name": "TaskCreate",
                     "tool_input": {"subject": BAD, "description": "d"}, "tool_response": {"task": {"id": "1"}}},
     "tool_input.subject"),
    ("claude-code", {**CC, "hook_event_name": "PostToolUse", "tool_name": "TaskUpdate",
                     "tool_input": {"taskId": "1", "activeForm": BAD}, "tool_response": {"success": True}},
     "tool_input.activeForm"),
    ("gemini", {**CC, "session_id": BAD, "hook_event_name": "BeforeAgent"}, "session_id"),
    ("gemini", {**CC, "hook_event_name": "AfterAgent", "prompt": "p", "prompt_response": BAD}, "prompt_response"),
    ("gemini", {**CC, "hook_event_name": "AfterTool", "tool_name": "write_todos",
                "tool_input": {"todos": [{"description": BAD, "status": "pending"}]}}, "tool_input.todos[0].description"),
]


def stored(home: Path) -> set[str]:
    """The keys in the embedded Redis of `home` (started if it is not running)."""
    client = sync_redis.Redis.from_url(ensure_embedded(home), decode_responses=True)
    try:
        return set(client.keys("*"))
    finally:
        client.close()


@pytest.mark.parametrize(("harness", "event", "field"), HOOK_CASES, ids=[f"{h}-{f}" for h, _, f in HOOK_CASES])
def test_hooks_report_a_lone_surrogate_naming_the_field_and_exit_0(
    tmp_path: Path, harness: str, event: dict[str, Any], field: str
) -> None:
    home = tmp_path / "home"
    try:
        result = run_cli(home, "hook", harness, stdin=escaped(event))
        err = result.stderr.decode()
        assert result.returncode == 0, err
        [line] = err.splitlines()
        assert line.startswith(f"progresscast hook {harness}: {field}: {RULE}"), err
        assert line.endswith("; nothing was recorded"), err
        assert result.stdout.decode() == ("{}\n" if harness == "gemini" else "")
        assert stored(home) <= {keys.SHARDS}  # no card, run, activity or task list
    finally:
        stop_embedded(home)


def codex_stream(*items: dict[str, Any]) -> str:
    events = [{"type": "thread.started", "thread_id": "s-codex"}, {"type": "turn.started"}]
    events += [{"type": "item.completed", "item": {"id": str(i), **item}} for i, item in enumerate(items)]
    events.append({"type": "turn.completed", "usage": {}})
    return "\n".join(escaped(e) for e in events) + "\n"


def test_the_codex_hook_reports_each_bad_event_and_shows_the_rest(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stream = codex_stream(
        {"type": "todo_list", "items": [{"text": BAD, "completed": False}]},
        {"type": "agent_message", "text": BAD},
        {"type": "command_execution", "command": BAD, "aggregated_output": "", "status": "completed"},
        {"type": "todo_list", "items": [{"text": "Fix", "completed": False}]},
        {"type": "agent_message", "text": "Done."},
    )
    try:
        result = run_cli(home, "hook", "codex", stdin=stream)
        err = result.stderr.decode()
        assert result.returncode == 0 and "Traceback" not in err, err
        assert err.splitlines() == [
            f"progresscast hook codex: item.completed: {field}: {RULE}; ignored"
            for field in ("item.items[0].text", "item.text", "item.command")
        ], err
        card = json.loads(run_cli(home, "card", "get", "--session", "s-codex").stdout)
        assert [s["step"] for s in card["plan"]] == ["Fix"]
    finally:
        stop_embedded(home)
