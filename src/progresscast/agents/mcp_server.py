"""`progresscast mcp`: the agent tools as a Model Context Protocol server.

Three tools, `progress_card` (the card's own input), `update_plan` (a harness-shaped
plan) and `ask_person` (a question to the people following the session, mcp_ask.py),
on the `mcp` SDK's low-level server so each tool's JSON schema is exactly the one
written here. The server binds the owner (session and agent) when it starts; the
model only supplies the tool's arguments, so it can never write another session's
card. A write of the wrong shape is a failed tool result (`isError`) naming the field
and the rule, with nothing stored, so the model can read it and retry.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections.abc import Iterable
from typing import Any, cast

import httpx
import mcp_types as types
from mcp.server.lowlevel import Server

from ..config.settings import Settings
from ..model.card import (
    MAX_MARKDOWN_BYTES,
    MAX_NOTE_CHARS,
    MAX_STEP_BYTES,
    MAX_STEPS,
    SURROGATE_RULE,
    CardError,
    CardInput,
    WriteResult,
    reject_lone_surrogates,
)
from ..model.owners import Owner
from ..stopping import stop_on_sigterm
from .harness_plan import CODEX_PLAN, MAX_HARNESS_STEPS, MAX_LABEL_CHARS, PROGRESS_V1, PlanShapeError, map_plan
from .held_run import HeldRun
from .mcp_ask import ASK_PERSON_TOOL, ask_person, with_stop
from .mcp_input import REFUSED_META_KEY, Owed, StdinLines
from .mcp_options import TOOL_NAMES, McpOptions, McpUsageError, owner_of
from .sinks import CardSink, Gateway, GatewaySink, SinkError, StoreSink

log = logging.getLogger("progresscast.agents.mcp")

_WHEN = (
    "Use it only for substantial work with at least two meaningful sequential steps — never for "
    "greetings, quick questions or single-step requests. Keep exactly one step in progress at a "
    "time and mark steps done as you finish them. Every call replaces the whole plan, so always "
    "send all steps."
)

PROGRESS_CARD_DESCRIPTION = (
    "Show the user a live progress card for the work you are doing: a checklist plan plus a short "
    "Markdown note, which they watch update in their chat. "
    + _WHEN
    + " Omitting `markdown` removes the note; omitting `plan` removes the checklist. When the work "
    "is done or abandoned, clear the card by calling this tool with {}."
)

UPDATE_PLAN_DESCRIPTION = (
    "Update the plan on the user's live progress card, which they watch in their chat. "
    + _WHEN
    + " Send either `steps` ({label, state: pending|active|done|blocked|skipped, note?}) or, in "
    "Codex's shape, `plan` ({step, status: pending|in_progress|completed}) with an optional "
    "`explanation` shown as the status line. The card's Markdown note is kept. Labels over "
    f"{MAX_LABEL_CHARS} characters and notes over {MAX_NOTE_CHARS} are cut; at most "
    f"{MAX_HARNESS_STEPS} steps are shown. When the work is done or abandoned, send an empty plan "
    '({"steps": []}).'
)

PROGRESS_CARD_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "plan": {
            "type": "array",
            "maxItems": MAX_STEPS,
            "description": f"The whole plan, in order (at most {MAX_STEPS} steps, at most one in_progress).",
            "items": {
                "type": "object",
                "properties": {
                    "step": {
                        "type": "string",
                        "description": f"What the step does (at most {MAX_STEP_BYTES} UTF-8 bytes).",
                    },
                    "status": {"type": "string", "enum": ["pending", "in_progress", "completed", "blocked", "skipped"]},
                    "note": {"type": "string", "description": f"A short note (cut at {MAX_NOTE_CHARS} characters)."},
                },
                "required": ["step", "status"],
                "additionalProperties": False,
            },
        },
        "markdown": {
            "type": "string",
            "description": f"A compact Markdown note shown under the plan (at most {MAX_MARKDOWN_BYTES} UTF-8 bytes).",
        },
    },
    "additionalProperties": False,
}

def _plan_schema(
    description: str, text: str, state: str, states: Iterable[str], *, note: bool = False
) -> dict[str, Any]:
    """A whole plan: its steps in order, each a `text` and a `state` among `states`
    (and a `note`, where the shape has one)."""
    step: dict[str, Any] = {text: {"type": "string"}, state: {"type": "string", "enum": list(states)}}
    if note:
        step["note"] = {"type": "string"}
    return {
        "type": "array",
        "description": description,
        "items": {"type": "object", "properties": step, "required": [text, state], "additionalProperties": False},
    }


UPDATE_PLAN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "steps": _plan_schema("The whole plan, in order.", "label", "state", PROGRESS_V1.states, note=True),
        "explanation": {"type": "string", "description": "Why the plan is what it is now; shown as the status line."},
        "plan": _plan_schema(
            "Codex's shape of the whole plan, instead of `steps`.", "step", "status", CODEX_PLAN.states
        ),
    },
    "additionalProperties": False,
}

RESULT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "revision": {"type": "integer"},
        "steps": {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {"completed": {"type": "integer"}, "total": {"type": "integer"}},
                    "required": ["completed", "total"],
                },
                {"type": "null"},
            ]
        },
        "cleared": {"type": "boolean"},
        "stop": {"type": "string", "description": "Set when Stop was pressed on the run: who, and where."},
    },
    "required": ["revision", "steps"],
}

TOOLS = {
    name: types.Tool(
        name=name, title=title, description=description, input_schema=schema, output_schema=RESULT_SCHEMA
    )
    for name, title, description, schema in (
        ("progress_card", "Progress card", PROGRESS_CARD_DESCRIPTION, PROGRESS_CARD_SCHEMA),
        ("update_plan", "Update plan", UPDATE_PLAN_DESCRIPTION, UPDATE_PLAN_SCHEMA),
    )
} | {"ask_person": ASK_PERSON_TOOL}


def _failed(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _answered(text: str, result: WriteResult) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=result.to_json()
    )


class AgentTools:
    """The tools' behaviour, bound to one owner's card."""

    def __init__(self, sink: CardSink, offered: tuple[str, ...] = TOOL_NAMES) -> None:
        self.sink = sink
        self.offered = offered
        self.run = HeldRun(sink)
        """The run this server holds while its client is connected (`held_run`)."""

    async def call(
        self, name: str, arguments: dict[str, Any] | None, refused_field: str | None = None
    ) -> types.CallToolResult:
        """`refused_field`: the argument the transport found a lone surrogate in (mcp_input)."""
        if name not in self.offered:
            return _failed(f"unknown tool '{name}'; this server offers {', '.join(self.offered)}")
        arrived = time.monotonic()  # a reset that lands from here on refuses the write
        try:
            if refused_field is not None:
                raise CardError(refused_field, SURROGATE_RULE)
            reject_lone_surrogates(arguments or {})
            await self.run.before_write()
            if name == "ask_person":
                return await ask_person(self.sink, arguments or {})
            if name == "progress_card":
                result = await self.progress_card(arguments or {}, arrived)
            else:
                result = await self.update_plan(arguments or {}, arrived)
            return with_stop(result, await self.sink.stop_mark())
        except CardError as exc:
            if name == "ask_person":
                return _failed(f"{exc}. Nothing was asked; fix it and ask again.")
            whole = "card" if name == "progress_card" else "plan"
            return _failed(f"{exc}. Nothing was stored; fix it and send the whole {whole} again.")
        except SinkError as exc:
            return _failed(f"Nothing was stored: {exc}")

    async def progress_card(self, arguments: dict[str, Any], arrived: float | None = None) -> types.CallToolResult:
        result = await self.sink.put(CardInput.parse(arguments), arrived=arrived)
        return _answered(result.receipt, result)

    async def update_plan(self, arguments: dict[str, Any], arrived: float | None = None) -> types.CallToolResult:
        for name in arguments:
            if name not in UPDATE_PLAN_SCHEMA["properties"]:
                raise PlanShapeError(name, "is not a known field")
        explanation = arguments.get("explanation")
        if explanation is not None and not isinstance(explanation, str):
            raise PlanShapeError("explanation", "must be a string")
        if "steps" in arguments and "plan" in arguments:
            raise PlanShapeError("plan", "give either steps or plan, not both")
        if "steps" in arguments:
            mapped = map_plan(arguments["steps"], PROGRESS_V1, field="steps")
        elif "plan" in arguments:
            mapped = map_plan(arguments["plan"], CODEX_PLAN, field="plan")
        else:
            raise PlanShapeError("steps", "is required (or plan, in Codex's shape)")
        result = await self.sink.put_plan(mapped.steps, arrived=arrived)
        if explanation is not None:
            try:
                await self.sink.activity(headline=explanation)
            except SinkError as exc:  # the plan is stored: say so, and what is missing
                return _answered(f"Plan updated; the explanation was not shown: {exc}", result)
        return _answered("Plan updated", result)


def build_server(tools: AgentTools) -> Server[Any]:
    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[TOOLS[name] for name in tools.offered])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        refused = (params.meta or {}).get(REFUSED_META_KEY)
        return await tools.call(params.name, params.arguments, refused if isinstance(refused, str) else None)

    return Server("progresscast", version=_version(), on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("progresscast")
    except PackageNotFoundError:
        return "0"


# -- the command ----------------------------------------------------------------


async def run_mcp(settings: Settings, options: McpOptions, redis_url: str | None) -> None:
    """Serve until the client goes away (stdio) or the process is stopped (HTTP)."""
    async with httpx.AsyncClient(timeout=10) as client:
        if options.gateway is not None and options.token is not None:
            gateway = Gateway(client, options.gateway, options.token)
            sink: CardSink = GatewaySink(gateway, await _gateway_owner(gateway, options.session, options.agent))
            await _serve(settings, options, AgentTools(sink, options.tools))
            return
        from ..store.cards import CardStore
        from ..store.connections import connect

        assert options.owner is not None and redis_url is not None
        redis = connect(redis_url)
        try:
            await _serve(settings, options, AgentTools(StoreSink(CardStore(redis), options.owner), options.tools))
        finally:
            await redis.aclose()


async def _gateway_owner(gateway: Gateway, session: str, agent: str | None) -> Owner:
    """Check the token once at start (a read-only token cannot work) and resolve the owner
    with the gateway's agents, so a bad --session or --agent fails now, not at each call."""
    try:
        hello = await gateway.hello()
    except SinkError as exc:
        raise McpUsageError(f"--gateway: {exc}") from None
    scopes = hello.get("token", {}).get("scopes", [])
    if "operator.write" not in scopes:
        raise McpUsageError("--token: this token lacks the scope operator.write, so it cannot write cards")
    agents = hello.get("agents", {})
    default = agents.get("default", "main")
    return owner_of(session, agent, frozenset(agents.get("known", [default])), default)


async def _serve(settings: Settings, options: McpOptions, tools: AgentTools) -> None:
    owner = tools.sink.owner
    server = build_server(tools)
    if options.listen is not None:
        from .mcp_http import check_tokens

        check_tokens(settings, owner, options.listen)  # before anything is printed
    print(
        f"progresscast mcp: writing the card of session '{owner.session_key}' (agent '{owner.agent_id}',"
        f" {owner.display_key}); /follow {owner.session_key} {owner.agent_id} to watch it",
        file=sys.stderr,
        flush=True,
    )
    # The run this server holds ends when the client goes (stdio), when the server is
    # stopped (Ctrl-C, SIGTERM: a client quitting may send that rather than close stdin),
    # or, over HTTP, only then. A SIGTERM is an ordinary end: exit status 0.
    stopping = stop_on_sigterm(log)
    try:
        if options.listen is None:
            await _serve_stdio(server)
        else:
            from .mcp_http import serve_http

            await serve_http(server, settings, owner, options.listen)
    except asyncio.CancelledError:
        if not stopping.is_set():
            raise  # Ctrl-C: asyncio.run turns this into KeyboardInterrupt
    finally:
        await tools.run.release()


async def _serve_stdio(server: Server[Any]) -> None:
    import anyio
    from mcp.server.stdio import stdio_server

    # The SDK only iterates its stdin's lines, which is all StdinLines offers.
    stdin = cast("anyio.AsyncFile[str]", StdinLines(sys.stdin.fileno()))
    async with stdio_server(stdin=stdin) as streams:
        read_stream, write_stream = Owed().streams(*streams)  # the end of stdin waits for the answers owed
        await server.run(read_stream, write_stream, server.create_initialization_options())
