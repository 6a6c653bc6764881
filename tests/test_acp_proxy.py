"""`progresscast acp` between a real ACP editor and a real ACP agent, both written with the
`agent-client-protocol` SDK (tests/acp_agent.py; the editor here), the proxy a process
on stdio between them: the bytes pass unchanged both ways, the plan reaches the card, a
permission request is answered from chat or from the editor, Stop cancels the turn, and
a store that dies changes nothing the editor sees."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from acp import PROTOCOL_VERSION, text_block
from acp.client.connection import ClientSideConnection
from acp.schema import AllowedOutcome, RequestPermissionResponse

from acp_wire import LIMIT, Recorded
from conftest import PrivateRedis, free_port
from progresscast.model.asks import Actor, AskState
from progresscast.model.card import Status
from progresscast.model.owners import Owner
from progresscast.model.timing import Usage
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore

HERE = Path(__file__).parent
SESSION = "acp-shop"
OWNER = Owner("main", SESSION)
ANA = Actor("telegram", "1", "2", "Ana")


async def until(check: Any, timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("the condition did not come true in time")
        await asyncio.sleep(0.05)


@dataclass
class Editor:
    """The client side: answers permission requests as the test says, records bytes."""

    answer_permission: asyncio.Future[str] = field(default_factory=lambda: asyncio.get_running_loop().create_future())
    permission_answered: asyncio.Event = field(default_factory=asyncio.Event)
    updates: list[Any] = field(default_factory=list)
    pings: list[tuple[str, dict[str, Any]]] = field(default_factory=list)

    async def request_permission(self, session_id: str, tool_call: Any, options: Any, **kw: Any) -> Any:
        option = await self.answer_permission
        self.permission_answered.set()
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=option))

    async def session_update(self, session_id: str, update: Any, **kw: Any) -> None:
        self.updates.append(update)

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        self.pings.append((method, params))

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return {}

    def on_connect(self, conn: Any) -> None:
        pass


@dataclass
class Session:
    proc: asyncio.subprocess.Process
    conn: ClientSideConnection
    editor: Editor
    record: Path
    client_bytes: dict[str, bytearray]

    async def start(self) -> str:
        await self.conn.initialize(protocol_version=PROTOCOL_VERSION)
        made = await self.conn.new_session(cwd=str(HERE))
        return str(made.session_id)

    async def prompt(self, session_id: str, text: str) -> str:
        response = await asyncio.wait_for(self.conn.prompt(session_id=session_id, prompt=[text_block(text)]), 20)
        return str(response.stop_reason)

    async def close(self) -> int:
        """End of input, as an editor closing the agent: the proxy's exit status."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        return await asyncio.wait_for(self.proc.wait(), 20)

    def agent_bytes(self, direction: str) -> bytes:
        return (self.record / f"agent_{direction}.bin").read_bytes()

    def outcomes(self) -> list[dict[str, Any]]:
        path = self.record / "outcomes.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


@pytest.fixture
async def acp(tmp_path: Path) -> AsyncIterator[Any]:
    started: list[Session] = []

    async def start(redis_url: str) -> Session:
        record = tmp_path / f"rec{len(started)}"
        record.mkdir()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast", "--redis", redis_url, "acp", "--session", SESSION,
            "--", sys.executable, str(HERE / "acp_agent.py"), str(record),
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, limit=LIMIT,
            env={**os.environ, "PYTHONPATH": str(HERE.parent / "src")},
        )
        assert proc.stdin is not None and proc.stdout is not None
        stdin = proc.stdin
        client_bytes = {"in": bytearray(), "out": bytearray()}

        async def write(data: bytes) -> None:
            stdin.write(data)
            await stdin.drain()

        editor = Editor()
        transport = Recorded(proc.stdout, write, lambda d, b: client_bytes[d].extend(b))
        conn = ClientSideConnection(editor, transport)  # type: ignore[arg-type]
        session = Session(proc, conn, editor, record, client_bytes)
        started.append(session)
        return session

    yield start
    for session in started:
        if session.proc.returncode is None:
            session.proc.kill()
            await session.proc.wait()


def lines(data: bytes) -> list[bytes]:
    return data.splitlines(keepends=True)


async def test_the_editor_reads_exactly_what_the_agent_wrote_and_the_card_follows(
    acp: Any, redis_url: str, store: CardStore
) -> None:
    s: Session = await acp(redis_url)
    session_id = await s.start()
    assert await s.prompt(session_id, "plan") == "end_turn"
    await until(lambda: _tools_are(store, ("Run pytest -q tests/ ✗",)))  # its update, in its place
    assert await s.prompt(session_id, "nonsense") == "refusal"
    assert await s.close() == 0

    # Byte for byte, both ways (the unknown method and the _meta included).
    assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")
    assert bytes(s.client_bytes["out"]) == s.agent_bytes("in")
    assert b'"method":"_example.com/ping"' in s.agent_bytes("out")
    assert b'"_meta":{"trace":"t-2"}' in s.agent_bytes("out")
    assert s.editor.pings == [("example.com/ping", {"n": 1, "_meta": {"trace": "t-1"}})]

    card = await store.get(OWNER)
    assert card is not None
    assert [(step.step, step.status) for step in card.plan] == [
        ("Read the failing test", Status.completed),
        ("Fix the parser", Status.in_progress),
        ("Run the tests", Status.pending),  # a second in-progress entry waits its turn
        ("Write the changelog " + "x" * 99 + "…", Status.pending),  # cut to 120 characters
    ]
    assert (await store.view(OWNER)).run is RunState.failed  # the second turn was a refusal


async def test_a_turn_ending_well_completes_the_run_with_its_answer_and_usage(
    acp: Any, redis_url: str, store: CardStore
) -> None:
    s: Session = await acp(redis_url)
    session_id = await s.start()
    assert await s.prompt(session_id, "plan") == "end_turn"
    await until(lambda: _run_is(store, RunState.completed))
    assert (await store.activity(OWNER)).answer == "The parser is fixed."
    # The second turn: its own tokens, and what the session's cost grew by (0.05 → 0.10).
    assert await s.prompt(session_id, "plan") == "end_turn"
    assert await s.close() == 0
    view = await store.view(OWNER)
    assert view.run is RunState.completed
    assert view.usage == Usage(input_tokens=1200, output_tokens=300, cost_usd=0.05)


async def test_permission_answered_in_chat_reaches_the_agent_and_the_editors_later_answer_is_dropped(
    acp: Any, redis_url: str, store: CardStore
) -> None:
    s: Session = await acp(redis_url)
    session_id = await s.start()
    turn = asyncio.create_task(s.prompt(session_id, "permission"))
    asks = await until(lambda: _open_asks(store))
    (ask,) = asks
    assert ask.prompt == "Allow rm -rf build?"
    assert ask.options == ("Allow once", "Always allow", "Reject") and ask.source == "acp"
    assert (await store.asks.answer(OWNER, ask.ask_id, ANA, options=["Always allow"])).outcome == "ok"
    assert await turn == "end_turn"
    assert s.outcomes() == [{"outcome": "selected", "optionId": "always"}]

    s.editor.answer_permission.set_result("reject")  # the editor's dialog, answered late
    await s.editor.permission_answered.wait()
    assert await s.close() == 0
    assert s.outcomes() == [{"outcome": "selected", "optionId": "always"}]
    assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")
    # What the agent read: the editor's lines, less its late answer, plus the proxy's.
    editor_lines = lines(bytes(s.client_bytes["out"]))
    agent_lines = lines(s.agent_bytes("in"))
    late = [line for line in editor_lines if b'"optionId":"reject"' in line]
    assert len(late) == 1 and late[0] not in agent_lines
    injected = [line for line in agent_lines if line not in editor_lines]
    assert len(injected) == 1 and json.loads(injected[0])["result"]["outcome"]["optionId"] == "always"
    assert [line for line in agent_lines if line != injected[0]] == [line for line in editor_lines if line != late[0]]


async def test_permission_answered_in_the_editor_first_withdraws_the_chat_ask(
    acp: Any, redis_url: str, store: CardStore
) -> None:
    s: Session = await acp(redis_url)
    session_id = await s.start()
    turn = asyncio.create_task(s.prompt(session_id, "permission"))
    (ask,) = await until(lambda: _open_asks(store))
    s.editor.answer_permission.set_result("allow")
    assert await turn == "end_turn"
    assert s.outcomes() == [{"outcome": "selected", "optionId": "allow"}]

    async def withdrawn() -> bool:
        got, _ = await store.asks.get(OWNER, ask.ask_id)
        return got is not None and got.state is AskState.withdrawn

    await until(withdrawn)
    # A chat press now is told the ask is over, and reaches nobody.
    assert (await store.asks.answer(OWNER, ask.ask_id, ANA, options=["Reject"])).outcome == "closed"
    assert await s.close() == 0
    assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")
    assert bytes(s.client_bytes["out"]) == s.agent_bytes("in")


async def test_stop_in_chat_cancels_the_turn_and_the_run_ends_canceled(
    acp: Any, redis_url: str, store: CardStore
) -> None:
    s: Session = await acp(redis_url)
    session_id = await s.start()
    turn = asyncio.create_task(s.prompt(session_id, "wait"))

    async def waiting() -> bool:
        card = await store.get(OWNER)
        view = await store.view(OWNER)
        return card is not None and bool(card.plan) and view.run is RunState.active and view.stoppable

    await until(waiting)
    assert (await store.asks.stop(OWNER, ANA))[0] == "ok"
    assert await turn == "cancelled"
    await until(lambda: _run_is(store, RunState.canceled))
    assert await s.close() == 0
    agent_lines = [json.loads(line) for line in lines(s.agent_bytes("in"))]
    assert {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": session_id}} in agent_lines
    assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")


async def test_a_store_killed_mid_session_changes_nothing_the_editor_sees(acp: Any, tmp_path: Path) -> None:
    server = PrivateRedis(tmp_path)
    try:
        s: Session = await acp(server.url)
        session_id = await s.start()
        assert await s.prompt(session_id, "plan") == "end_turn"
        server.kill()
        assert await s.prompt(session_id, "plan") == "end_turn"
        turn = asyncio.create_task(s.prompt(session_id, "permission"))
        await asyncio.sleep(0)
        s.editor.answer_permission.set_result("reject")
        assert await turn == "end_turn"
        assert s.outcomes() == [{"outcome": "selected", "optionId": "reject"}]
        assert await s.close() == 0
        assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")
        assert bytes(s.client_bytes["out"]) == s.agent_bytes("in")
    finally:
        server.kill()


async def test_no_store_at_all_still_passes_the_session(acp: Any, tmp_path: Path) -> None:
    s: Session = await acp(f"redis://127.0.0.1:{free_port()}/0")  # nothing listens there
    session_id = await s.start()
    assert await s.prompt(session_id, "plan") == "end_turn"
    assert await s.close() == 0
    assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")
    assert bytes(s.client_bytes["out"]) == s.agent_bytes("in")


@pytest.mark.parametrize("given", ["a file", "/dev/null"])
async def test_the_editor_side_may_be_a_file_or_dev_null(given: str, tmp_path: Path) -> None:
    """An editor's input from a regular file or /dev/null, which the event loop cannot
    watch: passed through in full, then the end of input, with no traceback."""
    notice = b'{"jsonrpc":"2.0","method":"hello","params":{}}\n'
    source = tmp_path / "editor.jsonl"
    source.write_bytes(notice * 3)
    echo = "import sys; sys.stdout.buffer.write(sys.stdin.buffer.read())"
    with open(source if given == "a file" else os.devnull, "rb") as stdin:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast", "--redis", f"redis://127.0.0.1:{free_port()}/0", "acp",
            "--session", SESSION, "--", sys.executable, "-c", echo,
            stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(HERE.parent / "src")},
        )
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    assert proc.returncode == 0, err
    assert b"Traceback" not in err and b"Exception" not in err, err.decode()
    assert out == (notice * 3 if given == "a file" else b"")


async def _open_asks(store: CardStore) -> list[Any]:
    asks, now = await store.asks.all(OWNER)
    return [a for a in asks if a.state_at(now) is AskState.open]


async def _run_is(store: CardStore, state: RunState) -> bool:
    return (await store.view(OWNER)).run is state


async def _tools_are(store: CardStore, tools: tuple[str, ...]) -> bool:
    return (await store.activity(OWNER)).tools == tools
