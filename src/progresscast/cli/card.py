"""`progresscast card …` and what every command reading a card or the store shares."""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from ..arguments import UsageError, fail, read_input

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..model.owners import Owner
    from ..store.cards import CardStore

# DEL, the C1 controls and the line/paragraph separators are valid in JSON strings but
# act on a terminal: escape them (they can only occur inside strings).
TERMINAL_CONTROLS = re.compile("[\x7f-\x9f\u2028\u2029]")


def print_json(data: Any) -> None:
    text = json.dumps(data, ensure_ascii=False, indent=2)
    print(TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text))


def settings_of(args: argparse.Namespace) -> Settings:
    from ..config.errors import ConfigError
    from ..config.load import load_settings

    try:
        return load_settings(args.config)
    except ConfigError as exc:
        fail(str(exc))


def owner_of(args: argparse.Namespace, settings: Settings) -> Owner:
    from ..model.owners import resolve_option_owner

    return resolve_option_owner(
        args.session, args.agent, known_agents=settings.agents.known_set, default_agent=settings.agents.default
    )


def read_json(text: str, what: str) -> Any:
    from ..model.card import reject_lone_surrogates

    try:
        data = json.loads(text)
        reject_lone_surrogates(data)
        return data
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    except RecursionError:
        raise UsageError(f"{what}: JSON nested too deeply") from None


async def with_store(args: argparse.Namespace, settings: Settings, work: Callable[[CardStore], Awaitable[Any]]) -> Any:
    from ..store.cards import CardStore
    from ..store.connections import connect, redis_url

    redis = connect(redis_url(args.redis, settings), settings)
    try:
        return await work(CardStore(redis, metrics=False))  # a command's counters die with it, unread
    finally:
        await redis.aclose()


def card_command(args: argparse.Namespace, settings: Settings) -> None:
    import asyncio

    from ..model.card import CardInput

    owner = owner_of(args, settings)
    if args.card_command == "put":
        if sys.stdin.isatty():
            print(
                "progresscast: waiting for the card's JSON on stdin (end it with Ctrl-D), "
                "e.g. card put --session KEY < examples/plan.json",
                file=sys.stderr,
            )
        card = CardInput.parse(read_json(read_input("-"), "stdin"))
        result = asyncio.run(
            with_store(args, settings, lambda s: s.put(owner, card, expected_revision=args.expected_revision))
        )
        print(result.receipt)
    elif args.card_command == "get":
        found = asyncio.run(with_store(args, settings, lambda s: s.get(owner)))
        print_json(found.to_json() if found else None)
    elif args.card_command == "clear":
        print(asyncio.run(with_store(args, settings, lambda s: s.clear(owner))).receipt)
    elif args.card_command == "history":
        _history_command(args, settings, owner)
    else:
        print(asyncio.run(with_store(args, settings, lambda s: s.reset(owner))).receipt)




def _history_command(args: argparse.Namespace, settings: Settings, owner: Owner) -> None:
    import asyncio

    from ..model.history import DEFAULT_LIMIT

    limit = DEFAULT_LIMIT if args.limit is None else args.limit
    entries = asyncio.run(with_store(args, settings, lambda s: s.history(owner, limit=limit)))
    if (args.format or ("text" if sys.stdout.isatty() else "json")) == "json":
        print_json([e.to_json() for e in entries])
        return
    from ..render.history import history_text

    text = history_text(entries, templates_dir=settings.templates.dir) if entries else "(no history)"
    print(TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", text))
