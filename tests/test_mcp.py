"""`progresscast mcp` driven by a real MCP client from the `mcp` SDK.

The server runs as its own process (stdio, or streamable HTTP on a free port) on a
real Redis; cards are read back from the store. Gateway mode writes through a real
`progresscast serve` on a free port.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from redis.asyncio import Redis

from conftest import free_port
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore
from progresscast.store.sharding import layout_of
from test_hook_imports import CONSOLE_SCRIPT

PLAN = [
    {"step": "Reproduce", "status": "completed"},
    {"step": "Fix", "status": "in_progress"},
    {"step": "Ship", "status": "pending"},
]


def server_env(redis_url: str, tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env.update(PROGRESSCAST_REDIS_URL=redis_url, PROGRESSCAST_HOME=str(tmp_path / "home"), **extra)
    return env


@asynccontextmanager
async def stdio_mcp(
    env: dict[str, str], *args: str, cwd: Path | None = None, errlog: Path | None = None
) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "progresscast.cli", "mcp", *args], env=env, cwd=cwd
    )
    with open(errlog or os.devnull, "w") as err:
        async with stdio_client(params, errlog=err) as (read, write):
            async with ClientSession(read, write) as session:
                await session.initialize()
                yield session


def text_of(result: Any) -> str:
    return result.content[0].text


async def raw_card(redis: Redis, owner: Owner) -> tuple[dict[str, str], str | None]:
    """The card's stored hash and revision counter, byte for byte."""
    layout = await layout_of(redis)
    return await redis.hgetall(layout.card(owner)), await redis.get(layout.revision(owner))


# -- listing ---------------------------------------------------------------------


async def test_lists_both_tools_with_their_schemas_and_no_session_fields(redis_url: str, tmp_path: Path) -> None:
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-list") as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
    assert set(tools) == {"progress_card", "update_plan", "ask_person"}
    card = tools["progress_card"].input_schema
    assert set(card["properties"]) == {"plan", "markdown"} and card["additionalProperties"] is False
    item = card["properties"]["plan"]["items"]
    assert set(item["properties"]) == {"step", "status", "note"} and item["required"] == ["step", "status"]
    assert item["properties"]["status"]["enum"] == ["pending", "in_progress", "completed", "blocked", "skipped"]
    plan = tools["update_plan"].input_schema
    assert set(plan["properties"]) == {"steps", "explanation", "plan"}
    assert plan["properties"]["steps"]["items"]["properties"]["state"]["enum"] == [
        "pending", "active", "done", "blocked", "skipped"
    ]
    assert set(tools["ask_person"].input_schema["properties"]) == {
        "prompt", "options", "allowText", "detail", "timeoutSeconds"
    }
    for tool in tools.values():
        schema = json.dumps(tool.input_schema)
        assert "sessionKey" not in schema and "agentId" not in schema and "session" not in schema
        assert tool.output_schema is not None
    for tool in (tools["progress_card"], tools["update_plan"]):
        assert "at least two meaningful sequential steps" in tool.description
        assert "never for greetings" in tool.description
        assert tool.output_schema is not None


async def test_tools_option_offers_only_the_named_tools(redis_url: str, tmp_path: Path) -> None:
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-one", "--tools", "progress_card") as mcp:
        assert [t.name for t in (await mcp.list_tools()).tools] == ["progress_card"]
        result = await mcp.call_tool("update_plan", {"steps": []})
        assert result.is_error and "unknown tool 'update_plan'" in text_of(result)


# -- progress_card ---------------------------------------------------------------------


@pytest.mark.backends
async def test_progress_card_answers_receipts_and_clears(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    owner = Owner("main", "t-card")
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-card") as mcp:
        result = await mcp.call_tool("progress_card", {"plan": PLAN, "markdown": "Found **it**"})
        assert not result.is_error
        assert text_of(result) == "Progress card updated (rev 1, 1/3 done)"
        assert result.structured_content == {"revision": 1, "steps": {"completed": 1, "total": 3}}
        card = await store.get(owner)
        assert card is not None and [s.to_json() for s in card.plan or []] == PLAN and card.markdown == "Found **it**"

        result = await mcp.call_tool("progress_card", {"markdown": "just a note"})
        assert text_of(result) == "Progress card updated (rev 2)" and result.structured_content["steps"] is None

        result = await mcp.call_tool("progress_card", {})
        assert text_of(result) == "Progress card cleared"
        assert result.structured_content["revision"] == 3
        assert await store.get(owner) is None


async def test_a_wrong_shape_is_a_failed_result_and_the_card_is_unchanged(
    redis_url: str, tmp_path: Path, redis: Redis
) -> None:
    owner = Owner("main", "t-bad")
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-bad") as mcp:
        await mcp.call_tool("progress_card", {"plan": PLAN, "markdown": "keep me"})
        before = await raw_card(redis, owner)
        for arguments, field, rule in [
            ({"plan": [{"step": "A", "status": "started"}]}, "plan[0].status", "must be one of"),
            ({"plan": [{"step": "A", "status": "in_progress"}, {"step": "B", "status": "in_progress"}]}, "plan", "at most one step may be in_progress"),
            ({"plan": PLAN, "sessionKey": "someone-else"}, "sessionKey", "is not a known field"),
            ({"plan": [{"step": "x" * 513, "status": "pending"}]}, "plan[0].step", "must be at most 512 UTF-8 bytes"),
            ({"markdown": 5}, "markdown", "must be a string"),
        ]:
            result = await mcp.call_tool("progress_card", arguments)
            assert result.is_error, arguments
            assert text_of(result).startswith(f"{field}: {rule}"), text_of(result)
            assert "Nothing was stored" in text_of(result)
            assert await raw_card(redis, owner) == before


# -- update_plan ---------------------------------------------------------------------


async def test_update_plan_cuts_long_labels_drops_the_21st_step_and_keeps_the_note(
    redis_url: str, tmp_path: Path, store: CardStore, redis: Redis
) -> None:
    owner = Owner("main", "t-plan")
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-plan") as mcp:
        await mcp.call_tool("progress_card", {"plan": PLAN, "markdown": "The note"})
        steps = [{"label": "L" * 150, "state": "done", "note": "n" * 300}] + [
            {"label": f"Step {i}", "state": "active" if i == 2 else "pending"} for i in range(2, 22)
        ]
        result = await mcp.call_tool("update_plan", {"steps": steps})
        assert not result.is_error, text_of(result)
        assert text_of(result) == "Plan updated"
        assert result.structured_content == {"revision": 2, "steps": {"completed": 1, "total": 20}}
        card = await store.get(owner)
        assert card is not None and card.plan is not None and len(card.plan) == 20
        assert card.plan[0].step == "L" * 119 + "…" and card.plan[0].note == "n" * 279 + "…"
        assert card.plan[-1].step == "Step 20"  # the 21st step was dropped
        assert card.plan[1].status == "in_progress" and card.markdown == "The note"

        result = await mcp.call_tool(
            "update_plan",
            {"explanation": "Tests first", "plan": [{"step": "Write tests", "status": "in_progress"}, {"step": "Fix", "status": "pending"}]},
        )
        assert text_of(result) == "Plan updated"
        card = await store.get(owner)
        assert card is not None and [s.step for s in card.plan or []] == ["Write tests", "Fix"]
        assert card.markdown == "The note"
        assert (await store.activity(owner)).headline == "Tests first"

        before = await raw_card(redis, owner)
        for arguments, text in [
            ({"steps": [{"label": "A", "state": "started"}]}, "steps[0].state: must be one of pending, active, done, blocked, skipped"),
            ({"steps": "all of them"}, "steps: must be an array"),
            ({"plan": [{"step": "A", "status": "done"}]}, "plan[0].status: must be one of pending, in_progress, completed"),
            ({"explanation": "no plan"}, "steps: is required"),
            ({"steps": [], "sessionKey": "x"}, "sessionKey: is not a known field"),
        ]:
            result = await mcp.call_tool("update_plan", arguments)
            assert result.is_error and text_of(result).startswith(text), text_of(result)
            assert await raw_card(redis, owner) == before


# -- sessions --------------------------------------------------------------------------


async def test_two_clients_with_different_sessions_never_write_each_others_card(
    redis_url: str, tmp_path: Path, store: CardStore
) -> None:
    env = server_env(redis_url, tmp_path)
    async with stdio_mcp(env, "--session", "alpha") as a, stdio_mcp(env, "--session", "beta", "--agent", "main") as b:
        await asyncio.gather(
            a.call_tool("progress_card", {"plan": [{"step": "Alpha work", "status": "in_progress"}]}),
            b.call_tool("progress_card", {"plan": [{"step": "Beta work", "status": "pending"}], "markdown": "beta"}),
        )
        await a.call_tool("update_plan", {"steps": [{"label": "Alpha again", "state": "active"}]})
        await b.call_tool("progress_card", {})
    alpha = await store.get(Owner("main", "alpha"))
    assert alpha is not None and [s.step for s in alpha.plan or []] == ["Alpha again"] and alpha.markdown is None
    assert await store.get(Owner("main", "beta")) is None
    assert await store.revision(Owner("main", "alpha")) == 2 and await store.revision(Owner("main", "beta")) == 2


async def test_the_session_is_the_start_directory_by_default_and_is_said_once(
    redis_url: str, tmp_path: Path, store: CardStore
) -> None:
    start = tmp_path / "my project"
    start.mkdir()
    errlog = tmp_path / "stderr.txt"
    async with stdio_mcp(server_env(redis_url, tmp_path), cwd=start, errlog=errlog) as mcp:
        await mcp.call_tool("progress_card", {"markdown": "from the directory"})
    card = await store.get(Owner("main", "my-project"))
    assert card is not None and card.markdown == "from the directory"
    said = errlog.read_text()
    assert said.count("session 'my-project'") == 1 and "/follow my-project main" in said


async def test_the_session_may_come_from_the_environment(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    async with stdio_mcp(server_env(redis_url, tmp_path, PROGRESSCAST_SESSION="from-env"), cwd=tmp_path) as mcp:
        await mcp.call_tool("progress_card", {"markdown": "env"})
    assert (await store.get(Owner("main", "from-env"))) is not None


async def test_bad_options_exit_2_with_one_line_before_the_sdk_is_imported(redis_url: str, tmp_path: Path) -> None:
    env = server_env(redis_url, tmp_path)
    cases = [
        (["--session", "a b"], "--session: must not contain spaces"),
        (["--session", "x", "--agent", "nobody"], "--agent: 'nobody' is not a configured agent"),
        (["--session", "x", "--tools", "progress_card,launch"], "--tools: 'launch' is not one of progress_card, update_plan"),
        (["--session", "x", "--http", "nowhere"], "--http: 'nowhere' must be HOST:PORT"),
        (["--session", "x", "--http", "127.0.0.1:99999"], "--http: port 99999 is out of range (0 to 65535)"),
        (["--session", "x", "--gateway", "http://127.0.0.1:9"], "--token: required with --gateway"),
    ]

    async def run(i: int, args: list[str]) -> tuple[int | None, bytes, list[str]]:
        imported = tmp_path / f"imported-{i}.json"
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-c", CONSOLE_SCRIPT, "mcp", *args, env={**env, "IMPORTED_TO": str(imported)},
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        _out, err = await asyncio.wait_for(proc.communicate(), 60)
        return proc.returncode, err, json.loads(imported.read_text())

    done = await asyncio.gather(*(run(i, args) for i, (args, _) in enumerate(cases)))  # side by side
    for (args, message), (status, err, modules) in zip(cases, done, strict=True):
        assert status == 2, (args, err)
        lines = err.decode().strip().splitlines()
        assert len(lines) == 1 and message in lines[0], (args, lines)
        # The SDK takes about a second to import: a mistyped option is answered without it.
        assert not {"mcp", "mcp_types", "progresscast.agents.mcp_server"} & set(modules), args


# -- streamable HTTP ------------------------------------------------------------------------


@asynccontextmanager
async def http_server(env: dict[str, str], *args: str) -> AsyncIterator[str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "mcp", "--http", "127.0.0.1:0", *args,
        env=env, stdin=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stderr is not None
    try:
        url = None
        while url is None:
            line = (await asyncio.wait_for(proc.stderr.readline(), 60)).decode()
            assert line, "the server exited before it said where it listens"
            found = re.search(r"streamable HTTP on (\S+)", line)
            url = found.group(1) if found else None
        yield url
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_streamable_http_lists_and_calls_the_tools(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    token = "over-http-token-0123456789"
    config = tmp_path / "mcp.toml"
    config.write_text(f'[[gateway.tokens]]\ntoken = "{token}"\nscopes = ["operator.write"]\n')
    async with http_server(server_env(redis_url, tmp_path), "--config", str(config), "--session", "over-http") as url:
        async with httpx2.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
            async with streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write) as mcp:
                    await mcp.initialize()
                    tools = {t.name: t for t in (await mcp.list_tools()).tools}
                    assert set(tools) == {"progress_card", "update_plan", "ask_person"}
                    assert set(tools["progress_card"].input_schema["properties"]) == {"plan", "markdown"}
                    result = await mcp.call_tool("progress_card", {"plan": PLAN})
                    assert text_of(result) == "Progress card updated (rev 1, 1/3 done)"
                    bad = await mcp.call_tool("progress_card", {"plan": [{"step": "", "status": "pending"}]})
                    assert bad.is_error and text_of(bad).startswith("plan[0].step: must not be empty")
                    result = await mcp.call_tool("update_plan", {"steps": [{"label": "Only", "state": "done"}]})
                    assert text_of(result) == "Plan updated"
        held = await store.view(Owner("main", "over-http"))
        assert held.run is RunState.active
    card = await store.get(Owner("main", "over-http"))
    assert card is not None and [s.to_json() for s in card.plan or []] == [{"step": "Only", "status": "completed"}]
    # Stopped by SIGTERM (`http_server` ends it so): the run it held ended with it.
    ended = await store.view(Owner("main", "over-http"))
    assert ended.run_id == held.run_id and ended.run is RunState.completed


# -- through a gateway ---------------------------------------------------------------------



@asynccontextmanager
async def running_gateway(redis_url: str, tmp_path: Path) -> AsyncIterator[str]:
    """`progresscast serve` in its own process, on the test's Redis and a free port."""
    port = free_port()
    config = tmp_path / "serve.toml"
    config.write_text(
        f"[store]\nurl = {json.dumps(redis_url)}\n\n"
        '[agents]\ndefault = "main"\nknown = ["main", "research"]\n\n'
        f'[gateway]\nlisten = "127.0.0.1:{port}"\n'
        '[[gateway.tokens]]\ntoken = "writer-token"\nscopes = ["operator.read", "operator.write"]\n'
        '[[gateway.tokens]]\ntoken = "reader-token"\nscopes = ["operator.read"]\n'
        '[[gateway.tokens]]\ntoken = "team-token"\nscopes = ["operator.read", "operator.write"]\nsessions = ["team-*"]\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env["PROGRESSCAST_HOME"] = str(tmp_path / "serve-home")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "serve", "--config", str(config),
        env=env, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while True:  # until it accepts connections
            assert proc.returncode is None, "serve exited"
            assert time.monotonic() < deadline, "serve did not listen within 60 s"
            try:
                _, writer = await asyncio.open_connection("127.0.0.1", port)
            except OSError:
                await asyncio.sleep(0.05)
                continue
            writer.close()
            break
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)


async def test_gateway_mode_writes_through_the_rpc(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    owner = Owner("research", "gw-1")
    async with running_gateway(redis_url, tmp_path) as url:
        env = server_env(redis_url, tmp_path, PROGRESSCAST_TOKEN="writer-token")
        # The store URL points nowhere useful: gateway mode must not need it.
        env["PROGRESSCAST_REDIS_URL"] = "redis://127.0.0.1:1"
        async with stdio_mcp(env, "--gateway", url, "--session", "gw-1", "--agent", "research") as mcp:
            result = await mcp.call_tool("progress_card", {"plan": PLAN, "markdown": "via the gateway"})
            assert text_of(result) == "Progress card updated (rev 1, 1/3 done)"
            assert result.structured_content == {"revision": 1, "steps": {"completed": 1, "total": 3}}
            result = await mcp.call_tool("update_plan", {"explanation": "Nearly", "plan": [{"step": "Ship", "status": "in_progress"}]})
            assert text_of(result) == "Plan updated"
            bad = await mcp.call_tool("progress_card", {"plan": [{"step": "A", "status": "nope"}]})
            assert bad.is_error and text_of(bad).startswith("plan[0].status: must be one of")
            card = await store.get(owner)
            assert card is not None and [s.step for s in card.plan or []] == ["Ship"]
            assert card.markdown == "via the gateway" and card.revision == 2
            assert (await store.activity(owner)).headline == "Nearly"
            # A clear, then a plan: the gateway reads an empty card without its revision.
            await mcp.call_tool("progress_card", {})
            result = await mcp.call_tool("update_plan", {"steps": [{"label": "Again", "state": "active"}]})
            assert text_of(result) == "Plan updated" and result.structured_content["revision"] == 4


async def test_gateway_mode_refuses_a_read_only_token_and_foreign_sessions(
    redis_url: str, tmp_path: Path, store: CardStore
) -> None:
    async with running_gateway(redis_url, tmp_path) as url:
        env = server_env(redis_url, tmp_path)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "mcp", "--gateway", url, "--token", "reader-token",
            "--session", "gw-2", env=env,
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        )
        _, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 2
        assert err.decode().strip() == (
            "progresscast: --token: this token lacks the scope operator.write, so it cannot write cards"
        )

        async with stdio_mcp({**env, "PROGRESSCAST_TOKEN": "team-token"}, "--gateway", url, "--session", "gw-2") as mcp:
            result = await mcp.call_tool("progress_card", {"plan": PLAN})
            assert result.is_error
            assert "may not touch the session agent:main:gw-2" in text_of(result)
    assert await store.get(Owner("main", "gw-2")) is None


async def test_a_stored_plan_whose_explanation_fails_is_still_reported_updated(store: CardStore) -> None:
    from progresscast.agents.mcp_server import AgentTools
    from progresscast.agents.sinks import SinkError, StoreSink

    class NoActivity(StoreSink):
        async def activity(self, *, headline: str | None = None, answer: str | None = None, tool: str | None = None) -> None:
            raise SinkError("the card store is not answering")

    owner = Owner("main", "t-partial")
    result = await AgentTools(NoActivity(store, owner)).call(
        "update_plan", {"explanation": "Why", "plan": [{"step": "A", "status": "pending"}]}
    )
    assert not result.is_error
    assert text_of(result) == "Plan updated; the explanation was not shown: the card store is not answering"
    assert (await store.get(owner)) is not None


async def test_a_run_started_as_the_server_is_stopped_is_ended_with_it(store: CardStore) -> None:
    """A stop (SIGTERM, Ctrl-C) may cancel the write that starts the held run after Redis
    started it and before its reply was read: the run is ended all the same."""
    from progresscast.agents.held_run import HeldRun
    from progresscast.agents.sinks import StoreSink

    owner = Owner("main", "t-stopped-mid-start")
    for turns in range(40):  # the cancel lands a little later each time: after the send, too
        held = HeldRun(StoreSink(store, owner))
        starting = asyncio.ensure_future(held.before_write())
        for _ in range(turns):
            await asyncio.sleep(0)
        starting.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await starting
        await held.release()  # what the server's `finally` does
        view = await store.view(owner)
        assert view.run is not RunState.active, f"cancelled after {turns} turns: {view.run_id} still active"


# -- the run an MCP client holds ----------------------------------------------------------


async def wait_until(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := await check()):
        assert time.monotonic() < deadline, "condition still false"
        await asyncio.sleep(0.05)
    return value


async def test_a_connected_agent_is_never_paused_and_its_run_ends_when_it_goes(
    redis_url: str, tmp_path: Path, store: CardStore
) -> None:
    owner = Owner("main", "t-held")
    # An earlier run of the session ended (a hook's Stop, say), under its headline.
    await store.start_run(owner, "r0")
    await store.update_activity(owner, headline="old run's headline")
    await store.end_run(owner, "r0", RunState.completed)
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-held") as mcp:
        assert not (await mcp.call_tool("progress_card", {"plan": PLAN})).is_error
        view = await store.view(owner)
        assert view.run is RunState.active and view.run_id != "r0" and not view.paused
        assert view.activity.headline is None  # not the old run's
        held = view.run_id
        assert not (await mcp.call_tool("update_plan", {"steps": [{"label": "Fix", "state": "active"}]})).is_error
        assert (await store.view(owner)).run_id == held  # one run while connected
    # The client went: its run ended.
    ended = await wait_until(lambda: _ended(store, owner))
    assert ended.run_id == held and ended.run is RunState.completed


async def test_requests_piped_in_before_stdin_closes_are_all_answered_and_kept(
    redis_url: str, tmp_path: Path, store: CardStore
) -> None:
    """A script that writes its requests and closes stdin (no client waiting on each
    answer): every request is answered and its write kept, then the run ends."""
    owner = Owner("main", "t-piped")
    plan = {"steps": [{"label": "Reproduce", "state": "done"}, {"label": "Fix", "state": "active"}]}
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "script", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "progress_card", "arguments": {
            "plan": PLAN, "markdown": "first"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "update_plan", "arguments": plan}},
    ]
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "mcp", "--session", "t-piped", env=server_env(redis_url, tmp_path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.DEVNULL,
    )
    out, _ = await asyncio.wait_for(proc.communicate("".join(json.dumps(m) + "\n" for m in messages).encode()), 60)
    assert proc.returncode == 0
    answers = {a["id"]: a for a in map(json.loads, out.decode().splitlines())}
    assert sorted(answers) == [1, 2, 3] and all("result" in a for a in answers.values()), answers
    assert not answers[3]["result"]["isError"], answers[3]
    view = await store.view(owner)
    assert view.card is not None and view.card.markdown == "first"
    assert [(s.step, s.status.value) for s in view.card.plan or []] == [("Reproduce", "completed"), ("Fix", "in_progress")]
    assert view.run is RunState.completed  # the client went once it was answered


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
async def test_a_stopped_server_ends_its_run_and_exits_at_once(
    redis_url: str, tmp_path: Path, store: CardStore, sig: signal.Signals, status: int
) -> None:
    """A client quitting may signal its server rather than close its stdin: the run ends
    all the same, and the server does not wait for stdin. (The messages are written by
    hand here: the SDK's client owns its server's process and signals nobody.)"""
    owner = Owner("main", "t-signalled")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "mcp", "--session", owner.session_key,
        env=server_env(redis_url, tmp_path),
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    stdin, stdout, stderr = proc.stdin, proc.stdout, proc.stderr
    assert stdin is not None and stdout is not None and stderr is not None

    async def send(message: dict[str, Any]) -> dict[str, Any] | None:
        stdin.write(json.dumps({"jsonrpc": "2.0", **message}).encode() + b"\n")
        await stdin.drain()
        return json.loads(await asyncio.wait_for(stdout.readline(), 60)) if "id" in message else None

    try:
        await send({"id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}})
        await send({"method": "notifications/initialized"})
        answer = await send({"id": 2, "method": "tools/call", "params": {"name": "progress_card",
                                                                         "arguments": {"plan": PLAN}}})
        assert answer is not None and not answer["result"]["isError"], answer
        held = await store.view(owner)
        assert held.run is RunState.active
        proc.send_signal(sig)  # stdin stays open
        assert await asyncio.wait_for(proc.wait(), 20) == status
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert b"Traceback" not in await stderr.read()
    ended = await store.view(owner)
    assert ended.run_id == held.run_id and ended.run is RunState.completed


async def _ended(store: CardStore, owner: Owner) -> Any:
    view = await store.view(owner)
    return view if view.run is not RunState.active else None


async def test_a_run_already_active_is_the_one_the_agent_writes_in(
    redis_url: str, tmp_path: Path, store: CardStore
) -> None:
    owner = Owner("main", "t-hooked")
    await store.start_run(owner, "hook-run")  # the harness's hooks run the turn
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-hooked") as mcp:
        assert not (await mcp.call_tool("progress_card", {"plan": PLAN})).is_error
        assert (await store.view(owner)).run_id == "hook-run"
        await store.end_run(owner, "hook-run", RunState.completed)  # the turn ends (Stop)
        assert not (await mcp.call_tool("progress_card", {"plan": PLAN[:2]})).is_error
        view = await store.view(owner)
        assert view.run is RunState.active and view.run_id != "hook-run" and not view.paused
    await wait_until(lambda: _ended(store, owner))


# -- ask_person and Stop -------------------------------------------------------------


async def open_ask(store: CardStore, owner: Owner, timeout: float = 20) -> Any:
    deadline = time.monotonic() + timeout
    while not (asks := [a for a in (await store.asks.all(owner))[0] if a.state.value == "open"]):
        assert time.monotonic() < deadline, "no ask was opened"
        await asyncio.sleep(0.02)
    return asks[0]


async def test_ask_person_is_answered_from_the_chat(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    from progresscast.model.asks import Actor

    owner = Owner("main", "t-ask")
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-ask") as mcp:
        asking = asyncio.create_task(mcp.call_tool(
            "ask_person", {"prompt": "Which database?", "options": ["Postgres", "SQLite"], "allowText": True}
        ))
        ask = await open_ask(store, owner)
        assert ask.kind.value == "choice" and ask.options == ("Postgres", "SQLite") and ask.source == "mcp"
        assert ask.allow_text
        await store.asks.answer(owner, ask.ask_id, Actor("telegram", "42", "7", "Ana"), options=["SQLite"])
        result = await asking
        assert not result.is_error and text_of(result) == "Answered from Telegram by Ana: SQLite"
        assert result.structured_content == {"state": "answered", "options": ["SQLite"], "text": None, "by": "Ana"}

        typed = asyncio.create_task(mcp.call_tool("ask_person", {"prompt": "Name the release?"}))
        ask = await open_ask(store, owner)
        assert ask.kind.value == "text"
        await store.asks.answer(owner, ask.ask_id, Actor("slack", "C1", "U2", "Ben"), text="Heron")
        assert text_of(await typed) == "Answered from Slack by Ben: Heron"

        none = await mcp.call_tool("ask_person", {"prompt": "Deploy now?", "options": ["Yes", "No"], "timeoutSeconds": 1})
        assert not none.is_error and none.structured_content == {"state": "none"}
        assert "No answer came within 1 s. Decide yourself, and say in your reply what you decided" in text_of(none)

        bad = await mcp.call_tool("ask_person", {"prompt": "Which?", "options": ["x" * 41]})
        assert bad.is_error and text_of(bad).startswith("options[0]: must be at most 40 characters")
    assert len((await store.asks.all(owner))[0]) == 3


async def test_stop_pressed_on_the_run_is_told_to_the_model(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    from progresscast.model.asks import Actor

    owner = Owner("main", "t-stop")
    async with stdio_mcp(server_env(redis_url, tmp_path), "--session", "t-stop") as mcp:
        first = await mcp.call_tool("progress_card", {"plan": PLAN})
        assert text_of(first) == "Progress card updated (rev 1, 1/3 done)" and "stop" not in first.structured_content
        assert (await store.view(owner)).stoppable  # the run the server holds offers Stop
        assert (await store.asks.stop(owner, Actor("telegram", "42", "7", "Ana")))[0] == "ok"
        after = await mcp.call_tool("update_plan", {"steps": [{"label": "Ship", "state": "active"}]})
        assert text_of(after).startswith("Plan updated. Stopped from Telegram by Ana: the person pressed Stop")
        assert after.structured_content["stop"] == "Stopped from Telegram by Ana"
        asked = await mcp.call_tool("ask_person", {"prompt": "Go on?", "options": ["Yes", "No"]})
        assert asked.structured_content == {"state": "stopped", "by": "Ana"}


async def test_ask_person_through_a_gateway(redis_url: str, tmp_path: Path, store: CardStore) -> None:
    from progresscast.model.asks import Actor

    owner = Owner("main", "gw-ask")
    async with running_gateway(redis_url, tmp_path) as url:
        env = server_env(redis_url, tmp_path, PROGRESSCAST_TOKEN="writer-token")
        async with stdio_mcp(env, "--gateway", url, "--session", "gw-ask") as mcp:
            asking = asyncio.create_task(mcp.call_tool("ask_person", {"prompt": "Ship it?", "options": ["Yes", "No"]}))
            ask = await open_ask(store, owner)
            await store.asks.answer(owner, ask.ask_id, Actor("discord", "9", "5", "Cy"), options=["Yes"])
            assert text_of(await asking) == "Answered from Discord by Cy: Yes"
            none = await mcp.call_tool("ask_person", {"prompt": "Now?", "options": ["Yes"], "timeoutSeconds": 1})
            assert none.structured_content == {"state": "none"}
    states = [a.state.value for a in (await store.asks.all(owner))[0]]
    assert states[0] == "answered" and states[1] in ("expired", "withdrawn")  # nothing left open
