"""Hooks that ask in chat and wait: Claude Code's `PermissionRequest`, `AskUserQuestion`
and Stop through `PreToolUse`, with Claude Code's own event and answer formats.

Each hook is a real `progresscast hook …` process on a real Redis; the test answers the
way a chat press does (`store.asks.answer`, the same write path) and reads what the hook
printed for its agent.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

import agent_fixtures as fx
from progresscast.model.asks import Actor, Ask, AskKind, AskState
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore

OWNER = Owner("main", fx.CLAUDE_SESSION)
ANA = Actor("telegram", "42", "7", "Ana")
BASH = fx.claude(
    "PermissionRequest", tool_name="Bash",
    tool_input={"command": "rm -rf build", "description": "Remove the build folder"},
    permission_suggestions=[{"type": "addRules", "rules": [{"toolName": "Bash"}], "behavior": "allow"}],
)
QUESTIONS = {
    "questions": [
        {
            "question": "Which database should the shop use?", "header": "Database", "multiSelect": False,
            "options": [
                {"label": "PostgreSQL", "description": "Relational, runs as a server"},
                {"label": "SQLite", "description": "One file, no server"},
            ],
        },
        {
            "question": "Which checks should run before a deploy?", "header": "Checks", "multiSelect": True,
            "options": [
                {"label": "Tests", "description": "The whole suite"},
                {"label": "Lint", "description": "ruff and mypy"},
                {"label": "Smoke", "description": "A request to the staging site"},
            ],
        },
    ]
}
ASK_USER = fx.claude("PreToolUse", tool_name="AskUserQuestion", tool_input=QUESTIONS, tool_use_id="toolu_01")


class Running:
    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def done(self, timeout: float = 30) -> tuple[int, str, str]:
        out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        assert self.proc.returncode is not None
        return self.proc.returncode, out.decode(), err.decode()

    async def printed(self) -> Any:
        status, out, err = await self.done()
        assert status == 0 and err == "", err
        return json.loads(out)


Start = Callable[..., Awaitable[Running]]


@pytest.fixture
async def hook(redis_url: str) -> AsyncIterator[Start]:
    started: list[asyncio.subprocess.Process] = []

    async def start(harness: str, event: dict[str, Any], *args: str, indent: int | None = None) -> Running:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "hook", harness, "--redis", redis_url, *args,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            env={k: v for k, v in os.environ.items() if k != "PROGRESSCAST_CONFIG"},
        )
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(event, indent=indent).encode())
        proc.stdin.close()
        started.append(proc)
        return Running(proc)

    yield start
    for proc in started:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def open_asks(store: CardStore, count: int = 1, timeout: float = 20, owner: Owner = OWNER) -> list[Ask]:
    deadline = time.monotonic() + timeout
    while len(found := [a for a in (await store.asks.all(owner))[0] if a.state is AskState.open]) < count:
        assert time.monotonic() < deadline, f"the hook opened {len(found)} asks, not {count}"
        await asyncio.sleep(0.02)
    return found


async def test_a_permission_request_answered_allow(hook: Start, store: CardStore) -> None:
    running = await hook("claude-code", BASH)
    [ask] = await open_asks(store)
    assert ask.kind is AskKind.approval and ask.options == ("Allow", "Deny") and ask.source == "claude-code"
    assert ask.prompt == "Bash: rm -rf build" and ask.detail == "Remove the build folder"
    await store.asks.answer(OWNER, ask.ask_id, ANA, options=["Allow"])
    assert await running.printed() == {
        "hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": {"behavior": "allow"}}
    }


async def test_a_permission_request_answered_deny_says_who(hook: Start, store: CardStore) -> None:
    running = await hook("claude-code", BASH)
    [ask] = await open_asks(store)
    await store.asks.answer(OWNER, ask.ask_id, ANA, options=["Deny"])
    assert await running.printed() == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "Denied from Telegram by Ana"},
        }
    }


async def test_no_answer_within_wait_prints_nothing_and_withdraws(hook: Start, store: CardStore) -> None:
    started = time.monotonic()
    running = await hook("claude-code", BASH, "--wait", "1")
    [ask] = await open_asks(store)
    assert (await running.done()) == (0, "", "")
    assert time.monotonic() - started < 15
    after, _ = await store.asks.get(OWNER, ask.ask_id)
    assert after is not None and after.state is AskState.withdrawn


async def test_a_hook_its_agent_stops_while_it_waits_withdraws_its_ask(hook: Start, store: CardStore) -> None:
    """The person answered in the terminal, or the agent gave up on the hook (SIGTERM):
    no chat goes on offering a question nobody waits for."""
    running = await hook("claude-code", BASH, "--wait", "60")
    [ask] = await open_asks(store)
    running.proc.send_signal(signal.SIGTERM)
    assert (await running.done(timeout=20)) == (0, "", "")  # a hook never fails its agent
    after, _ = await store.asks.get(OWNER, ask.ask_id)
    assert after is not None and after.state is AskState.withdrawn


async def test_ask_user_question_with_two_questions(hook: Start, store: CardStore) -> None:
    running = await hook("claude-code", ASK_USER)
    first, second = await open_asks(store, 2)
    assert first.prompt == "Database: Which database should the shop use?" and first.options == ("PostgreSQL", "SQLite")
    assert not first.multi and first.allow_text and first.detail is not None and "One file, no server" in first.detail
    assert second.multi and second.options == ("Tests", "Lint", "Smoke")
    await store.asks.answer(OWNER, second.ask_id, ANA, options=["Tests", "Smoke"])
    await store.asks.answer(OWNER, first.ask_id, Actor("slack", "C1", "U2", "Ben"), options=["SQLite"])
    assert await running.printed() == {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "allow",
            "updatedInput": {
                **QUESTIONS,
                "answers": {
                    "Which database should the shop use?": "SQLite",
                    "Which checks should run before a deploy?": "Tests, Smoke",
                },
            },
        }
    }


async def test_a_question_answered_only_in_part_leaves_it_to_the_terminal(hook: Start, store: CardStore) -> None:
    running = await hook("claude-code", ASK_USER, "--wait", "2")
    first, second = await open_asks(store, 2)
    await store.asks.answer(OWNER, first.ask_id, ANA, text="MySQL, as the host has it")
    assert (await running.done()) == (0, "", "")
    after, _ = await store.asks.get(OWNER, second.ask_id)
    assert after is not None and after.state is AskState.withdrawn


async def test_stop_then_pre_tool_use_stops_claude(hook: Start, store: CardStore) -> None:
    assert (await (await hook("claude-code", fx.claude("UserPromptSubmit", prompt="Ship it"))).done()) == (0, "", "")
    assert (await store.view(OWNER)).stoppable
    bash = fx.claude("PreToolUse", tool_name="Bash", tool_input={"command": "make deploy"}, tool_use_id="toolu_02")
    assert (await (await hook("claude-code", bash)).done()) == (0, "", "")  # no Stop yet: nothing to say
    assert (await store.asks.stop(OWNER, ANA))[0] == "ok"
    assert await (await hook("claude-code", bash)).printed() == {
        "continue": False, "stopReason": "Stopped from Telegram by Ana"
    }


async def test_stop_pressed_while_a_permission_request_waits_denies_and_interrupts(
    hook: Start, store: CardStore
) -> None:
    assert (await (await hook("claude-code", fx.claude("UserPromptSubmit", prompt="Ship it"))).done())[0] == 0
    running = await hook("claude-code", BASH)
    [ask] = await open_asks(store)
    await store.asks.stop(OWNER, ANA)
    assert await running.printed() == {
        "hookSpecificOutput": {
            "hookEventName": "PermissionRequest",
            "decision": {"behavior": "deny", "message": "Stopped from Telegram by Ana", "interrupt": True},
        }
    }
    after, _ = await store.asks.get(OWNER, ask.ask_id)
    assert after is not None and after.state is AskState.withdrawn


# -- Gemini CLI: BeforeTool with --ask-tools ------------------------------------------------

GEMINI = Owner("main", fx.GEMINI_SESSION_ID)
SHELL = fx.gemini("BeforeTool", 5, tool_name="run_shell_command",
                  tool_input={"command": "rm -rf build", "description": "Remove the build folder", "dir_path": "."})
ASK_SHELL = ("--ask-tools", "run_shell_command|write_file|replace")


async def test_gemini_before_tool_answered_allow(hook: Start, store: CardStore) -> None:
    running = await hook("gemini", SHELL, *ASK_SHELL)
    [ask] = await open_asks(store, owner=GEMINI)
    assert ask.kind is AskKind.approval and ask.source == "gemini"
    assert ask.prompt == "run_shell_command: rm -rf build" and ask.detail == "Remove the build folder"
    await store.asks.answer(GEMINI, ask.ask_id, ANA, options=["Allow"])
    assert await running.printed() == {"decision": "allow"}


async def test_gemini_before_tool_answered_deny_says_who(hook: Start, store: CardStore) -> None:
    running = await hook("gemini", SHELL, *ASK_SHELL)
    [ask] = await open_asks(store, owner=GEMINI)
    await store.asks.answer(GEMINI, ask.ask_id, ANA, options=["Deny"])
    assert await running.printed() == {"decision": "deny", "reason": "Denied from Telegram by Ana"}


async def test_gemini_no_answer_within_wait_leaves_it_to_gemini(hook: Start, store: CardStore) -> None:
    running = await hook("gemini", SHELL, *ASK_SHELL, "--wait", "1")
    [ask] = await open_asks(store, owner=GEMINI)
    assert await running.printed() == {}
    after, _ = await store.asks.get(GEMINI, ask.ask_id)
    assert after is not None and after.state is AskState.withdrawn


async def test_gemini_asks_only_about_the_tools_named(hook: Start, store: CardStore) -> None:
    read = fx.gemini("BeforeTool", 6, tool_name="read_file", tool_input={"absolute_path": "/tmp/x"})
    assert await (await hook("gemini", read, *ASK_SHELL)).printed() == {}
    assert await (await hook("gemini", SHELL)).printed() == {}  # without --ask-tools: nothing asked
    assert (await store.asks.all(GEMINI))[0] == ()


async def test_stop_then_before_tool_stops_gemini(hook: Start, store: CardStore) -> None:
    start = fx.gemini("BeforeAgent", 1, prompt="Ship it")
    assert await (await hook("gemini", start, *ASK_SHELL)).printed() == {}
    assert (await store.view(GEMINI)).stoppable
    read = fx.gemini("BeforeTool", 6, tool_name="read_file", tool_input={"absolute_path": "/tmp/x"})
    assert await (await hook("gemini", read, *ASK_SHELL)).printed() == {}  # no Stop yet
    assert (await store.asks.stop(GEMINI, ANA))[0] == "ok"
    why = "Stopped from Telegram by Ana"
    assert await (await hook("gemini", read, *ASK_SHELL)).printed() == {
        "decision": "deny", "reason": why, "continue": False, "stopReason": why
    }


@pytest.mark.parametrize("event", [
    fx.claude("PermissionRequest"),
    fx.claude("PermissionRequest", tool_name="", tool_input={"command": "ls"}),
    fx.claude("PermissionRequest", tool_name="Bash", tool_input="rm -rf build"),
], ids=["no tool", "empty tool name", "input not an object"])
async def test_a_permission_request_without_a_tool_call_is_not_asked(
    hook: Start, store: CardStore, event: dict[str, Any]
) -> None:
    status, out, err = await (await hook("claude-code", event, "--wait", "2")).done()
    assert (status, out) == (0, "") and "the terminal decides" in err and err.count("\n") == 1, err
    assert (await store.asks.all(OWNER))[0] == ()


async def test_a_wait_that_is_not_a_number_of_seconds_is_said_and_exits_0(hook: Start, store: CardStore) -> None:
    status, out, err = await (await hook("claude-code", BASH, "--wait", "0")).done()
    assert (status, out) == (0, "") and "--wait: must be a whole number of seconds" in err
    assert (await store.asks.all(OWNER))[0] == ()


# -- the `hook codex` wrapper's Stop ------------------------------------------------------

CODEX = Owner("main", "thread-stop")
FAKE_CODEX = """\
import json, signal, sys, time
mark, ignore = sys.argv[1], sys.argv[2] == "ignore"
def interrupted(*_):
    open(mark, "w").write("SIGINT")
    if not ignore:
        print(json.dumps({"type": "turn.failed", "error": {"message": "interrupted"}}), flush=True)
        sys.exit(130)
signal.signal(signal.SIGINT, interrupted)
for event in ({"type": "thread.started", "thread_id": "thread-stop"}, {"type": "turn.started"},
              {"type": "item.started", "item": {"id": "i1", "type": "command_execution", "command": "make"}}):
    print(json.dumps(event), flush=True)
while True:
    time.sleep(0.05)
"""


async def wrapped_codex(redis_url: str, tmp_path: Any, mode: str) -> tuple[asyncio.subprocess.Process, Any]:
    script = tmp_path / "codex.py"
    script.write_text(FAKE_CODEX)
    mark = tmp_path / "interrupted"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "hook", "codex", "--redis", redis_url, "--",
        sys.executable, str(script), str(mark), mode,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    return proc, mark


async def until_running(store: CardStore, owner: Owner, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while (view := await store.view(owner)).run.value != "active" or not view.activity.tools:
        assert time.monotonic() < deadline, "the wrapped command's run did not start"
        await asyncio.sleep(0.02)
    assert view.stoppable


async def test_stop_interrupts_the_wrapped_codex(redis_url: str, tmp_path: Any, store: CardStore) -> None:
    proc, mark = await wrapped_codex(redis_url, tmp_path, "exit")
    try:
        await until_running(store, CODEX)
        await store.asks.stop(CODEX, ANA)
        out, err = await asyncio.wait_for(proc.communicate(), 20)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert proc.returncode == 130 and mark.read_text() == "SIGINT"
    assert b'"turn.failed"' in out and b"Stopped from Telegram by Ana" in err
    view = await store.view(CODEX)
    assert view.run.value == "canceled" and view.stop is not None and view.stop.by.name == "Ana"


async def test_a_codex_that_ignores_the_interrupt_is_terminated(redis_url: str, tmp_path: Any, store: CardStore) -> None:
    from progresscast.agents.hooks.codex import STOP_GRACE

    proc, mark = await wrapped_codex(redis_url, tmp_path, "ignore")
    try:
        await until_running(store, CODEX)
        await store.asks.stop(CODEX, ANA)
        pressed = time.monotonic()
        _, err = await asyncio.wait_for(proc.communicate(), STOP_GRACE + 20)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert mark.read_text() == "SIGINT" and time.monotonic() - pressed >= STOP_GRACE
    assert proc.returncode == 128 + 15 and b"terminating it" in err
    view = await store.view(CODEX)
    assert view.run.value == "canceled"


# A launcher (a shell script, npx) whose agent is a child of its own: Ctrl-C in a
# terminal reaches both, and so does a Stop. The child holds the output open.
LAUNCHER = """\
printf '%s\\n' '{"type": "thread.started", "thread_id": "thread-stop"}' '{"type": "turn.started"}'
printf '%s\\n' '{"type": "item.started", "item": {"id": "i1", "type": "command_execution", "command": "make"}}'
"$1" -c 'import os, sys, time; open(sys.argv[1], "w").write(str(os.getpid())); time.sleep(120)' "$2"
"""


async def test_stop_reaches_the_wrapped_command_s_children(redis_url: str, tmp_path: Any, store: CardStore) -> None:
    from progresscast.agents.hooks.codex import STOP_GRACE

    script = tmp_path / "launcher.sh"
    script.write_text(LAUNCHER)
    child = tmp_path / "child.pid"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "hook", "codex", "--redis", redis_url, "--",
        "sh", str(script), sys.executable, str(child),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    try:
        await until_running(store, CODEX)
        deadline = time.monotonic() + 20
        while not child.exists() or not child.read_text():
            assert time.monotonic() < deadline, "the launcher's child did not start"
            await asyncio.sleep(0.02)
        pid = int(child.read_text())
        await store.asks.stop(CODEX, ANA)
        _, err = await asyncio.wait_for(proc.communicate(), STOP_GRACE + 10)
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert proc.returncode in (130, 128 + 15), err
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert (await store.view(CODEX)).run.value == "canceled"


# -- Codex's own PermissionRequest hook (hooks.json) -------------------------------------
# Codex sends one JSON object on stdin, as its hooks engine builds it (openai/codex
# `codex-rs/hooks`): a shell or network approval as `tool_name: Bash`, the command in
# `tool_input.command`, the justification in `tool_input.description`.
CODEX_SESSION = "019a7c3e-codex-thread"
CODEX_OWNER = Owner("main", CODEX_SESSION)
CODEX_BASH = {
    "session_id": CODEX_SESSION, "turn_id": "turn-1", "cwd": "/work/shop", "hook_event_name": "PermissionRequest",
    "model": "gpt-5-codex", "permission_mode": "default", "tool_name": "Bash",
    "tool_input": {"command": "git push --force", "description": "Push the rewritten branch"},
}


@pytest.mark.parametrize(("press", "decision"), [
    ("Allow", {"behavior": "allow"}),
    ("Deny", {"behavior": "deny", "message": "Denied from Telegram by Ana"}),
])
async def test_codex_s_own_permission_request_is_answered_from_chat(
    hook: Start, store: CardStore, press: str, decision: dict[str, Any]
) -> None:
    running = await hook("codex", CODEX_BASH, indent=2 if press == "Deny" else None)  # one line, or several
    [ask] = await open_asks(store, owner=CODEX_OWNER)
    assert ask.source == "codex" and ask.prompt == "Bash: git push --force" and ask.detail == "Push the rewritten branch"
    await store.asks.answer(CODEX_OWNER, ask.ask_id, ANA, options=[press])
    assert await running.printed() == {"hookSpecificOutput": {"hookEventName": "PermissionRequest",
                                                              "decision": decision}}


async def test_codex_s_own_permission_request_after_a_stop_is_denied_without_interrupt(
    hook: Start, store: CardStore
) -> None:
    # Codex refuses a decision carrying `interrupt`: a Stop is a plain deny saying who stopped.
    await store.start_run(CODEX_OWNER, "turn-1", stoppable=True)
    running = await hook("codex", CODEX_BASH)
    await open_asks(store, owner=CODEX_OWNER)
    outcome, _ = await store.asks.stop(CODEX_OWNER, ANA)
    assert outcome == "ok"
    printed = await running.printed()
    decision = printed["hookSpecificOutput"]["decision"]
    assert decision["behavior"] == "deny" and "Ana" in decision["message"] and "interrupt" not in decision
