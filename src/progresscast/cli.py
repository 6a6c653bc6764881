"""The command line (docs/cli.md). Bad input: exit status 2, one line on stderr."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, NoReturn

from pydantic import ValidationError
from redis.exceptions import RedisError

from .card import CardError, CardInput
from .config import ConfigError, Mode, RenderSettings, Settings, StreamingSettings, load_settings
from .connections import connect, redis_url
from .embedded import EmbeddedRedisError
from .owners import Owner, resolve_owner
from .store import CardStore
from .validation import field_and_rule


class UsageError(Exception):
    """Bad input from the user: reported on one line, exit status 2."""


def _fail(message: str) -> NoReturn:
    print(f"progresscast: {message}", file=sys.stderr)
    raise SystemExit(2)


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage mistake is one line on stderr like every other bad input."""

    def error(self, message: str) -> NoReturn:
        _fail(f"{message} (see '{self.prog} --help')")


def _parser() -> argparse.ArgumentParser:
    # SUPPRESS: a subcommand that does not repeat --redis/--config must not reset the
    # value given before it (`progresscast --redis URL card get …`).
    common = _Parser(add_help=False)
    common.add_argument("--redis", metavar="URL", default=argparse.SUPPRESS, help="Redis URL (default: embedded)")
    common.add_argument(
        "--config", metavar="FILE", default=argparse.SUPPRESS, help="TOML config (default: $PROGRESSCAST_CONFIG)"
    )

    parser = _Parser(prog="progresscast", parents=[common])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    card = commands.add_parser("card", help="read and write progress cards", parents=[common])
    card_commands = card.add_subparsers(dest="card_command", required=True, parser_class=_Parser)
    for name, text in [
        ("put", "write a card from JSON on stdin; prints the receipt"),
        ("get", "print the card as JSON, or null"),
        ("clear", "clear the card"),
        ("reset", "clear the card at a boundary"),
    ]:
        sub = card_commands.add_parser(name, help=text, parents=[common])
        sub.add_argument("--session", required=True, metavar="KEY")
        sub.add_argument("--agent", metavar="ID")
        if name == "put":
            sub.add_argument("--expected-revision", type=int, metavar="N")

    render = commands.add_parser("render", help="preview what a channel shows", parents=[common])
    render.add_argument(
        "card_file", metavar="CARD.json", help="a card (as `card get` prints) or a write's input; - for stdin"
    )
    render.add_argument("--channel", choices=["telegram", "slack", "text", "web"], required=True)
    render.add_argument("--rich", action="store_true", help="Telegram rich message; Slack plan display")
    render.add_argument("--mode", choices=[m.value for m in Mode], default=None)
    render.add_argument("--max-lines", type=int, metavar="N")
    render.add_argument("--max-line-chars", type=int, metavar="N")
    render.add_argument("--paused", action="store_true", help="show unfinished steps as paused")

    serve = commands.add_parser("serve", help="gateway, web page, Telegram adapter, workers", parents=[common])
    serve.set_defaults(serve=True)

    mcp = commands.add_parser("mcp", help="MCP server with the progress_card and update_plan tools", parents=[common])
    mcp.add_argument(
        "--session", metavar="KEY", help="session key (default: $PROGRESSCAST_SESSION, else this directory's name)"
    )
    mcp.add_argument("--agent", metavar="ID", help="agent id (default: the configured default agent)")
    mcp.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP on HOST:PORT instead of stdio")
    mcp.add_argument("--gateway", metavar="URL", help="write through this gateway's RPC instead of the store")
    mcp.add_argument("--token", metavar="T", help="gateway token (default: $PROGRESSCAST_TOKEN)")
    mcp.add_argument("--tools", metavar="NAMES", help="tools to offer (default: progress_card,update_plan)")

    hook = commands.add_parser(
        "hook",
        help="an agent's hook: its event JSON on stdin (never fails the agent)",
        usage="progresscast hook claude-code|codex|gemini [--session KEY] [--agent ID] [-- codex exec --json …]",
        parents=[common],
    )
    hook.add_argument("harness", choices=["claude-code", "codex", "gemini"], help="whose events these are")
    hook.add_argument("--session", metavar="KEY", help="session key (default: the agent's own session id)")
    hook.add_argument("--agent", metavar="ID", help="agent id (default: the configured default agent)")

    demo = commands.add_parser("demo", help="play the bundled example on the embedded store", parents=[common])
    demo.add_argument("--serve", action="store_true", help="keep serving after the example")
    demo.add_argument("--delay", type=float, default=None, help="seconds between steps")
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    try:
        return load_settings(args.config)
    except ConfigError as exc:
        _fail(str(exc))


def _owner(args: argparse.Namespace, settings: Settings) -> Owner:
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
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise UsageError(f"{what}: JSON nested too deeply") from None


async def _with_store(args: argparse.Namespace, settings: Settings, work: Callable[[CardStore], Awaitable[Any]]) -> Any:
    redis = connect(redis_url(args.redis, settings))
    try:
        return await work(CardStore(redis))
    finally:
        await redis.aclose()


def _card_command(args: argparse.Namespace, settings: Settings) -> None:
    owner = _owner(args, settings)
    if args.card_command == "put":
        card = CardInput.parse(_read_json(_stdin(), "stdin"))
        result = asyncio.run(
            _with_store(args, settings, lambda s: s.put(owner, card, expected_revision=args.expected_revision))
        )
        print(result.receipt)
    elif args.card_command == "get":
        found = asyncio.run(_with_store(args, settings, lambda s: s.get(owner)))
        print(json.dumps(found.to_json() if found else None, ensure_ascii=False, indent=2))
    elif args.card_command == "clear":
        print(asyncio.run(_with_store(args, settings, lambda s: s.clear(owner))).receipt)
    else:
        print(asyncio.run(_with_store(args, settings, lambda s: s.reset(owner))).receipt)


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


def _render_command(args: argparse.Namespace, settings: Settings) -> None:
    from .render import payload_for

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
    print(json.dumps(payload, ensure_ascii=False, indent=2))


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `hook codex -- codex exec …`: what follows `--` is a command to run, not our options.
    wrapped: list[str] = []
    if "--" in argv:
        argv, wrapped = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    try:
        args = _parser().parse_args(argv)
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
    if args.command == "hook":
        from .hooks import run_hook

        raise SystemExit(run_hook(args))
    settings = _settings(args)
    try:
        if args.command == "card":
            _card_command(args, settings)
        elif args.command == "render":
            _render_command(args, settings)
        elif args.command == "serve":
            from .serve import run_serve

            run_serve(settings, redis_url(args.redis, settings))
        elif args.command == "mcp":
            from .mcp_server import McpUsageError, run_mcp

            try:
                asyncio.run(run_mcp(args, settings, None if args.gateway else redis_url(args.redis, settings)))
            except McpUsageError as exc:
                raise UsageError(str(exc)) from None
        elif args.command == "demo":
            from .demo import run_demo

            asyncio.run(run_demo(args, settings))
    except (CardError, UsageError) as exc:
        _fail(str(exc))
    except (RedisError, EmbeddedRedisError) as exc:
        print(f"progresscast: Redis: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None


if __name__ == "__main__":
    main()
