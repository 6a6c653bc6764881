"""argparse with one-line errors: what the command line and the hook command share.

Imports only the standard library: a hook call parses its command line with it.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from typing import Any, NoReturn

GLOBAL_OPTIONS = ("--redis", "--config")
"""The options before a command, each with a value (a hook call skips them to find `hook`)."""


class UsageError(Exception):
    """Bad input from the user: reported on one line, exit status 2."""


MAX_INPUT_BYTES = 1 << 20
"""What `card put` and `render` read of a file or stdin: far above the largest card."""


def read_bounded(name: str, limit: int) -> bytes | None:
    """File `name` (`-`: stdin) read to its end, or None when it holds more than `limit`
    bytes (no more than one past it is read: `/dev/zero` or a paste gone wrong ends
    here). OSError as opening or reading it raised it."""
    if name == "-":
        raw = sys.stdin.buffer.read(limit + 1)
    else:
        with open(name, "rb") as file:
            raw = file.read(limit + 1)
    return None if len(raw) > limit else raw


def read_input(name: str, limit: int = MAX_INPUT_BYTES) -> str:
    """The UTF-8 text of file `name` (`-`: stdin), at most `limit` bytes; UsageError
    naming it otherwise."""
    what = "stdin" if name == "-" else name
    try:
        raw = read_bounded(name, limit)
    except OSError as exc:
        raise UsageError(f"{what}: {exc.strerror}") from None
    if raw is None:
        raise UsageError(f"{what}: more than {limit:,} bytes")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"{what}: not UTF-8 text") from None


def fail(message: str) -> NoReturn:
    print(f"progresscast: {message}", file=sys.stderr)
    raise SystemExit(2)


def shown(text: object) -> str:
    """`text` safe to print on a terminal: control and other unprintable characters (a
    newline, a tab, an escape sequence) and backslashes written as Python escapes, so a
    value read from outside (a chat id a platform signed) cannot forge a line, a column or
    a colour in the operator's terminal."""
    return "".join(
        ch if ch.isprintable() and ch != "\\" else ch.encode("unicode_escape").decode("ascii")
        for ch in str(text)
    )


def whole(most: int, what: str = "") -> Any:
    """An argparse type: a whole number from 1 to `most` (`what` it is, for the error)."""

    def parse(raw: str) -> int:
        try:
            value = int(raw)
        except ValueError:
            value = 0
        if not 1 <= value <= most:
            kind = f"{what} " if what else ""
            raise argparse.ArgumentTypeError(f"must be {kind}between 1 and {most}, not {raw!r}")
        return value

    return parse


class Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr like every other bad input."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)
        self.register("action", "parsers", _Commands)

    def required_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        """An option the command cannot go without: listed under "required" and shown
        without brackets in the usage line."""
        group = next((g for g in self._action_groups if g.title == "required"), None)
        group = group or self.add_argument_group("required")
        return group.add_argument(*args, required=True, **kwargs)

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        # A misspelt option is named before a required one is missed: `--sesion t-1`
        # says "did you mean --session?", not "--session is required".
        required = [a for a in self._actions if a.required and a.option_strings]
        self._deferred = required
        for action in required:
            action.required = False
        self._given = list(sys.argv[1:] if args is None else args)
        try:
            parsed, extras = super().parse_known_args(args, namespace)
        finally:
            self._required(True)
        if extras:  # said by the command they were given to, with its own options to suggest
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        for action in required:
            if getattr(parsed, action.dest, None) is None:
                fail(f"{action.option_strings[-1]} is required (see '{self.prog} --help')")
        return parsed, extras

    def _required(self, required: bool) -> bool:
        """Set the deferred required options' flag; whether it was set."""
        deferred: list[argparse.Action] = getattr(self, "_deferred", [])
        was = all(action.required for action in deferred)
        for action in deferred:
            action.required = required
        return was

    def format_usage(self) -> str:
        was = self._required(True)  # `--help` is answered while parsing, when they are deferred
        try:
            return super().format_usage()
        finally:
            self._required(was)

    def format_help(self) -> str:
        was = self._required(True)
        try:
            return super().format_help()
        finally:
            self._required(was)

    def error(self, message: str) -> NoReturn:
        # "argument --limit: must be …" reads "--limit: must be …", as every other mistake.
        message = message.removeprefix("argument ")
        unknown = None
        if message.startswith("unrecognized arguments: "):
            unknown = message.removeprefix("unrecognized arguments: ").split()[0]
        elif message.startswith("the following arguments are required: "):
            # `progresscast --verison`: the misspelt option, not the command it left out.
            unknown = next((a for a in getattr(self, "_given", ()) if self._unknown_option(a)), None)
        if unknown is not None and unknown.startswith("-"):
            name = unknown.split("=", 1)[0]
            fail(f"unknown option {name}{_hint(name, self._option_string_actions)} (see '{self.prog} --help')")
        choice = _INVALID_CHOICE.match(message)
        if choice is not None:
            choices = _QUOTED.findall(choice["choices"])
            message = f"{choice['what']}: invalid choice: {choice['given']}{_hint(choice['given'], choices)}"
            message += f" (choose from {choice['choices']})"
        fail(f"{message} (see '{self.prog} --help')")

    def _unknown_option(self, arg: str) -> bool:
        return arg.startswith("-") and arg != "--" and arg.split("=", 1)[0] not in self._option_string_actions


_INVALID_CHOICE = re.compile(
    r"(?P<what>\S+): invalid choice: (?P<given>'[^']*') \(choose from (?P<choices>.*)\)$", re.S
)
_QUOTED = re.compile(r"'([^']*)'")


def _hint(given: str, known: Iterable[str]) -> str:
    """" — did you mean X?" for the closest of `known` (this command's own), else ""."""
    import difflib

    close = difflib.get_close_matches(given.strip("'"), sorted(known), n=1, cutoff=0.6)
    if not close:
        return ""
    return f" — did you mean {close[0]}?" if given.startswith("-") else f" — did you mean '{close[0]}'?"


class _Commands(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Commands whose `--help` opens with a description: their one-line help, unless
    they give a longer one."""

    def add_parser(self, name: str, **kwargs: Any) -> Any:
        if kwargs.get("description") is None and kwargs.get("help"):
            text = str(kwargs["help"])
            kwargs["description"] = text[:1].upper() + text[1:] + "."
        return super().add_parser(name, **kwargs)


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


def answer_nothing(harness: str) -> None:
    """A hook that has nothing to tell its agent: Gemini CLI reads a JSON object from every
    hook's stdout, so its hook prints `{}`; the others print nothing."""
    if harness == "gemini":
        print("{}", flush=True)


def parse(parser: argparse.ArgumentParser, argv: list[str], wrapped: list[str]) -> argparse.Namespace:
    """Parse `argv`; `wrapped` is what followed `--` (only `hook` and `acp` take it)."""
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        # A hook must never block its agent (exit 2 blocks Claude Code and Gemini CLI).
        if exc.code == 2 and "hook" in argv:
            at = argv.index("hook") + 1
            answer_nothing(argv[at] if at < len(argv) else "")
            raise SystemExit(0) from None
        raise
    if wrapped and args.command not in ("hook", "acp"):
        fail(f"unexpected arguments after --: {' '.join(wrapped)}")
    args.wrapped = wrapped
    args.redis = getattr(args, "redis", None)
    args.config = getattr(args, "config", None)
    return args
