"""The command line (docs/cli.md). Bad input: exit status 2, one line on stderr.

`progresscast hook …` runs on every event of an agent, as a new process each time, so
this module imports only the standard library at the top (not even asyncio): each
command imports what it uses, a one-event hook call first hands itself to the warm
hook server (hooks/client.py), and a hook builds only its own parser (`hook_status`).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import re
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from .config import Settings
    from .owners import Owner
    from .store import CardStore


class UsageError(Exception):
    """Bad input from the user: reported on one line, exit status 2."""


def _fail(message: str) -> NoReturn:
    print(f"progresscast: {message}", file=sys.stderr)
    raise SystemExit(2)


_OPTIONS: set[str] = set()
"""Every option string of every command, for "did you mean" on a misspelt one."""


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr like every other bad input."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", argparse.RawDescriptionHelpFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        _OPTIONS.update(action.option_strings)
        return action

    def error(self, message: str) -> NoReturn:
        if message.startswith("unrecognized arguments: "):
            first = message.removeprefix("unrecognized arguments: ").split()[0]
            if first.startswith("-"):
                import difflib

                name = first.split("=", 1)[0]
                close = difflib.get_close_matches(name, sorted(_OPTIONS), n=1, cutoff=0.6)
                hint = f" — did you mean {close[0]}?" if close else ""
                _fail(f"unknown option {name}{hint} (see '{self.prog} --help')")
        _fail(f"{message} (see '{self.prog} --help')")


def _example(*lines: str) -> str:
    return "example:\n" + "\n".join(f"  {line}" for line in lines)


def _fraction(raw: str) -> float:
    """A share from 0 to 1 (argparse turns the ValueError into a one-line usage error)."""
    value = float(raw)
    if not 0 <= value <= 1:
        raise ValueError(raw)
    return value


_fraction.__name__ = "share from 0 to 1"  # what argparse names in "invalid … value"


def _history_limit(raw: str) -> int:
    from .history import MAX_LIMIT

    value = int(raw)
    if not 1 <= value <= MAX_LIMIT:
        raise ValueError(raw)
    return value


_history_limit.__name__ = "number from 1 to 200"  # (history.MAX_LIMIT; a test checks)


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("progresscast")
    except PackageNotFoundError:  # a source tree that was never installed
        return "unknown"


class _VersionAction(argparse.Action):
    """`--version`, looking the version up only when asked (a search of the installed
    packages every call would cost each hook call)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> NoReturn:
        print(f"progresscast {_version()}")
        parser.exit()


def _parser(*, hook_only: bool = False) -> argparse.ArgumentParser:
    """The whole command line; with `hook_only`, the same but with no command besides
    `hook` (what a hook call parses, without building the rest)."""
    from .hooks.client import GLOBAL_OPTIONS

    redis_option, config_option = GLOBAL_OPTIONS  # what a hook call skips to find `hook`
    # SUPPRESS: a subcommand that does not repeat --redis/--config must not reset the
    # value given before it (`progresscast --redis URL card get …`).
    common = _Parser(add_help=False)
    common.add_argument(
        redis_option, metavar="URL", default=argparse.SUPPRESS,
        help="Redis URL, e.g. redis://127.0.0.1:6379/0 (default: $PROGRESSCAST_REDIS_URL, the config's store.url, "
        "else the embedded Redis under $PROGRESSCAST_HOME)",
    )
    common.add_argument(
        config_option, metavar="FILE", default=argparse.SUPPRESS,
        help="TOML config, e.g. config/progresscast.toml (default: $PROGRESSCAST_CONFIG, else built-in defaults)",
    )

    parser = _Parser(
        prog="progresscast",
        parents=[common],
        description="Live progress cards of AI agents: in Telegram, on the web, as text. Docs: docs/README.md",
        epilog=_example("progresscast card put --session ticket-4821 < examples/plan.json", "progresscast serve"),
    )
    parser.add_argument("--version", action=_VersionAction, help="show program's version number and exit")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser, metavar="COMMAND")
    if hook_only:
        _add_hook(commands, common)
        return parser
    _add_commands(commands, common)
    return parser


def _add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    """Every command, in the order `--help` lists them."""
    from .config import Mode
    from .history import DEFAULT_LIMIT as HISTORY_DEFAULT
    from .history import MAX_LIMIT as HISTORY_MAX

    card = commands.add_parser(
        "card", help="read and write progress cards", parents=[common],
        epilog=_example("progresscast card get --session ticket-4821"),
    )
    card_commands = card.add_subparsers(dest="card_command", required=True, parser_class=_Parser, metavar="ACTION")
    for name, text, example in [
        ("put", "write a card from JSON on stdin; prints the receipt",
         "progresscast card put --session ticket-4821 < examples/plan.json"),
        ("get", "print the card as JSON, or null", "progresscast card get --session ticket-4821 --agent research"),
        ("clear", "clear the card", "progresscast card clear --session ticket-4821"),
        ("reset", "clear the card at a boundary: writes admitted before it are refused",
         "progresscast card reset --session ticket-4821"),
        ("history", "print what each write changed, newest first",
         "progresscast card history --session ticket-4821 --limit 20 --format text"),
    ]:
        sub = card_commands.add_parser(name, help=text, description=text, parents=[common], epilog=_example(example))
        # Checked after parsing, so that a misspelt option is named as such first.
        sub.add_argument("--session", metavar="KEY", help="the session key, e.g. ticket-4821 (required)")
        sub.add_argument("--agent", metavar="ID", help="the agent owning the card (default: agents.default)")
        if name == "put":
            sub.add_argument(
                "--expected-revision", type=int, metavar="N",
                help="write only if the card's revision is still N (compare-and-set)",
            )
        if name == "history":
            sub.add_argument(
                "--limit", type=_history_limit, default=None, metavar="N",
                help=f"at most N entries (1 to {HISTORY_MAX}; default {HISTORY_DEFAULT})",
            )
            sub.add_argument(
                "--format", choices=["text", "json"], default=None,
                help="text: one line per entry in local time; json: a list of the entries "
                "(default: text at a terminal, else json)",
            )

    render = commands.add_parser(
        "render", help="preview what a channel shows", parents=[common],
        description="Preview what a channel would show for a card: as text at a terminal, else as JSON.",
        epilog=_example(
            "progresscast render examples/plan.json --channel telegram",
            "progresscast card get --session ticket-4821 | progresscast render - --channel text --format json",
        ),
    )
    render.add_argument(
        "card_file", metavar="CARD.json", help="a card (as `card get` prints) or a write's input; - for stdin"
    )
    render.add_argument(
        "--channel", choices=["telegram", "slack", "text", "web"], help="the channel to preview (required)"
    )
    render.add_argument(
        "--format", choices=["text", "json"], default=None,
        help="text: what a person sees; json: the payload the channel gets (default: text at a terminal, else json)",
    )
    render.add_argument(
        "--rich", action="store_true", help="Telegram rich message (checkboxes) instead of HTML; Slack plan display"
    )
    render.add_argument(
        "--mode", choices=[m.value for m in Mode], default=None,
        help="what the draft shows (default: the config's streaming.mode, else progress)",
    )
    render.add_argument("--max-lines", type=int, metavar="N", help="lines of the progress draft (default: 8)")
    render.add_argument(
        "--max-line-chars", type=int, metavar="N", help="longer lines are cut with a middle … (default: 120)"
    )
    render.add_argument("--paused", action="store_true", help="show unfinished steps as paused")

    from .a2a.commands import add_commands as add_a2a_commands

    add_a2a_commands(commands, common, _Parser)

    serve = commands.add_parser(
        "serve", help="gateway, web page, Telegram adapter, workers", parents=[common],
        description="Run the HTTP gateway and web page, and the Telegram adapter when a bot token is configured. "
        "Ctrl-C or SIGTERM stops it.",
        epilog=_example(
            "PROGRESSCAST_TOKEN=$(openssl rand -hex 16) progresscast serve --config config/progresscast.toml"
        ),
    )
    serve.set_defaults(serve=True)

    mcp = commands.add_parser(
        "mcp", help="MCP server with the progress_card and update_plan tools", parents=[common],
        epilog=_example("progresscast mcp --session ticket-4821", "progresscast mcp --http 127.0.0.1:8788"),
    )
    mcp.add_argument(
        "--session", metavar="KEY", help="session key (default: $PROGRESSCAST_SESSION, else this directory's name)"
    )
    mcp.add_argument("--agent", metavar="ID", help="agent id (default: the configured default agent)")
    mcp.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP on HOST:PORT instead of stdio")
    mcp.add_argument("--gateway", metavar="URL", help="write through this gateway's RPC instead of the store")
    mcp.add_argument("--token", metavar="T", help="gateway token (default: $PROGRESSCAST_TOKEN)")
    mcp.add_argument("--tools", metavar="NAMES", help="tools to offer (default: progress_card,update_plan)")

    _add_hook(commands, common)

    emulator = commands.add_parser(
        "emulator", help="run a service emulator on its own (no token needed)", parents=[common],
        epilog=_example("progresscast emulator telegram --port 8081"),
    )
    emulators = emulator.add_subparsers(dest="emulator", required=True, parser_class=_Parser, metavar="SERVICE")
    telegram = emulators.add_parser(
        "telegram", help="the Bot API emulator; type on stdin as a chat user", parents=[common],
        description="The Bot API emulator the tests use, on its own: point channels.telegram.apiBaseUrl at it, "
        "type lines as a user of one chat, and see what the chat shows.",
        epilog=_example("progresscast emulator telegram --port 8081 --chat 4821"),
    )
    telegram.add_argument("--port", type=int, default=0, metavar="N", help="port to listen on (default: a free one)")
    telegram.add_argument(
        "--chat", type=int, default=4821, metavar="ID", help="the chat you type in (default: 4821, a private chat)"
    )
    telegram.add_argument(
        "--fault-rate", type=_fraction, default=0.0, metavar="R",
        help="fail this share (0 to 1) of the calls that act on a chat with 5xx, timeouts and 429 (default: 0)",
    )
    telegram.add_argument(
        "--fault-seed", type=int, default=0, metavar="N", help="seed of the random faults (default: 0)"
    )

    demo = commands.add_parser(
        "demo", help="play the bundled example on the embedded store", parents=[common],
        epilog=_example("progresscast demo", "progresscast demo --serve --delay 2"),
    )
    demo.add_argument("--serve", action="store_true", help="keep serving after the example")
    demo.add_argument("--delay", type=float, default=None, metavar="SECONDS", help="seconds between steps")


def _add_hook(commands: Any, common: argparse.ArgumentParser) -> None:
    from .hooks.client import HARNESSES, HOOK_OPTIONS

    hook = commands.add_parser(
        "hook",
        help="an agent's hook: its event JSON on stdin (never fails the agent)",
        usage=f"progresscast hook {'|'.join(HARNESSES)} [--session KEY] [--agent ID] [-- codex exec --json …]",
        parents=[common],
        epilog=_example("progresscast hook claude-code < event.json"),
    )
    session, agent = HOOK_OPTIONS  # the warm hook server's client skips their values too
    hook.add_argument("harness", choices=HARNESSES, help="whose events these are")
    hook.add_argument(session, metavar="KEY", help="session key (default: the agent's own session id)")
    hook.add_argument(agent, metavar="ID", help="agent id (default: the configured default agent)")


_ARGUMENTS = {"card_file": "CARD.json"}
# DEL, the C1 controls and the line/paragraph separators are valid in JSON strings but
# act on a terminal: escape them (they can only occur inside strings).
_TERMINAL_CONTROLS = re.compile("[\x7f-\x9f\u2028\u2029]")


def _print_json(data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    print(_TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _settings(args: argparse.Namespace) -> Settings:
    from .config import ConfigError, load_settings

    try:
        return load_settings(args.config)
    except ConfigError as exc:
        _fail(str(exc))


def _owner(args: argparse.Namespace, settings: Settings) -> Owner:
    from .owners import resolve_owner

    return resolve_owner(
        args.session,
        args.agent,
        known_agents=settings.agents.known_set,
        default_agent=settings.agents.default,
    )


def _stdin() -> str:
    try:
        return sys.stdin.buffer.read().decode("utf-8")
    except UnicodeDecodeError:
        raise UsageError("stdin: not UTF-8 text") from None


def _read_json(text: str, what: str) -> Any:
    from .card import reject_lone_surrogates

    try:
        data = json.loads(text)
        reject_lone_surrogates(data)
        return data
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise UsageError(f"{what}: JSON nested too deeply") from None


async def _with_store(args: argparse.Namespace, settings: Settings, work: Callable[[CardStore], Awaitable[Any]]) -> Any:
    from .connections import connect, redis_url
    from .store import CardStore

    redis = connect(redis_url(args.redis, settings), settings)
    try:
        return await work(CardStore(redis))
    finally:
        await redis.aclose()


def _card_command(args: argparse.Namespace, settings: Settings) -> None:
    import asyncio

    from .card import CardInput

    owner = _owner(args, settings)
    if args.card_command == "put":
        if sys.stdin.isatty():
            print(
                "progresscast: waiting for the card's JSON on stdin (end it with Ctrl-D), "
                "e.g. card put --session KEY < examples/plan.json",
                file=sys.stderr,
            )
        card = CardInput.parse(_read_json(_stdin(), "stdin"))
        result = asyncio.run(
            _with_store(args, settings, lambda s: s.put(owner, card, expected_revision=args.expected_revision))
        )
        print(result.receipt)
    elif args.card_command == "get":
        found = asyncio.run(_with_store(args, settings, lambda s: s.get(owner)))
        _print_json(found.to_json() if found else None)
    elif args.card_command == "clear":
        print(asyncio.run(_with_store(args, settings, lambda s: s.clear(owner))).receipt)
    elif args.card_command == "history":
        _history_command(args, settings, owner)
    else:
        print(asyncio.run(_with_store(args, settings, lambda s: s.reset(owner))).receipt)


def _history_command(args: argparse.Namespace, settings: Settings, owner: Owner) -> None:
    import asyncio

    from .history import DEFAULT_LIMIT

    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    entries = asyncio.run(_with_store(args, settings, lambda s: s.history(owner, limit=limit)))
    if (args.format or ("text" if sys.stdout.isatty() else "json")) == "json":
        _print_json([e.to_json() for e in entries])
        return
    from .render.history import history_text

    text = history_text(entries, templates_dir=settings.templates.dir) if entries else "(no history)"
    print(_TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


def _render_command(args: argparse.Namespace, settings: Settings) -> None:
    from pydantic import ValidationError

    from .config import Mode, RenderSettings, StreamingSettings
    from .render import payload_for
    from .validation import field_and_rule

    if args.card_file == "-":
        text = _stdin()
    else:
        try:
            text = Path(args.card_file).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{args.card_file}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise UsageError(f"{args.card_file}: not UTF-8 text") from None
    data = _read_json(text, args.card_file)
    channel = settings.channels.slack if args.channel == "slack" else settings.channels.telegram
    streaming = channel.streaming if channel else StreamingSettings()
    try:
        mode = Mode(args.mode) if args.mode else streaming.mode
        render_settings = RenderSettings(
            mode=mode,
            maxLines=_given(args.max_lines, streaming.progress.maxLines),
            maxLineChars=_given(args.max_line_chars, streaming.progress.maxLineChars),
            # the card's lines under a partial/block answer: the config's, else --max-lines
            checklistLines=streaming.checklist_lines(mode) if args.max_lines is None else None,
            rich=args.rich,
        )
    except ValidationError as exc:
        name, rule = field_and_rule(exc)
        flag = {"maxLines": "--max-lines", "maxLineChars": "--max-line-chars"}.get(name, name)
        raise UsageError(f"{flag}: {rule}") from None
    payload = payload_for(data, args.channel, render_settings, paused=args.paused, templates_dir=settings.templates.dir)
    if (args.format or ("text" if sys.stdout.isatty() else "json")) == "json":
        _print_json(payload)
    else:
        print(_TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", _as_shown(payload)))


def _as_shown(payload: dict[str, Any]) -> str:
    """A payload as a person reads it: Telegram's visible text, the text card, the web HTML."""
    from .testing._rich import rich_text
    from .testing.telegram_html import parse

    if "html" in payload:
        return str(payload["html"])
    if "text" in payload:
        return str(payload["text"] or "(nothing to show)")
    params = payload.get("params", {})
    if payload.get("method") == "deleteMessage":
        return "(no draft: the chat's draft would be deleted)"
    if str(payload.get("method", "")).startswith("chat."):  # Slack: its plain text
        fallback = payload.get("fallback")
        fallback_text = fallback.get("params", {}).get("text") if isinstance(fallback, dict) else None
        return str(fallback_text or params.get("text") or "")
    rich = params.get("rich_message")
    if rich is not None:
        return "\n".join(rich_text(block.get("text", "")) or _list_text(block) for block in rich.get("blocks", []))
    return parse(str(params.get("text", ""))).text


def _list_text(block: dict[str, Any]) -> str:
    from .testing._rich import rich_text

    lines = []
    for item in block.get("items", []):
        box = ("☑ " if item.get("is_checked") else "☐ ") if item.get("has_checkbox") else "• "
        lines.append(box + "".join(rich_text(b.get("text", "")) for b in item.get("blocks", [])))
    return "\n".join(lines)


def _parse(argv: list[str], wrapped: list[str], *, hook_only: bool = False) -> argparse.Namespace:
    try:
        args = _parser(hook_only=hook_only).parse_args(argv)
    except SystemExit as exc:
        # A hook must never block its agent (exit 2 blocks Claude Code and Gemini CLI).
        if exc.code == 2 and "hook" in argv:
            raise SystemExit(0) from None
        raise
    if wrapped and args.command != "hook":
        _fail(f"unexpected arguments after --: {' '.join(wrapped)}")
    args.wrapped = wrapped
    args.redis = getattr(args, "redis", None)
    args.config = getattr(args, "config", None)
    return args


def _runs_hook(argv: list[str]) -> bool:
    """Whether the command is `hook`: the first word past the global --redis / --config."""
    from .hooks.client import GLOBAL_OPTIONS

    i = 0
    while i < len(argv) and argv[i].split("=", 1)[0] in GLOBAL_OPTIONS:
        i += 1 if "=" in argv[i] else 2
    return argv[i : i + 1] == ["hook"]


def _exit_status(code: object) -> int:
    """What the interpreter makes of `SystemExit(code)`."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def hook_status(argv: list[str], wrapped: Sequence[str] = ()) -> int:
    """Run the hook `progresscast <argv> [-- <wrapped>]` in this process: its exit status.
    What the warm hook server runs for each call it takes, too."""
    from .hooks.runner import run_hook

    try:
        return run_hook(_parse(argv, list(wrapped), hook_only=True))
    except SystemExit as exc:
        return _exit_status(exc.code)


def _run_hook(argv: list[str], wrapped: list[str]) -> NoReturn:
    from .hooks.client import call_server, one_event_harness, start_server

    harness = None if wrapped else one_event_harness(argv)
    start = False
    if harness is not None:
        served, start = call_server(argv, harness)
        if served is not None:
            raise SystemExit(served)
    # A hook process lives for one agent event and spends most of it importing; the
    # cyclic garbage collector would only walk what the imports build, again and
    # again (≈ 8 % of a call). On again after, for a caller running hooks in-process.
    collecting = gc.isenabled()
    gc.disable()
    try:
        status = hook_status(argv, wrapped)
    finally:
        if collecting:
            gc.enable()
    if start:
        start_server()  # for the next calls; this one's result is already out
    raise SystemExit(status)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `hook codex -- codex exec …`: what follows `--` is a command to run, not our options.
    wrapped: list[str] = []
    if "--" in argv:
        argv, wrapped = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    if _runs_hook(argv):
        _run_hook(argv, wrapped)
    args = _parse(argv, wrapped)
    if args.command == "hook":  # reached when the global options were abbreviated
        from .hooks.runner import run_hook

        raise SystemExit(run_hook(args))
    from redis.exceptions import RedisError

    from .card import SURROGATE_RULE, CardError, has_lone_surrogate
    from .config import ConfigError
    from .embedded import EmbeddedRedisError

    # Undecodable bytes in argv arrive as lone surrogates (surrogateescape).
    for name, value in vars(args).items():
        if isinstance(value, str) and has_lone_surrogate(value):
            _fail(f"{_ARGUMENTS.get(name, '--' + name.replace('_', '-'))}: {SURROGATE_RULE}")
    for command, option, value in (("card", "--session", "session"), ("render", "--channel", "channel")):
        if args.command == command and getattr(args, value, None) is None:
            where = f"{command} {args.card_command}" if command == "card" else command
            _fail(f"{option} is required (see 'progresscast {where} --help')")
    settings = _settings(args)
    import asyncio

    try:
        if args.command == "card":
            _card_command(args, settings)
        elif args.command == "render":
            _render_command(args, settings)
        elif args.command == "a2a":
            from .a2a.commands import CommandError
            from .a2a.commands import run as run_a2a

            try:
                run_a2a(args, settings)
            except CommandError as exc:
                raise UsageError(str(exc)) from None
        elif args.command == "serve":
            from .connections import redis_url
            from .serve import run_serve

            run_serve(settings, redis_url(args.redis, settings))
        elif args.command == "mcp":
            from .connections import redis_url
            from .mcp_server import McpUsageError, run_mcp

            try:
                asyncio.run(run_mcp(args, settings, None if args.gateway else redis_url(args.redis, settings)))
            except McpUsageError as exc:
                raise UsageError(str(exc)) from None
        elif args.command == "demo":
            from .demo import run_demo

            asyncio.run(run_demo(args, settings))
        elif args.command == "emulator":
            from .emulator_cli import run_emulator

            asyncio.run(run_emulator(args))
        sys.stdout.flush()  # here, so a closed pipe is caught below rather than at exit
    except (CardError, UsageError, ConfigError) as exc:
        _fail(str(exc))
    except (RedisError, EmbeddedRedisError) as exc:
        print(f"progresscast: Redis: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:
        # `progresscast render … | head`: the reader left; say nothing more, as cat would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None


if __name__ == "__main__":
    main()
