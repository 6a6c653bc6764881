"""A tiny ACP agent written with the `agent-client-protocol` SDK, run as a process on
stdio: `python tests/acp_agent.py RECORD_DIR`. It records the bytes it reads and writes
(`agent_in.bin`, `agent_out.bin`) and the permission outcomes it got (`outcomes.jsonl`).

What a prompt's text asks it to do:
- `plan`: an unknown notification with `_meta`, a plan (with `_meta`), a tool call and
  its update (a new title, failed), a message in two chunks, the session's cost so far
  (`usage_update`, 0.05 USD more each time); then `end_turn` with the turn's tokens;
- `permission`: ask for permission to run a command, say the option it got; `end_turn`;
- `wait`: a plan, then wait for `session/cancel`; `cancelled`;
- `steps`: a plan of three steps and a tool call; for each of the first two steps a
  permission request, after whose answer the step is done (the tool call too) and the
  plan sent again; then `end_turn`;
- `refuse`: `refusal`.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from acp import (
    InitializeResponse,
    NewSessionResponse,
    PromptResponse,
    plan_entry,
    start_tool_call,
    update_agent_message_text,
    update_plan,
    update_tool_call,
)
from acp.agent.connection import AgentSideConnection
from acp.schema import Cost, PermissionOption, ToolCallUpdate, Usage, UsageUpdate

from acp_wire import LIMIT, Recorded

PLAN = [
    ("Read the failing test", "completed"),
    ("Fix the parser", "in_progress"),
    ("Run the tests", "in_progress"),
    ("Write the changelog " + "x" * 200, "pending"),
]


class TinyAgent:
    def __init__(self, record: Path) -> None:
        self.record = record
        self.conn: AgentSideConnection | None = None
        self.cancelled = asyncio.Event()
        self.cost = 0.0

    def on_connect(self, conn: AgentSideConnection) -> None:
        self.conn = conn

    async def initialize(self, protocol_version: int, **kwargs: Any) -> InitializeResponse:
        return InitializeResponse(protocol_version=protocol_version)

    async def new_session(self, cwd: str, **kwargs: Any) -> NewSessionResponse:
        return NewSessionResponse(session_id="sess-1")

    async def prompt(self, session_id: str, prompt: list[Any], **kwargs: Any) -> PromptResponse:
        assert self.conn is not None
        text = "".join(getattr(block, "text", "") for block in prompt)
        if text == "plan":
            await self.conn.ext_notification("example.com/ping", {"n": 1, "_meta": {"trace": "t-1"}})
            entries = [plan_entry(content, status=status) for content, status in PLAN]  # type: ignore[arg-type]
            await self.conn.session_update(session_id, update_plan(entries), trace="t-2")
            await self.conn.session_update(session_id, start_tool_call("call-1", "Run pytest -q", kind="execute"))
            failed = update_tool_call("call-1", title="Run pytest -q tests/", status="failed")
            await self.conn.session_update(session_id, failed)
            await self.conn.session_update(session_id, update_agent_message_text("The parser "))
            await self.conn.session_update(session_id, update_agent_message_text("is fixed."))
            self.cost += 0.05
            cost = Cost(amount=round(self.cost, 2), currency="USD")
            await self.conn.session_update(
                session_id, UsageUpdate(session_update="usage_update", used=1200, size=200_000, cost=cost)
            )
            usage = Usage(total_tokens=1500, input_tokens=1200, output_tokens=300)
            return PromptResponse(stop_reason="end_turn", usage=usage)
        if text == "permission":
            options = [
                PermissionOption(option_id="allow", name="Allow once", kind="allow_once"),
                PermissionOption(option_id="always", name="Always allow", kind="allow_always"),
                PermissionOption(option_id="reject", name="Reject", kind="reject_once"),
            ]
            tool = ToolCallUpdate(tool_call_id="call-2", title="rm -rf build")
            response = await self.conn.request_permission(session_id, tool, options)
            outcome = response.outcome.model_dump(by_alias=True, exclude_none=True)
            with (self.record / "outcomes.jsonl").open("a") as f:
                f.write(json.dumps(outcome) + "\n")
            await self.conn.session_update(session_id, update_agent_message_text(f"got {outcome}"))
            return PromptResponse(stop_reason="end_turn")
        if text == "steps":
            await self._steps(session_id)
            return PromptResponse(stop_reason="end_turn")
        if text == "wait":
            entries = [plan_entry("Wait for Stop", status="in_progress")]
            await self.conn.session_update(session_id, update_plan(entries))
            await self.cancelled.wait()
            self.cancelled.clear()
            return PromptResponse(stop_reason="cancelled")
        return PromptResponse(stop_reason="refusal")

    async def _steps(self, session_id: str) -> None:
        assert self.conn is not None
        names = ["Edit the parser", "Run the tests", "Write the changelog"]
        options = [
            PermissionOption(option_id="yes", name="Yes, go ahead", kind="allow_once"),
            PermissionOption(option_id="no", name="No, stop", kind="reject_once"),
        ]

        async def plan(done: int) -> None:
            states = ["completed"] * done + ["in_progress"] + ["pending"] * (len(names) - done - 1)
            entries = [plan_entry(n, status=st) for n, st in zip(names, states, strict=False)]  # type: ignore[arg-type]
            await self.conn.session_update(session_id, update_plan(entries))  # type: ignore[union-attr]

        await plan(0)
        await self.conn.session_update(session_id, start_tool_call("call-e", "Edit parser.py", kind="edit"))
        for done, name in enumerate(names[:2]):
            tool = ToolCallUpdate(tool_call_id=f"call-{done}", title=name)
            response = await self.conn.request_permission(session_id, tool, options)
            outcome = response.outcome.model_dump(by_alias=True, exclude_none=True)
            with (self.record / "outcomes.jsonl").open("a") as f:
                f.write(json.dumps(outcome) + "\n")
            if done == 0:
                await self.conn.session_update(session_id, update_tool_call("call-e", status="completed"))
            await plan(done + 1)

    async def cancel(self, session_id: str, **kwargs: Any) -> None:
        self.cancelled.set()


async def main(record: Path) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=LIMIT)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, sys.stdout)
    writer = asyncio.StreamWriter(transport, protocol, None, loop)
    files = {"in": (record / "agent_in.bin").open("ab"), "out": (record / "agent_out.bin").open("ab")}

    def keep(direction: str, data: bytes) -> None:
        files[direction].write(data)
        files[direction].flush()

    async def write(data: bytes) -> None:
        writer.write(data)
        await writer.drain()

    agent = TinyAgent(record)
    conn = AgentSideConnection(agent, Recorded(reader, write, keep), listening=False)  # type: ignore[arg-type]
    await conn.listen()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
