"""`progresscast hook …`: its parser and its run, for the command line and the warm
hook server alike (which runs each call it takes in its own process)."""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from typing import Any

from ...arguments import example, parse, program, whole
from .client import DEFAULT_WAIT, HARNESSES, HOOK_OPTIONS

MAX_WAIT = 24 * 3600


def _pattern(raw: str) -> re.Pattern[str]:
    try:
        return re.compile(raw)
    except re.error as exc:
        raise argparse.ArgumentTypeError(f"must be a regular expression ({exc})") from None


def add_hook(commands: Any, common: argparse.ArgumentParser) -> None:
    hook = commands.add_parser(
        "hook",
        help="an agent's hook: its event JSON on stdin (never fails the agent)",
        description="Run as an agent's hook (Claude Code, Codex, Gemini CLI): read one event's JSON on stdin and "
        "update the session's card; it never fails the agent.",
        usage=f"progresscast hook [-h] [--redis URL] [--config FILE] {'|'.join(HARNESSES)} [--session KEY] "
        "[--agent ID] [--wait SECONDS] "
        "[--ask-tools REGEX] "
        "[-- codex exec --json …]",
        parents=[common],
        epilog=example("progresscast hook claude-code < event.json"),
    )
    session, agent, wait, ask_tools = HOOK_OPTIONS  # the warm hook server's client skips their values too
    hook.add_argument("harness", choices=HARNESSES, help="whose events these are")
    hook.add_argument(session, metavar="KEY", help="session key (default: the agent's own session id)")
    hook.add_argument(agent, metavar="ID", help="agent id (default: the configured default agent)")
    hook.add_argument(
        wait, metavar="SECONDS", type=whole(MAX_WAIT, "a whole number of seconds"), default=DEFAULT_WAIT,
        help=f"how long a permission request or question waits for an answer from chat (default {DEFAULT_WAIT}; "
        "keep it under the hook's timeout in the agent's settings)",
    )
    hook.add_argument(
        ask_tools, metavar="REGEX", type=_pattern,
        help="gemini: a BeforeTool call of a tool whose whole name matches is asked in chat (Allow / Deny)",
    )


def hook_parser() -> argparse.ArgumentParser:
    """The command line with no command besides `hook`: what a hook call parses,
    without building the rest."""
    parser, common, commands = program()
    add_hook(commands, common)
    return parser


def exit_status(code: object) -> int:
    """What the interpreter makes of `SystemExit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def hook_status(argv: list[str], wrapped: Sequence[str] = ()) -> int:
    """Run the hook `progresscast <argv> [-- <wrapped>]` in this process: its exit status."""
    from .runner import run_hook

    try:
        return run_hook(parse(hook_parser(), argv, list(wrapped)))
    except SystemExit as exc:
        return exit_status(exc.code)
