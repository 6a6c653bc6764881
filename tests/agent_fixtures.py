"""Whole agent sessions as each agent emits them, for the hook tests.

Every payload is written from the agent's own documentation of its hook or event
format (cited at each builder), with only the fields those documents name.
"""

from __future__ import annotations

from typing import Any

CLAUDE_SESSION = "2f6c1d2e-7b5a-4c1e-9d8f-3a2b1c0d9e8f"
CWD = "/home/dev/shop"


# -- Claude Code -------------------------------------------------------------------
# Claude Code hooks reference, https://code.claude.com/docs/en/hooks: "Common input
# fields" (session_id, transcript_path, cwd, permission_mode, hook_event_name),
# "UserPromptSubmit input" (prompt), "PostToolUse input" (tool_name, tool_input,
# tool_response, tool_use_id), "Stop input" (stop_hook_active), "SessionEnd input"
# (reason).


def claude(event: str, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": CLAUDE_SESSION,
        "transcript_path": f"/home/dev/.claude/projects/-home-dev-shop/{CLAUDE_SESSION}.jsonl",
        "cwd": CWD,
        "permission_mode": "default",
        "hook_event_name": event,
        **fields,
    }


def todo(content: str, status: str, active_form: str) -> dict[str, str]:
    # TodoWrite's input: {"todos": [{"content", "status", "activeForm"}]}, statuses
    # pending | in_progress | completed (Claude Code tools reference, TodoWrite).
    return {"content": content, "status": status, "activeForm": active_form}


def todo_write(todos: list[dict[str, str]], old: list[dict[str, str]], n: int) -> dict[str, Any]:
    return claude(
        "PostToolUse",
        tool_name="TodoWrite",
        tool_input={"todos": todos},
        tool_response={"oldTodos": old, "newTodos": todos},
        tool_use_id=f"toolu_01TodoWrite{n}",
    )


TODOS_1 = [
    todo("Reproduce the checkout bug", "in_progress", "Reproducing the checkout bug"),
    todo("Fix the rounding in totals", "pending", "Fixing the rounding in totals"),
    todo("Add a regression test", "pending", "Adding a regression test"),
]
TODOS_2 = [
    todo("Reproduce the checkout bug", "completed", "Reproducing the checkout bug"),
    todo("Fix the rounding in totals", "in_progress", "Fixing the rounding in totals"),
    todo("Add a regression test", "pending", "Adding a regression test"),
]
TODOS_3 = [
    todo("Reproduce the checkout bug", "completed", "Reproducing the checkout bug"),
    todo("Fix the rounding in totals", "completed", "Fixing the rounding in totals"),
    todo("Add a regression test", "completed", "Adding a regression test"),
]

CLAUDE_TODOWRITE_SESSION = [
    claude("UserPromptSubmit", prompt="The checkout total is off by a cent; fix it and add a test."),
    todo_write(TODOS_1, [], 1),
    todo_write(TODOS_2, TODOS_1, 2),
    todo_write(TODOS_3, TODOS_2, 3),
    claude("Stop", stop_hook_active=False),
]


# Claude Code's Task tools (tools reference: TaskCreate takes subject, description,
# activeForm and answers with the new task, `{"task": {"id", "subject"}}`; TaskUpdate
# takes taskId plus the fields to change — status pending | in_progress | completed,
# or deleted to remove the task — and answers `{"success", "taskId", "updatedFields",
# "statusChange"}`).


def task_create(n: int, subject: str, active_form: str) -> dict[str, Any]:
    return claude(
        "PostToolUse",
        tool_name="TaskCreate",
        tool_input={"subject": subject, "description": f"{subject}, with tests.", "activeForm": active_form},
        tool_response={"task": {"id": str(n), "subject": subject}},
        tool_use_id=f"toolu_01TaskCreate{n}",
    )


def task_update(n: int, seq: int, **fields: str) -> dict[str, Any]:
    return claude(
        "PostToolUse",
        tool_name="TaskUpdate",
        tool_input={"taskId": str(n), **fields},
        tool_response={
            "success": True,
            "taskId": str(n),
            "updatedFields": sorted(fields),
            "statusChange": fields.get("status"),
        },
        tool_use_id=f"toolu_01TaskUpdate{seq}",
    )


CLAUDE_TASKS_SESSION = [
    claude("UserPromptSubmit", prompt="Migrate the settings page to the new form library."),
    task_create(1, "Inventory the settings forms", "Inventorying the settings forms"),
    task_create(2, "Port the forms", "Porting the forms"),
    task_create(3, "Delete the old library", "Deleting the old library"),
    task_update(1, 1, status="in_progress"),
    task_update(1, 2, status="completed"),
    task_update(2, 3, status="in_progress"),
    task_update(3, 4, status="deleted"),
    claude(
        "PostToolUse",
        tool_name="TaskList",
        tool_input={},
        tool_response={"tasks": []},
        tool_use_id="toolu_01TaskList1",
    ),
    claude("Stop", stop_hook_active=False),
    claude("SessionEnd", reason="prompt_input_exit"),
]


# -- Codex -----------------------------------------------------------------------------
# `codex exec --json` JSON lines, as openai/codex defines them in
# codex-rs/exec/src/exec_events.rs (ThreadEvent: thread.started {thread_id},
# turn.started {}, item.started / item.updated / item.completed {item: {id, type, …}},
# turn.completed {usage: {input_tokens, cached_input_tokens, output_tokens}},
# turn.failed {error: {message}}; item types agent_message {text}, reasoning {text},
# command_execution {command, aggregated_output, exit_code, status}, todo_list
# {items: [{text, completed}]}).

CODEX_THREAD = "0199a213-81c0-7800-8aa1-bbab2a035a53"


def codex_todo(kind: str, done: int) -> dict[str, Any]:
    items = ["Read the failing test", "Patch the parser", "Run the suite"]
    return {
        "type": kind,
        "item": {
            "id": "item_1",
            "type": "todo_list",
            "items": [{"text": text, "completed": i < done} for i, text in enumerate(items)],
        },
    }


CODEX_TRANSCRIPT: list[dict[str, Any]] = [
    {"type": "thread.started", "thread_id": CODEX_THREAD},
    {"type": "turn.started"},
    {"type": "item.completed", "item": {"id": "item_0", "type": "reasoning", "text": "**Planning the fix**"}},
    codex_todo("item.started", 0),
    {
        "type": "item.started",
        "item": {"id": "item_2", "type": "command_execution", "command": "bash -lc 'pytest -x'",
                 "aggregated_output": "", "exit_code": None, "status": "in_progress"},
    },
    {
        "type": "item.completed",
        "item": {"id": "item_2", "type": "command_execution", "command": "bash -lc 'pytest -x'",
                 "aggregated_output": "1 failed", "exit_code": 1, "status": "failed"},
    },
    codex_todo("item.updated", 1),
    codex_todo("item.updated", 2),
    {"type": "item.completed", "item": {"id": "item_3", "type": "agent_message", "text": "Patched the parser; the suite passes."}},
    codex_todo("item.completed", 3),
    {"type": "turn.completed", "usage": {"input_tokens": 24763, "cached_input_tokens": 24448, "output_tokens": 122}},
]


# -- Gemini CLI -------------------------------------------------------------------------
# Gemini CLI hooks reference, https://geminicli.com/docs/hooks/reference: "Base input
# schema" (session_id, transcript_path, cwd, hook_event_name, timestamp); BeforeAgent
# (prompt), AfterAgent (prompt, prompt_response, stop_hook_active), AfterTool
# (tool_name, tool_input, tool_response {llmContent, returnDisplay}), SessionStart
# (source), SessionEnd (reason). The write_todos tool takes {todos: [{description,
# status}]} with statuses pending | in_progress | completed | cancelled | blocked
# (Gemini CLI tools reference, write_todos).

GEMINI_SESSION_ID = "c5f0e3b2-41d7-4a8e-b7a9-0f6e2d1c3b4a"
PROMPT = "Add dark mode to the settings screen."


def gemini(event: str, second: int, **fields: Any) -> dict[str, Any]:
    return {
        "session_id": GEMINI_SESSION_ID,
        "transcript_path": f"/home/dev/.gemini/tmp/shop/chats/session-{GEMINI_SESSION_ID}.json",
        "cwd": CWD,
        "hook_event_name": event,
        "timestamp": f"2026-12-01T10:00:{second:02d}.000Z",
        **fields,
    }


def write_todos(second: int, todos: list[dict[str, str]]) -> dict[str, Any]:
    return gemini(
        "AfterTool",
        second,
        tool_name="write_todos",
        tool_input={"todos": todos},
        tool_response={"llmContent": "Successfully updated the todo list.", "returnDisplay": "Todos updated"},
    )


GEMINI_SESSION = [
    gemini("SessionStart", 0, source="startup"),
    gemini("BeforeAgent", 1, prompt=PROMPT),
    write_todos(2, [
        {"description": "Add a theme setting", "status": "in_progress"},
        {"description": "Style the screen", "status": "pending"},
        {"description": "Port the old theme engine", "status": "pending"},
    ]),
    gemini("AfterTool", 3, tool_name="read_file", tool_input={"absolute_path": f"{CWD}/settings.tsx"},
           tool_response={"llmContent": "…", "returnDisplay": ""}),
    write_todos(4, [
        {"description": "Add a theme setting", "status": "completed"},
        {"description": "Style the screen", "status": "in_progress"},
        {"description": "Port the old theme engine", "status": "cancelled"},
    ]),
    gemini("AfterAgent", 5, prompt=PROMPT, prompt_response="Dark mode is in: a theme setting and styles.",
           stop_hook_active=False),
    gemini("SessionEnd", 6, reason="exit"),
]
