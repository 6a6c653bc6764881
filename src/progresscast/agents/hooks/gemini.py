"""`progresscast hook gemini`: one Gemini CLI hook event (JSON on stdin).

Gemini CLI's hooks reference (https://geminicli.com/docs/hooks/reference): every event
carries `session_id`, `transcript_path`, `cwd`, `hook_event_name` and `timestamp`;
`AfterTool` adds `tool_name`, `tool_input`, `tool_response`; `BeforeAgent` the
`prompt`; `AfterAgent` the `prompt` and `prompt_response`. Stdout must hold only the
final JSON, so the caller prints `{}` and nothing else.

- `BeforeAgent` starts a run; `AfterAgent` sets the answer text and ends it completed;
  `SessionEnd` ends a run still active as canceled.
- `AfterTool` of `write_todos` (`{todos: [{description, status}]}`, statuses
  pending|in_progress|completed|cancelled|blocked; cancelled shows as skipped)
  writes the list as the card.
- `BeforeTool` (`tool_name`, `tool_input`), with `--ask-tools REGEX` only: after a Stop
  pressed on the run it answers `{"decision": "deny", "reason": "Stopped from … by NAME",
  "continue": false, "stopReason": …}` (the reference: `continue: false` ends the agent
  loop, `reason` goes to the model); a tool whose whole name matches becomes an approval
  ask: Allow → `{"decision": "allow"}`, Deny → `{"decision": "deny", "reason": "Denied
  from … by NAME"}`; no answer within `--wait` → nothing (`{}`: Gemini's own
  confirmation decides) and the ask is withdrawn. With `--ask-tools`, `BeforeAgent`
  starts the run stoppable.
"""

from __future__ import annotations

import re
from typing import Any

from ...model.card import reject_lone_surrogates
from ...model.owners import Owner
from ...model.view import RunState
from ..harness_plan import GEMINI_TODO, map_plan
from .context import HookContext

_EVENTS = ("BeforeAgent", "AfterAgent", "SessionEnd")
READS = ("session_id", "prompt_response", "tool_input")
"""What the hook reads of an event: a lone surrogate in it refuses the event, naming the field."""


Hooked = dict[str, Any] | None


async def handle(ctx: HookContext, event: dict[str, Any]) -> Hooked:
    name = event.get("hook_event_name")
    asks_tools = getattr(ctx.args, "ask_tools", None)
    if name == "BeforeTool" and asks_tools is not None:
        reject_lone_surrogates({field: event[field] for field in READS if field in event})
        return await _before_tool(ctx, ctx.owner(event.get("session_id")), event, asks_tools)
    if name not in _EVENTS and not (name == "AfterTool" and event.get("tool_name") == "write_todos"):
        return None  # not an event this hook shows
    reject_lone_surrogates({field: event[field] for field in READS if field in event})
    owner = ctx.owner(event.get("session_id"))
    if name == "BeforeAgent":
        await ctx.start_run(owner, stoppable=asks_tools is not None)
    elif name == "AfterAgent":
        answer = event.get("prompt_response")
        if isinstance(answer, str) and answer.strip():
            await ctx.store.update_activity(owner, answer=answer)
        await ctx.end_active_run(owner, RunState.completed)
    elif name == "SessionEnd":
        await ctx.end_active_run(owner, RunState.canceled)
    elif name == "AfterTool" and event.get("tool_name") == "write_todos":
        tool_input = event.get("tool_input")
        todos = tool_input.get("todos") if isinstance(tool_input, dict) else None
        await ctx.write_plan(owner, map_plan(todos, GEMINI_TODO, field="tool_input.todos"))
    return None


async def _before_tool(ctx: HookContext, owner: Owner, event: dict[str, Any], tools: re.Pattern[str]) -> Hooked:
    from ..asking import stopped_by
    from .claude_asks import approve

    mark = await ctx.store.asks.stop_mark(owner)
    if mark is not None:
        return _stopped(stopped_by(mark))
    if not tools.fullmatch(str(event.get("tool_name") or "")):
        return None
    approval = await approve(ctx, owner, event, "gemini")
    if approval is None:
        return None
    if approval.stopped:
        return _stopped(approval.why)
    if approval.allowed:
        return {"decision": "allow"}
    return {"decision": "deny", "reason": approval.why}


def _stopped(why: str) -> dict[str, Any]:
    return {"decision": "deny", "reason": why, "continue": False, "stopReason": why}
