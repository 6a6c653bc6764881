"""`progresscast hook claude-code`: one Claude Code hook event (JSON on stdin).

Claude Code's hooks reference (https://code.claude.com/docs/en/hooks): every event
carries `session_id`, `transcript_path`, `cwd` and `hook_event_name`; `PostToolUse`
adds `tool_name`, `tool_input` and `tool_response`.

- `UserPromptSubmit` starts a run; `Stop` ends it completed (with the tokens its
  transcript says the run used: `claude_usage.py`); `SessionEnd` ends a run
  still active as canceled.
- `PostToolUse` of `TodoWrite` (`{todos: [{content, status, activeForm}]}`) writes the
  list as the card, with the `activeForm` of the step in progress as the headline.
- `PostToolUse` of the Task tools (`TaskCreate` `{subject, description, activeForm?}`
  answering `{task: {id}}`, `TaskUpdate` `{taskId, status?, subject?, activeForm?}`)
  updates the session's task list kept in Redis and writes the whole list as the card.

Answering from chat (docs/agents.md): runs start stoppable, so chats offer Stop.

- `PermissionRequest` (`tool_name`, `tool_input`) becomes an approval ask naming the
  tool and its input; the answer is the hook's decision,
  `{"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision":
  {"behavior": "allow"|"deny", "message"?}}}` (a Stop pressed meanwhile: deny with
  `interrupt: true`).
- `PreToolUse` of `AskUserQuestion` (`tool_input.questions[{question, header,
  options[{label, description}], multiSelect}]`) becomes one choice ask per question,
  answered as `permissionDecision: "allow"` with `updatedInput` the tool's input plus
  `answers {question: label}` (several labels joined by ", ", as Claude Code's own
  answers are).
- `PreToolUse` of any tool once Stop was pressed on the run: `{"continue": false,
  "stopReason": "Stopped from Telegram by Ana"}`.

No answer within `--wait` seconds: nothing is printed (the terminal's prompt decides)
and the asks are withdrawn.
"""

from __future__ import annotations

from typing import Any

from ...model.card import reject_lone_surrogates
from ...model.view import RunState
from ..harness_plan import CLAUDE_TASK, CLAUDE_TODO, map_plan
from .claude_usage import transcript_usage
from .context import HookContext
from .tasks import TaskList, created_task_id


def _headline(items: Any) -> str:
    """What the step in progress is doing ('' when none is): its activeForm, else its label."""
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and item.get("status") == "in_progress":
            for name in ("activeForm", "content", "subject"):
                text = item.get(name)
                if isinstance(text, str) and text.strip():
                    return text
    return ""


_EVENTS = ("UserPromptSubmit", "Stop", "SessionEnd", "PermissionRequest", "PreToolUse")
_TOOLS = ("TodoWrite", "TaskCreate", "TaskUpdate")
READS = ("session_id", "prompt_id", "tool_input", "tool_response")
"""What the hook reads of an event: a lone surrogate in it refuses the event, naming the field."""


async def handle(ctx: HookContext, event: dict[str, Any]) -> dict[str, Any] | None:
    """Apply one event; what the hook prints for Claude Code (None: nothing)."""
    name = event.get("hook_event_name")
    if name not in _EVENTS and not (name == "PostToolUse" and event.get("tool_name") in _TOOLS):
        return None  # not an event this hook shows (Claude Code sends it every hook event configured)
    reject_lone_surrogates({field: event[field] for field in READS if field in event})
    owner = ctx.owner(event.get("session_id"))
    if name == "UserPromptSubmit":
        prompt_id = event.get("prompt_id")
        await ctx.start_run(owner, prompt_id if isinstance(prompt_id, str) and prompt_id else None, stoppable=True)
    elif name == "Stop":
        # what the run used, summed from its transcript since it started (tokens only)
        path = event.get("transcript_path")
        await ctx.end_active_run(owner, RunState.completed, lambda view: transcript_usage(path, view.started_at))
    elif name == "SessionEnd":
        await ctx.end_active_run(owner, RunState.canceled)
    elif name == "PostToolUse":
        await _tool_used(ctx, owner, event)
    elif name in ("PermissionRequest", "PreToolUse"):
        from .claude_asks import answer_in_chat

        return await answer_in_chat(ctx, owner, event)
    return None


async def _tool_used(ctx: HookContext, owner: Any, event: dict[str, Any]) -> None:
    tool, tool_input = event.get("tool_name"), event.get("tool_input")
    if tool == "TodoWrite":
        todos = tool_input.get("todos") if isinstance(tool_input, dict) else None
        plan = map_plan(todos, CLAUDE_TODO, field="tool_input.todos")
        await ctx.write_plan(owner, plan, headline=_headline(todos))
    elif tool in ("TaskCreate", "TaskUpdate"):
        tasks = TaskList(ctx.redis, owner)
        if tool == "TaskCreate":
            await tasks.create(created_task_id(event.get("tool_response")), tool_input)
        elif not await tasks.update(tool_input, event.get("tool_response")):
            return
        items = await tasks.items()
        await ctx.write_plan(owner, map_plan(items, CLAUDE_TASK, field="tasks"), headline=_headline(items))
