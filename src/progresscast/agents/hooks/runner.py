"""One hook call in this process: the harness's handler on the parsed command line.

What the warm hook server (server.py) runs for each call it takes, and what a hook call
runs itself when no server answers.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from typing import Any

from ...arguments import answer_nothing, read_bounded
from ...stopping import run_stoppable
from .context import HookContext
from .wire import MAX_EVENT_BYTES


def _event(ctx: HookContext) -> dict[str, Any] | None:
    raw = read_bounded("-", MAX_EVENT_BYTES)
    if raw is None:
        ctx.warn(f"stdin: a hook event of more than {MAX_EVENT_BYTES:,} bytes; ignored")
        return None
    try:
        event = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        ctx.warn(f"stdin: not a JSON hook event ({exc.__class__.__name__}: {exc}); ignored")
        return None
    if not isinstance(event, dict):
        ctx.warn("stdin: the hook event must be a JSON object; ignored")
        return None
    if not isinstance(event.get("hook_event_name"), str):  # one it does not show is ignored in silence
        ctx.warn("stdin: the hook event has no hook_event_name; ignored")
        return None
    return event


async def _one_event(ctx: HookContext) -> dict[str, Any] | None:
    """Apply one event: what the hook prints for its agent (None: nothing)."""
    event = _event(ctx)
    if event is None:
        return None
    if ctx.harness == "claude-code":
        from .claude_code import handle
    else:
        from .gemini import handle
    return await handle(ctx, event)


async def _run(ctx: HookContext, wrapped: list[str], said: list[dict[str, Any]]) -> int:
    try:
        if ctx.harness == "codex":
            from . import codex

            return await codex.run(ctx, wrapped, said)
        output = await _one_event(ctx)
        if output is not None:
            said.append(output)
        return 0
    finally:
        await ctx.close()


def run_hook(args: argparse.Namespace) -> int:
    """Run one hook; the exit status (0, or a wrapped command's own)."""
    ctx = HookContext(args.harness, args)
    wrapped = list(args.wrapped or [])
    if wrapped and args.harness != "codex":
        ctx.warn(f"only the codex hook runs a command; ignoring {' '.join(wrapped)}")
        wrapped = []
    status = 0
    said: list[dict[str, Any]] = []  # the hook's one JSON answer to its agent, if any
    try:
        # An agent that gives up on a hook waiting for an answer (its own prompt was
        # answered, its hook timeout passed) sends SIGTERM: the asks are withdrawn. A
        # wrapped codex is the command's to stop.
        status = (asyncio.run if wrapped else run_stoppable)(_run(ctx, wrapped, said))
    except KeyboardInterrupt:
        status = 130 if wrapped else 0
    except Exception as exc:  # whatever went wrong, the agent carries on
        ctx.warn(_why(exc))
    finally:
        if said:
            print(json.dumps(said[0], ensure_ascii=False), flush=True)
        else:
            answer_nothing(args.harness)
    return status


def _why(exc: Exception) -> str:
    from redis.exceptions import RedisError

    if isinstance(exc, RedisError):
        return f"the card store is not answering ({exc}); nothing was recorded"
    return f"{exc}; nothing was recorded"
