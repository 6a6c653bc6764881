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
"""

from __future__ import annotations

from typing import Any

from ...model.card import reject_lone_surrogates
from ...model.view import RunState
from ..harness_plan import GEMINI_TODO, map_plan
from .context import HookContext

_EVENTS = ("BeforeAgent", "AfterAgent", "SessionEnd")
READS = ("session_id", "prompt_response", "tool_input")
"""What the hook reads of an event: a lone surrogate in it refuses the event, naming the field."""


async def handle(ctx: HookContext, event: dict[str, Any]) -> dict[str, Any] | None:
    name = event.get("hook_event_name")
    if name not in _EVENTS and not (name == "AfterTool" and event.get("tool_name") == "write_todos"):
        return None  # not an event this hook shows
    reject_lone_surrogates({field: event[field] for field in READS if field in event})
    owner = ctx.owner(event.get("session_id"))
    if name == "BeforeAgent":
        await ctx.start_run(owner)
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
