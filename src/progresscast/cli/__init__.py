"""The command line (docs/cli.md). Bad input: exit status 2, one line on stderr.

`progresscast hook …` runs on every event of an agent, as a new process each time, so
this package imports only the standard library at the top (not even asyncio): each
command imports what it uses, a one-event hook call first hands itself to the warm
hook server (agents/hooks/client.py), and a hook builds only its own parser
(agents/hooks/command.py).
"""

from __future__ import annotations

import gc
import os
import sys
from typing import TYPE_CHECKING, NoReturn

from ..arguments import GLOBAL_OPTIONS, UsageError, fail, parse

if TYPE_CHECKING:
    import argparse

    from ..config.settings import Settings

_ARGUMENTS = {"card_file": "CARD.json"}
STORE_COMMANDS = ("card", "pairing", "a2a", "ask")
"""Commands that read or write the store a `serve` uses: they say when theirs is another."""


def _runs_hook(argv: list[str]) -> bool:
    """Whether the command is `hook`: the first word past the global --redis / --config."""
    i = 0
    while i < len(argv) and argv[i].split("=", 1)[0] in GLOBAL_OPTIONS:
        i += 1 if "=" in argv[i] else 2
    return argv[i : i + 1] == ["hook"]


def _run_hook(argv: list[str], wrapped: list[str]) -> NoReturn:
    from ..agents.hooks.client import call_server, one_event_harness, start_server
    from ..agents.hooks.command import hook_status

    harness = None if wrapped else one_event_harness(argv)
    start = False
    if harness is not None:
        served, start = call_server(argv, harness)
        if served is not None:
            raise SystemExit(served)
    status = hook_status(argv, wrapped)  # the collector off, as `main` left it
    if start:
        start_server()  # for the next calls; this one's result is already out
    raise SystemExit(status)


def main(argv: list[str] | None = None) -> None:
    # A command spends most of its CPU importing; the cyclic garbage collector would
    # walk what the imports build again and again (a fifth of a `card put`, ≈ 8 % of a
    # hook call). Off until the command runs; what start-up built is then frozen, as
    # `collector.settle` does (`serve` settles again: its start-up's garbage still goes).
    collecting = gc.isenabled()
    gc.disable()
    try:
        _main(argv, collecting)
    finally:
        if collecting:
            gc.enable()


def _main(argv: list[str] | None, collecting: bool) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    # `hook codex -- codex exec …`: what follows `--` is a command to run, not our options.
    wrapped: list[str] = []
    if "--" in argv:
        argv, wrapped = argv[: argv.index("--")], argv[argv.index("--") + 1 :]
    if _runs_hook(argv):
        _run_hook(argv, wrapped)
    from .parser import full_parser

    args = parse(full_parser(), argv, wrapped)
    if args.command == "hook":  # reached when the global options were abbreviated
        from ..agents.hooks.runner import run_hook

        raise SystemExit(run_hook(args))
    from redis.exceptions import RedisError

    from ..config.errors import ConfigError
    from ..model.card import SURROGATE_RULE, CardError, has_lone_surrogate
    from ..store.embedded import EmbeddedRedisError

    # Undecodable bytes in argv arrive as lone surrogates (surrogateescape).
    for name, value in vars(args).items():
        if isinstance(value, str) and has_lone_surrogate(value):
            fail(f"{_ARGUMENTS.get(name, '--' + name.replace('_', '-'))}: {SURROGATE_RULE}")
    if args.command == "doctor":  # its own judge of the config: a config that fails to load is one of its lines
        from .doctor import main_status

        main_status(args)
    from .card import settings_of

    settings = settings_of(args)
    import asyncio

    if collecting:
        gc.freeze()
        gc.enable()
    try:
        if args.command == "status":
            from .status import status_command

            status_command(args, settings, sys.stdout)
        elif args.command == "card":
            from .card import card_command

            card_command(args, settings)
        elif args.command == "render":
            from .render import render_command

            render_command(args, settings)
        elif args.command == "a2a":
            from ..agents.a2a.commands import CommandError
            from ..agents.a2a.commands import run as run_a2a

            try:
                run_a2a(args, settings)
            except CommandError as exc:
                raise UsageError(str(exc)) from None
        elif args.command == "ask":
            from .ask import ask_command

            status = ask_command(args, settings)
            sys.stdout.flush()
            raise SystemExit(status)
        elif args.command == "acp":
            from ..agents.acp.proxy import acp_command

            raise SystemExit(acp_command(args, settings))
        elif args.command == "pairing":
            from .pairing import pairing_command

            status = pairing_command(args, settings)
            if status:
                sys.stdout.flush()
                raise SystemExit(status)
        elif args.command == "serve":
            from ..serve import run_serve
            from ..store.connections import redis_url

            run_serve(settings, redis_url(args.redis, settings))
        elif args.command == "mcp":
            from ..agents.mcp_options import McpUsageError, mcp_options
            from ..store.connections import redis_url

            try:
                options = mcp_options(args, settings)  # before the SDK's import: a second
                from ..agents.mcp_server import run_mcp

                asyncio.run(run_mcp(settings, options, None if args.gateway else redis_url(args.redis, settings)))
            except McpUsageError as exc:
                raise UsageError(str(exc)) from None
        elif args.command == "demo":
            from ..demo import run_demo

            asyncio.run(run_demo(args, settings))
        elif args.command == "discord":
            from .discord import discord_command

            discord_command(args, settings)
        elif args.command == "emulator":
            from .emulator import run_emulator

            asyncio.run(run_emulator(args))
        _store_notice(args, settings)
        sys.stdout.flush()  # here, so a closed pipe is caught below rather than at exit
    except SystemExit as exc:
        if exc.code != 2:  # a command's own status (ask's 0, 3, 4): it did use the store
            _store_notice(args, settings)
        raise
    except (CardError, UsageError, ConfigError) as exc:
        fail(str(exc))
    except (RedisError, EmbeddedRedisError) as exc:
        print(f"progresscast: Redis: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    except KeyboardInterrupt:
        raise SystemExit(130) from None
    except BrokenPipeError:
        # `progresscast render … | head`: the reader left; say nothing more, as cat would.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(141) from None


def _store_notice(args: argparse.Namespace, settings: Settings) -> None:
    """After a command that used a store other than a running `serve`'s: one line on
    stderr saying so (never with a refusal of bad input: that stays one line)."""
    if args.command not in STORE_COMMANDS:
        return
    from ..store.connections import redis_url
    from .store_notice import say_other_store

    say_other_store(redis_url(args.redis, settings), settings)


if __name__ == "__main__":
    main()
