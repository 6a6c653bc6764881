"""`progresscast hook claude-code|codex|gemini` fed whole agent sessions.

The sessions (tests/agent_fixtures.py) are shaped like each agent's documented
payloads. Each event goes through the real command line into a real Redis; after
each one the test reads the owner's view (card, activity, run) back from the store.
"""

from __future__ import annotations

import asyncio
import io
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import agent_fixtures as fx
from conftest import PrivateRedis, free_port
from progresscast.cli import main
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.timing import Usage
from progresscast.model.view import RunState, View
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.connections import HOOK_ANSWER_TIMEOUT, connect

Plan = list[tuple[str, str]]
STALL_SECONDS = 0.8
"""A stall of the store a hook waits out: longer than a quarter of a second, well
under the answer timeout."""


def view_of(url: str, owner: Owner) -> View:
    async def read() -> View:
        redis = connect(url)
        try:
            return await CardStore(redis).view(owner)
        finally:
            await redis.aclose()

    return asyncio.run(read())


def plan_of(view: View) -> Plan | None:
    return [(s.step, s.status.value) for s in view.card.plan or []] if view.card else None


def put_note(url: str, owner: Owner, markdown: str) -> None:
    async def put() -> None:
        redis = connect(url)
        try:
            await CardStore(redis).put(owner, CardInput(markdown=markdown))
        finally:
            await redis.aclose()

    asyncio.run(put())


class Hook:
    """Runs `progresscast hook …` in this process (stdin, stdout and stderr captured)."""

    def __init__(self, url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
        self.url = url
        self.monkeypatch = monkeypatch
        self.capsys = capsys

    def __call__(self, harness: str, stdin: bytes | dict[str, Any], *args: str) -> tuple[int, str, str]:
        data = stdin if isinstance(stdin, bytes) else json.dumps(stdin).encode()
        self.monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
        self.capsys.readouterr()
        with pytest.raises(SystemExit) as exited:
            main(["hook", harness, "--redis", self.url, *args])
        out, err = self.capsys.readouterr()
        return int(exited.value.code or 0), out, err


@pytest.fixture
def hook(redis_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Hook:
    return Hook(redis_url, monkeypatch, capsys)


# -- Claude Code ----------------------------------------------------------------------

CLAUDE = Owner("main", fx.CLAUDE_SESSION)
R, F, T = "Reproduce the checkout bug", "Fix the rounding in totals", "Add a regression test"


@pytest.mark.backends
def test_a_claude_code_session_with_todowrite(hook: Hook, redis_url: str) -> None:
    expected: list[tuple[Plan | None, RunState, str | None]] = [
        (None, RunState.active, None),
        ([(R, "in_progress"), (F, "pending"), (T, "pending")], RunState.active, "Reproducing the checkout bug"),
        ([(R, "completed"), (F, "in_progress"), (T, "pending")], RunState.active, "Fixing the rounding in totals"),
        ([(R, "completed"), (F, "completed"), (T, "completed")], RunState.active, None),
        ([(R, "completed"), (F, "completed"), (T, "completed")], RunState.completed, None),
    ]
    for event, (plan, run, headline) in zip(fx.CLAUDE_TODOWRITE_SESSION, expected, strict=True):
        status, out, err = hook("claude-code", event)
        assert (status, out, err) == (0, "", ""), event["hook_event_name"]
        view = view_of(redis_url, CLAUDE)
        assert (plan_of(view), view.run, view.activity.headline) == (plan, run, headline), event["hook_event_name"]
    assert view.card is not None and view.card.revision == 3
    # The run ended after the last write: nothing is left showing as in progress.
    assert view.run is RunState.completed


def test_todowrite_keeps_the_note_and_names_a_session_given_on_the_command_line(hook: Hook, redis_url: str) -> None:
    owner = Owner("main", "shop")
    put_note(redis_url, owner, "Written by the agent's progress_card tool")
    assert hook("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1], "--session", "shop")[0] == 0
    view = view_of(redis_url, owner)
    assert view.card is not None and view.card.markdown == "Written by the agent's progress_card tool"
    assert plan_of(view) == [(R, "in_progress"), (F, "pending"), (T, "pending")]
    assert view_of(redis_url, CLAUDE).card is None


@pytest.mark.parametrize(
    ("harness", "start", "end"),
    [
        ("claude-code", fx.CLAUDE_TODOWRITE_SESSION[0], fx.claude("SessionEnd", reason="logout")),
        ("gemini", fx.GEMINI_SESSION[1], fx.GEMINI_SESSION[-1]),
    ],
)
def test_a_session_that_ends_mid_turn_cancels_the_run(
    hook: Hook, redis_url: str, harness: str, start: dict[str, Any], end: dict[str, Any]
) -> None:
    owner = CLAUDE if harness == "claude-code" else GEMINI
    hook(harness, start)
    assert view_of(redis_url, owner).run is RunState.active
    hook(harness, end)
    assert view_of(redis_url, owner).run is RunState.canceled


def test_a_todo_list_that_breaks_the_card_rules_is_cut_to_fit(hook: Hook, redis_url: str) -> None:
    todos = [fx.todo("é" * 600, "in_progress", "Working")] + [
        fx.todo(f"Item {i}", "in_progress" if i == 3 else "pending", f"Doing {i}") for i in range(2, 61)
    ]
    assert hook("claude-code", fx.todo_write(todos, [], 9)) == (0, "", "")
    plan = plan_of(view_of(redis_url, CLAUDE))
    assert plan is not None and len(plan) == 20
    assert plan[0] == ("é" * 119 + "…", "in_progress")
    assert plan[2] == ("Item 3", "pending")  # a second step in progress waits


def test_a_todo_list_of_the_wrong_shape_changes_nothing_and_says_why(hook: Hook, redis_url: str) -> None:
    hook("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1])
    before = view_of(redis_url, CLAUDE)
    bad = fx.todo_write([fx.todo("A", "started", "Starting")], [], 8)
    status, out, err = hook("claude-code", bad)
    assert (status, out) == (0, "")
    assert "tool_input.todos[0].status: must be one of pending, in_progress, completed" in err
    assert view_of(redis_url, CLAUDE).card == before.card


@pytest.mark.backends
def test_a_claude_code_session_with_the_task_tools(hook: Hook, redis_url: str) -> None:
    inv, P, D = "Inventory the settings forms", "Port the forms", "Delete the old library"
    expected: list[tuple[Plan | None, RunState, str | None]] = [
        (None, RunState.active, None),
        ([(inv, "pending")], RunState.active, None),
        ([(inv, "pending"), (P, "pending")], RunState.active, None),
        ([(inv, "pending"), (P, "pending"), (D, "pending")], RunState.active, None),
        ([(inv, "in_progress"), (P, "pending"), (D, "pending")], RunState.active, "Inventorying the settings forms"),
        ([(inv, "completed"), (P, "pending"), (D, "pending")], RunState.active, None),
        ([(inv, "completed"), (P, "in_progress"), (D, "pending")], RunState.active, "Porting the forms"),
        ([(inv, "completed"), (P, "in_progress")], RunState.active, "Porting the forms"),
        ([(inv, "completed"), (P, "in_progress")], RunState.active, "Porting the forms"),  # TaskList reads only
        ([(inv, "completed"), (P, "in_progress")], RunState.completed, "Porting the forms"),
        ([(inv, "completed"), (P, "in_progress")], RunState.completed, "Porting the forms"),
    ]
    for event, (plan, run, headline) in zip(fx.CLAUDE_TASKS_SESSION, expected, strict=True):
        status, out, err = hook("claude-code", event)
        name = f"{event['hook_event_name']} {event.get('tool_name', '')} {event.get('tool_input', '')}"
        assert (status, out, err) == (0, "", ""), name
        view = view_of(redis_url, CLAUDE)
        assert (plan_of(view), view.run, view.activity.headline) == (plan, run, headline), name
    # The task list lives under the owner's own keys, so it moves with the owner's shard.
    assert keys.hook_tasks(CLAUDE).startswith(f"{keys.PREFIX}:{keys.owner_tag(CLAUDE)}:")


def test_task_updates_that_cannot_apply_change_nothing(hook: Hook, redis_url: str) -> None:
    hook("claude-code", fx.task_create(1, "Only task", "Doing the only task"))
    before = view_of(redis_url, CLAUDE).card
    refused = fx.task_update(1, 1, status="completed")
    refused["tool_response"]["success"] = False
    for event in (fx.task_update(9, 2, status="completed"), refused):
        assert hook("claude-code", event) == (0, "", "")
    status, _, err = hook("claude-code", fx.task_update(1, 3, status="finished"))
    assert status == 0 and "TaskUpdate: tool_input.status must be one of" in err
    assert view_of(redis_url, CLAUDE).card == before


def test_task_ids_come_from_the_answer_text_too(hook: Hook, redis_url: str) -> None:
    event = fx.task_create(4, "From text", "Reading text")
    event["tool_response"] = "Task #4 created successfully: From text"
    hook("claude-code", event)
    hook("claude-code", fx.task_update(4, 1, status="in_progress"))
    assert plan_of(view_of(redis_url, CLAUDE)) == [("From text", "in_progress")]


# -- Codex ------------------------------------------------------------------------------

CODEX = Owner("main", fx.CODEX_THREAD)
CODEX_STEPS = ["Read the failing test", "Patch the parser", "Run the suite"]


def test_claude_code_stop_sums_the_runs_tokens_from_its_transcript(hook: Hook, redis_url: str, tmp_path: Path) -> None:
    def line(kind: str, at: str, message: dict[str, Any]) -> str:
        return json.dumps({"type": kind, "timestamp": at, "message": message}) + "\n"

    def usage(i: int, o: int) -> dict[str, int]:
        return {"input_tokens": i, "cache_creation_input_tokens": 100, "cache_read_input_tokens": 1000, "output_tokens": o}

    now = datetime.now(UTC)
    later = (now + timedelta(seconds=5)).isoformat().replace("+00:00", "Z")
    transcript = tmp_path / "session.jsonl"
    transcript.write_text(
        # an earlier turn: not this run's
        line("assistant", "2020-01-01T00:00:00Z", {"id": "msg_old", "role": "assistant", "usage": usage(9, 9)})
        + line("user", later, {"role": "user", "content": "fix it"})
        # one message written as two lines (one per content block): counted once, as last written
        + line("assistant", later, {"id": "msg_1", "role": "assistant", "usage": usage(10, 1)})
        + line("assistant", later, {"id": "msg_1", "role": "assistant", "usage": usage(10, 50)})
        + line("assistant", later, {"id": "msg_2", "role": "assistant", "usage": usage(20, 30)})
        + "not json\n",
        encoding="utf-8",
    )
    events = [fx.claude("UserPromptSubmit", prompt="fix it"), fx.claude("Stop", stop_hook_active=False)]
    for event in events:
        event["transcript_path"] = str(transcript)
        assert hook("claude-code", event)[0] == 0
    view = view_of(redis_url, CLAUDE)
    assert view.run is RunState.completed
    # input counts the cached prompt too (2 × (10|20 + 100 + 1000)); the transcript has no price
    assert view.usage == Usage(input_tokens=2230, output_tokens=80)


def codex_lines(events: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(e) + "\n" for e in events).encode()


def test_a_codex_exec_json_transcript_on_stdin(hook: Hook, redis_url: str) -> None:
    seen: list[tuple[Plan | None, RunState]] = []
    for n in range(1, len(fx.CODEX_TRANSCRIPT) + 1):
        # Replay a growing prefix each time into a fresh session key, so every state the
        # stream passes through is observed (the hook reads the stream to its end).
        session = f"codex-prefix-{n}"
        assert hook("codex", codex_lines(fx.CODEX_TRANSCRIPT[:n]), "--session", session)[0] == 0
        view = view_of(redis_url, Owner("main", session))
        seen.append((plan_of(view), view.run))
    a, b, c = CODEX_STEPS
    assert seen[3] == ([(a, "in_progress"), (b, "pending"), (c, "pending")], RunState.canceled)
    assert seen[6][0] == [(a, "completed"), (b, "in_progress"), (c, "pending")]
    assert seen[-1] == ([(a, "completed"), (b, "completed"), (c, "completed")], RunState.completed)

    status, out, err = hook("codex", codex_lines(fx.CODEX_TRANSCRIPT))
    assert (status, out, err) == (0, "", "")
    view = view_of(redis_url, CODEX)  # the session is the thread id
    assert plan_of(view) == [(a, "completed"), (b, "completed"), (c, "completed")]
    assert view.run is RunState.completed
    assert view.activity.answer == "Patched the parser; the suite passes."
    assert view.activity.tools == ("$ bash -lc 'pytest -x'",)
    assert view.card is not None and view.card.revision == 4
    assert view.usage == Usage(input_tokens=24763, output_tokens=122)  # turn.completed's tokens, no cost


def test_a_codex_line_past_the_bound_is_said_and_skipped_and_the_rest_applies(hook: Hook, redis_url: str) -> None:
    lines = codex_lines(fx.CODEX_TRANSCRIPT).split(b"\n")
    huge = b'{"type":"item.completed","item":{"type":"agent_message","text":"' + b"x" * (16 << 20) + b'"}}'
    stream = b"\n".join([*lines[:2], huge, *lines[2:]])
    status, out, err = hook("codex", stream)
    assert (status, out) == (0, "") and err.count("a line of more than 16,777,216 bytes; ignored") == 1, err[:300]
    view = view_of(redis_url, CODEX)
    assert view.run is RunState.completed and view.activity.answer == "Patched the parser; the suite passes."


def test_a_failed_codex_turn_ends_the_run_failed(hook: Hook, redis_url: str) -> None:
    events = [*fx.CODEX_TRANSCRIPT[:4], {"type": "turn.failed", "error": {"message": "stream disconnected"}}]
    assert hook("codex", codex_lines(events))[0] == 0
    assert view_of(redis_url, CODEX).run is RunState.failed


def test_codex_wrapped_passes_output_and_exit_status_through(redis_url: str, tmp_path: Path) -> None:
    transcript = tmp_path / "transcript.jsonl"
    events = fx.CODEX_TRANSCRIPT[:-1]  # no turn.completed: codex died mid-turn
    transcript.write_bytes(codex_lines(events) + b"not json: a banner line\n")
    fake_codex = tmp_path / "codex"
    fake_codex.write_text(
        f"#!{sys.executable}\nimport sys\nsys.stdout.write(open({str(transcript)!r}).read())\n"
        "sys.stderr.write('codex: out of credits\\n')\nsys.exit(3)\n"
    )
    fake_codex.chmod(0o755)
    done = subprocess.run(
        [sys.executable, "-m", "progresscast.cli", "hook", "codex", "--redis", redis_url, "--",
         str(fake_codex), "exec", "--json", "fix it"],
        capture_output=True, timeout=60,
    )
    assert done.returncode == 3
    assert done.stdout == transcript.read_bytes()
    assert done.stderr.decode() == "codex: out of credits\n"
    view = view_of(redis_url, CODEX)
    assert view.run is RunState.failed
    assert plan_of(view) == [(s, "completed") for s in CODEX_STEPS]


# -- Gemini CLI --------------------------------------------------------------------------

GEMINI = Owner("main", fx.GEMINI_SESSION_ID)


def test_a_gemini_cli_session(hook: Hook, redis_url: str) -> None:
    theme, style, port = "Add a theme setting", "Style the screen", "Port the old theme engine"
    first = [(theme, "in_progress"), (style, "pending"), (port, "pending")]
    second = [(theme, "completed"), (style, "in_progress"), (port, "skipped")]
    expected: list[tuple[Plan | None, RunState]] = [
        (None, RunState.none),
        (None, RunState.active),
        (first, RunState.active),
        (first, RunState.active),
        (second, RunState.active),
        (second, RunState.completed),
        (second, RunState.completed),
    ]
    for event, (plan, run) in zip(fx.GEMINI_SESSION, expected, strict=True):
        status, out, err = hook("gemini", event)
        assert (status, out, err) == (0, "{}\n", ""), event["hook_event_name"]
        view = view_of(redis_url, GEMINI)
        assert (plan_of(view), view.run) == (plan, run), event["hook_event_name"]
    assert view.activity.answer == "Dark mode is in: a theme setting and styles."


def test_gemini_prints_only_the_json_even_for_bad_input(hook: Hook) -> None:
    too_big = b" " * (16 << 20) + b"{}"  # an endless stdin ends at the bound, as this does
    for stdin, why in [
        (b"{not json", "not a JSON hook event"), (b"[1]", "must be a JSON object"), (too_big, "more than 16,777,216 bytes"),
    ]:
        status, out, err = hook("gemini", stdin)
        assert (status, out) == (0, "{}\n") and why in err


# -- never failing the agent ------------------------------------------------------------------



@pytest.mark.parametrize("harness", ["claude-code", "gemini"])
def test_with_the_store_down_the_hook_exits_0_and_says_why(harness: str) -> None:
    event = fx.CLAUDE_TODOWRITE_SESSION[1] if harness == "claude-code" else fx.GEMINI_SESSION[2]
    done = subprocess.run(
        [sys.executable, "-m", "progresscast.cli", "hook", harness, "--redis", f"redis://127.0.0.1:{free_port()}"],
        input=json.dumps(event).encode(), capture_output=True, timeout=60,
    )
    assert done.returncode == 0
    assert b"the card store is not answering" in done.stderr and b"nothing was recorded" in done.stderr
    assert done.stdout == (b"{}\n" if harness == "gemini" else b"")


def test_a_store_that_is_down_is_given_up_on_within_a_second_and_a_silent_one_after_the_answer_timeout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Timed in this process, so the interpreter's own start (which a loaded machine can
    # stretch past a second by itself) is not counted: only what the hook does.
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # connections complete in the kernel; nothing ever answers
        for url, why, within in [
            (f"redis://127.0.0.1:{free_port()}", "Connect call failed", 1.0),
            (f"redis://127.0.0.1:{silent.getsockname()[1]}", "Timeout", HOOK_ANSWER_TIMEOUT + 1.0),
        ]:
            hook = Hook(url, monkeypatch, capsys)
            started = time.monotonic()
            status, out, err = hook("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1])
            elapsed = time.monotonic() - started
            assert (status, out) == (0, "")
            assert elapsed < within, f"the hook took {elapsed:.2f} s"
            assert "the card store is not answering" in err and why in err, err


def test_a_store_that_stalls_for_a_moment_is_waited_for_and_the_write_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A store that stops answering for a moment (a busy machine, a slow fsync of its
    append-only file) while the hook writes: the hook waits, and its write is kept."""
    store = PrivateRedis(tmp_path)
    hook = Hook(store.url, monkeypatch, capsys)
    stall = STALL_SECONDS
    thaw = threading.Timer(stall, store.proc.send_signal, (signal.SIGCONT,))
    try:
        store.proc.send_signal(signal.SIGSTOP)
        thaw.start()
        started = time.monotonic()
        status, out, err = hook("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1])
        elapsed = time.monotonic() - started
        assert (status, out, err) == (0, "", "")
        assert elapsed >= stall * 0.9, f"the store was frozen {stall} s, yet the hook took {elapsed:.2f} s"
        assert plan_of(view_of(store.url, CLAUDE)) == [(R, "in_progress"), (F, "pending"), (T, "pending")]
    finally:
        thaw.cancel()
        store.kill()


def test_hook_usage_mistakes_never_exit_2(hook: Hook) -> None:
    status, _, err = hook("claude-code", fx.CLAUDE_TODOWRITE_SESSION[0], "--bogus")
    assert status == 0 and "unknown option --bogus" in err
    status, _, err = hook("claude-code", fx.CLAUDE_TODOWRITE_SESSION[0], "--session", "has space")
    assert status == 0 and "--session: must not contain spaces" in err
    # What to mend, named: the event's session id (or --session), or its missing name.
    status, _, err = hook("claude-code", {"hook_event_name": "UserPromptSubmit"})
    assert status == 0 and "session_id: missing from the event (or pass --session KEY)" in err
    status, _, err = hook("claude-code", {"hook_event_name": "UserPromptSubmit", "session_id": "has space"})
    assert status == 0 and "session_id: must not contain spaces" in err
    status, _, err = hook("claude-code", {"session_id": "abc"})
    assert status == 0 and err.endswith("stdin: the hook event has no hook_event_name; ignored\n")
    # Gemini CLI reads a JSON object from every hook: a mistyped option still prints `{}`.
    for mistake in (["--bogus"], ["--ask-tools", "("]):
        status, out, err = hook("gemini", {}, *mistake)
        assert (status, out) == (0, "{}\n") and err.count("\n") == 1, (mistake, out, err)
