"""argparse with one-line errors: what the command line and the hook command share.

Imports only the standard library: a hook call parses its command line with it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from .agents.hooks.client import GLOBAL_OPTIONS


class UsageError(Exception):
    """Bad input from the user: reported on one line, exit status 2."""


def fail(message: str) -> NoReturn:
    print(f"progresscast: {message}", file=sys.stderr)
    raise SystemExit(2)


OPTIONS: set[str] = set()
"""Every option string of every command, for "did you mean" on a misspelt one."""


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr like every other bad input."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        OPTIONS.update(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            first = message.removeprefix("unrecognized arguments: ").split()[0]
            if first.startswith("-"):
                import difflib

                name = first.split("=", 1)[0]
                close = difflib.get_close_matches(name, sorted(OPTIONS), n=1, cutoff=0.6)
                hint = f" — did you mean {close[0]}?" if close else ""
                fail(f"unknown option {name}{hint} (see '{self.prog} --help')")
        fail(f"{message} (see '{self.prog} --help')")


def example(*lines: str) -> str:
    return "example:\n" + "\n".join(f"  {line}" for line in lines)


def version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("progresscast")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


class VersionAction(argparse.Action):
    """`--version`, looking the version up only when asked (a search of the installed
    packages every call would cost each hook call)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        print(f"progresscast {version()}")
        parser.exit()


def program() -> tuple[Parser, Parser, Any]:
    """`progresscast` with its global options: the parser, the options every command
    repeats (`common`), and the command list to add commands to."""
    redis_option, config_option = GLOBAL_OPTIONS  # what a hook call skips to find `hook`
    # SUPPRESS: a subcommand that does not repeat --redis/--config must not reset the
    # value given before it (`progresscast --redis URL card get …`).
    common = Parser(add_help=False)
    common.add_argument(
        redis_option, metavar="URL", default=argparse.SUPPRESS,
        help="Redis URL, e.g. redis://127.0.0.1:6379/0 (default: $PROGRESSCAST_REDIS_URL, the config's store.url, "
        "else the embedded Redis under $PROGRESSCAST_HOME)",
    )
    common.add_argument(
        config_option, metavar="FILE", default=argparse.SUPPRESS,
        help="TOML config, e.g. config/progresscast.toml (default: $PROGRESSCAST_CONFIG, else built-in defaults)",
    )
    parser = Parser(
        prog="progresscast",
        parents=[common],
        description="Live progress cards of AI agents: in your chat, on the web, as text. Docs: docs/README.md",
        epilog=example("progresscast card put --session ticket-4821 < examples/plan.json", "progresscast serve"),
    )
    parser.add_argument("--version", action=VersionAction, help="show program's version number and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=Parser, metavar="COMMAND")
    return parser, common, commands


def parse(parser: argparse.ArgumentParser, argv: list[str], wrapped: list[str]) -> argparse.Namespace:
    """Parse `argv`; `wrapped` is what followed `--` (only `hook` takes it)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # A hook must never block its agent (exit 2 blocks Claude Code and Gemini CLI).
        if exc.code == 2 and "hook" in argv:
            raise SystemExit(0) from None
        raise
    if wrapped and args.command != "hook":
        fail(f"unexpected arguments after --: {' '.join(wrapped)}")
    args.wrapped = wrapped
    args.redis = getattr(args, "redis", None)
    args.config = getattr(args, "config", None)
    return args
