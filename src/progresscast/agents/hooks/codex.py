"""`progresscast hook codex`: the JSON lines of `codex exec --json`.

Read from stdin (`codex exec --json … | progresscast hook codex`), or from a command
it runs (`progresscast hook codex -- codex exec --json …`), whose output it passes on
line by line and whose exit status it exits with. The events, as Codex defines them
(openai/codex `codex-rs/exec/src/exec_events.rs`, docs/exec.md):

- `thread.started` `{thread_id}` names the session (unless `--session` is given);
- `turn.started` starts a run; `turn.completed` ends it completed (with its `usage`,
  the tokens in and out, shown on the line that ends the run), `turn.failed`
  `{error: {message}}` ends it failed;
- `item.started` / `item.updated` / `item.completed` carry an `item` `{id, type, …}`:
  a `todo_list` `{items: [{text, completed}]}` (the first item not completed is in
  progress) becomes the card's plan, an `agent_message` `{text}` the answer text, a
  `command_execution` `{command}` a tool line.

Writing never holds the output up: events queue for a writer task, and once the store
fails to answer the rest are dropped (said once on stderr).

Stdin holding one event of Codex's own hooks (`hooks.json`, a JSON object with
`hook_event_name`) is answered instead: a `PermissionRequest` is asked in chat
(`answer_hook`).

Wrapping the command, the hook can stop it: its runs start stoppable (chats offer Stop),
and a Stop pressed on the current run interrupts the command as Ctrl-C would (SIGINT,
to the command and every process it started: a launcher's agent is its child), then
ends them (SIGTERM) if the command is still running `STOP_GRACE` seconds later. Its run
ends canceled. Once the command has ended, what its leftovers still write is read for
`OUTPUT_AFTER_EXIT` seconds at most: a process it left behind holding the output open
does not keep the hook waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

from ...model.card import CardError, reject_lone_surrogates
from ...model.owners import Owner
from ...model.timing import Usage
from ...model.view import RunState
from ..harness_plan import map_checklist
from .context import HookContext
from .wire import MAX_EVENT_BYTES

_END = object()
STOP_POLL = 1.0
"""Seconds between looks at the run's Stop while the wrapped command runs."""
STOP_GRACE = 10.0
"""Seconds the command has to end after SIGINT before it is sent SIGTERM."""
OUTPUT_AFTER_EXIT = 2.0
"""Seconds the output is still read once the command has ended."""


class CodexSession:
    """What one `codex exec` stream has told so far."""

    def __init__(self, ctx: HookContext, *, stoppable: bool = False) -> None:
        self.ctx = ctx
        self.stoppable = stoppable
        """The hook runs the command, so it can act on a Stop pressed in chat."""
        self.stopped = False
        self.owner: Owner | None = None
        self.run_id: str | None = None
        self.answers: list[str] = []
        self.failed = False
        self._said_no_session = False

    async def apply(self, event: dict[str, Any]) -> None:
        kind = event.get("type")
        if self.owner is None and self.ctx.args.session:
            self.owner = self.ctx.owner(None)
        if kind == "thread.started":
            if self.owner is None:
                self.owner = self.ctx.owner(event.get("thread_id"), "thread_id")
            return
        if self.owner is None:
            if not self._said_no_session:
                self._said_no_session = True
                self.ctx.warn("events before thread.started and no --session: they are not shown")
            return
        if kind == "turn.started":
            self.run_id = await self.ctx.start_run(self.owner, stoppable=self.stoppable)
            self.answers = []
        elif kind in ("turn.completed", "turn.failed"):
            ended = RunState.failed if kind == "turn.failed" and not self.stopped else RunState.canceled
            usage = codex_usage(event.get("usage")) if kind == "turn.completed" else None
            await self._end(RunState.completed if kind == "turn.completed" else ended, usage)
        elif kind == "error":
            self.failed = True
        elif kind in ("item.started", "item.updated", "item.completed") and isinstance(event.get("item"), dict):
            await self._item(kind, event["item"])

    async def _item(self, kind: str, item: dict[str, Any]) -> None:
        assert self.owner is not None
        item_type = item.get("type")
        shown = {"agent_message": "text", "command_execution": "command"}.get(str(item_type))
        if shown is not None:
            reject_lone_surrogates(item.get(shown), f"item.{shown}")
        if item_type == "todo_list":
            # this event arrived now (the context lives as long as the wrapped command)
            plan = map_checklist(item.get("items"), field="item.items")
            await self.ctx.write_plan(self.owner, plan, arrived=time.monotonic())
        elif item_type == "agent_message" and kind == "item.completed" and isinstance(item.get("text"), str):
            self.answers.append(item["text"])
            await self.ctx.store.update_activity(self.owner, answer="\n\n".join(self.answers))
        elif item_type == "command_execution" and kind == "item.started" and isinstance(item.get("command"), str):
            await self.ctx.store.update_activity(self.owner, tool=f"$ {item['command']}")

    async def _end(self, state: RunState, usage: Usage | None = None) -> None:
        if self.owner is not None and self.run_id is not None:
            await self.ctx.store.end_run(self.owner, self.run_id, state, usage=usage)
        self.run_id = None

    async def finish(self, exit_status: int) -> None:
        """The stream ended: a turn still open did not complete."""
        if self.run_id is not None:
            failed = not self.stopped and (self.failed or exit_status != 0)
            await self._end(RunState.failed if failed else RunState.canceled)


def codex_usage(raw: Any) -> Usage | None:
    """`turn.completed`'s `usage` `{input_tokens, cached_input_tokens, output_tokens}` as
    the run's usage (tokens only: Codex says no price); None when it has none or is bad."""
    if not isinstance(raw, dict):
        return None
    pairs = (("inputTokens", raw.get("input_tokens")), ("outputTokens", raw.get("output_tokens")))
    tokens = {name: value for name, value in pairs if type(value) is int}
    try:
        usage = Usage.parse(tokens)
    except CardError:
        return None
    return None if usage.empty else usage


async def _relay(output: asyncio.StreamReader, queue: asyncio.Queue[Any]) -> None:
    """The command's output passed on as it comes, and queued for the session."""
    while line := await output.readline():
        sys.stdout.buffer.write(line)
        sys.stdout.buffer.flush()
        queue.put_nowait(line)


def _read_line() -> bytes | None:
    """stdin's next line (b"" at its end), or None for one of more than MAX_EVENT_BYTES,
    read to its end and dropped: what is read of a line is bounded, as of any event."""
    line = sys.stdin.buffer.readline(MAX_EVENT_BYTES + 1)
    if len(line) <= MAX_EVENT_BYTES or line.endswith(b"\n"):
        return line
    while (rest := sys.stdin.buffer.readline(1 << 16)) and not rest.endswith(b"\n"):
        pass
    return None


def _too_long(ctx: HookContext) -> None:
    ctx.warn(f"stdin: a line of more than {MAX_EVENT_BYTES:,} bytes; ignored")


async def _stdin_lines(ctx: HookContext) -> AsyncIterator[bytes]:
    while (line := await asyncio.to_thread(_read_line)) != b"":
        if line is None:
            _too_long(ctx)
            continue
        yield line


async def _writer(ctx: HookContext, session: CodexSession, queue: asyncio.Queue[Any]) -> bool:
    """Apply events in order; after the store fails once, drop the rest (said once).
    True when everything could be applied or ignored, False once the store failed."""
    down = False
    while (line := await queue.get()) is not _END:
        if down:
            continue
        try:
            event = json.loads(line)
        except ValueError:
            continue  # not an event line (codex run without --json, or a banner)
        if not isinstance(event, dict):
            continue
        try:
            await session.apply(event)
        except CardError as exc:
            if exc.field in ("thread_id", "--session", "--agent"):  # `HookContext.owner`: the whole run
                down = True
                ctx.warn(f"{exc}; nothing of this run is shown")
            else:
                ctx.warn(f"{event.get('type')}: {exc}; ignored")
        except Exception as exc:  # the store is down, or anything else: never fail codex
            down = True
            ctx.warn(f"{exc}; the rest of this run is not shown")
    return not down


async def _watch_stop(ctx: HookContext, session: CodexSession, process: asyncio.subprocess.Process) -> None:
    """Interrupt the command once Stop is pressed on its current run."""
    from ..asking import stopped_by

    while process.returncode is None:
        await asyncio.sleep(STOP_POLL)
        owner, run_id = session.owner, session.run_id
        if owner is None or run_id is None:
            continue
        try:
            mark = await ctx.store.asks.stop_mark(owner, run_id)
        except Exception:  # the store is down: the writer says so; the command runs on
            continue
        if mark is None:
            continue
        session.stopped = True
        ctx.warn(f"{stopped_by(mark)}; interrupting {process.pid}")
        started = _signal_tree(process.pid, signal.SIGINT)
        try:
            await asyncio.wait_for(asyncio.shield(process.wait()), STOP_GRACE)
        except TimeoutError:
            ctx.warn(f"still running {STOP_GRACE:g} s after the interrupt; terminating it")
            _signal_tree(process.pid, signal.SIGTERM, started)
        return


def _signal_tree(pid: int, sig: int, known: list[Any] | None = None) -> list[Any]:
    """Send `sig` to the process and every process it started (as Ctrl-C reaches a
    terminal's whole job); `known`: processes found at an earlier signal, still signalled
    if they outlived their parent (psutil tells a reused pid from the same process)."""
    import psutil

    found: list[Any] = list(known or ())
    try:
        root = psutil.Process(pid)
        found = [root, *root.children(recursive=True), *found]
    except psutil.Error:
        pass
    seen: set[int] = set()
    for proc in found:
        if proc.pid in seen:
            continue
        seen.add(proc.pid)
        with contextlib.suppress(psutil.Error):
            if proc.is_running():
                proc.send_signal(sig)
    return found


def _hook_event(line: bytes) -> dict[str, Any] | None:
    """The event of one of Codex's own hooks (a JSON object with `hook_event_name`), or
    None: a line of `codex exec --json` (those carry a `type`)."""
    try:
        event = json.loads(line)
    except ValueError:
        return None
    return event if isinstance(event, dict) and isinstance(event.get("hook_event_name"), str) else None


async def answer_hook(ctx: HookContext, event: dict[str, Any]) -> dict[str, Any] | None:
    """One event of Codex's own hooks (`hooks.json`): a `PermissionRequest` is asked in
    chat and answered with Codex's decision (Claude Code's shape, without `interrupt`,
    which Codex treats as a refusal of the whole answer: a Stop is a deny saying who)."""
    if event.get("hook_event_name") != "PermissionRequest":
        return None
    from .claude_asks import approve

    approval = await approve(ctx, ctx.owner(event.get("session_id")), event, "codex")
    if approval is None:
        return None
    decision = {"behavior": "allow"} if approval.allowed else {"behavior": "deny", "message": approval.why}
    return {"hookSpecificOutput": {"hookEventName": "PermissionRequest", "decision": decision}}


async def run(ctx: HookContext, command: list[str], said: list[dict[str, Any]]) -> int:
    """Follow the stream; the exit status is the wrapped command's (0 when reading stdin).
    Stdin holding one event of Codex's own hooks is answered instead (into `said`)."""
    first = b""
    if not command:
        read = await asyncio.to_thread(_read_line)
        if read is None:
            _too_long(ctx)
        else:
            first = read
        if first.strip() == b"{":  # an event written over several lines: never a JSON line
            first += await asyncio.to_thread(sys.stdin.buffer.read, MAX_EVENT_BYTES + 1 - len(first))
            if len(first) > MAX_EVENT_BYTES:
                ctx.warn(f"stdin: a hook event of more than {MAX_EVENT_BYTES:,} bytes; ignored")
                return 0
        if (event := _hook_event(first)) is not None:
            if (answer := await answer_hook(ctx, event)) is not None:
                said.append(answer)
            return 0
    session = CodexSession(ctx, stoppable=bool(command))
    queue: asyncio.Queue[Any] = asyncio.Queue()
    writer = asyncio.create_task(_writer(ctx, session, queue))
    status = 0
    healthy = False
    try:
        if command:
            try:
                process = await asyncio.create_subprocess_exec(*command, stdout=asyncio.subprocess.PIPE)
            except OSError as exc:
                ctx.warn(f"cannot run {command[0]}: {exc.strerror or exc}")
                return 127
            assert process.stdout is not None
            watch = asyncio.create_task(_watch_stop(ctx, session, process))
            relay = asyncio.create_task(_relay(process.stdout, queue))
            ended = asyncio.create_task(process.wait())
            try:
                await asyncio.wait((relay, ended), return_when=asyncio.FIRST_COMPLETED)
                if relay.done():
                    relay.result()  # passing the output on failed (our stdout closed): as before, the hook's error
                status = await ended
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(relay), OUTPUT_AFTER_EXIT)
            finally:
                watch.cancel()
                relay.cancel()
                ended.cancel()
            status = 128 - status if status < 0 else status  # killed by signal N: 128 + N, as a shell says
        else:
            if first:
                queue.put_nowait(first)
            async for line in _stdin_lines(ctx):
                queue.put_nowait(line)
    finally:
        queue.put_nowait(_END)
        healthy = await writer
    if healthy:
        try:
            await session.finish(status)
        except Exception as exc:
            ctx.warn(f"{exc}; the run could not be ended")
    return status
