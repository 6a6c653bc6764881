"""`progresscast pairing list|approve|clear|revoke`: which chats may see which sessions."""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from typing import TYPE_CHECKING, Any

from ..arguments import Parser, UsageError, example, shown

if TYPE_CHECKING:
    from redis.asyncio import Redis

    from ..config.settings import Settings

PLATFORMS = ("telegram", "slack", "discord", "matrix")
"""Platforms whose chats can be paired (a new platform adds its name and namespaces)."""


def add_commands(commands: Any, common: argparse.ArgumentParser) -> None:
    pairing = commands.add_parser(
        "pairing", help="let a chat see sessions: list, approve, clear, revoke", parents=[common],
        description="A chat without a grant gets a pairing code for its first command (channels.<channel>.access "
        "= \"pairing\", the default). Approve the code to grant it sessions.",
        epilog=example(
            "progresscast pairing list", "progresscast pairing approve telegram K7QX2M9P --sessions 'shop-*'",
            "progresscast pairing clear telegram --all", "progresscast pairing revoke telegram 123456789",
        ),
    )
    actions = pairing.add_subparsers(dest="pairing_command", required=True, parser_class=Parser, metavar="ACTION")
    listing = actions.add_parser(
        "list", help="pending codes and approved chats", parents=[common],
        epilog=example("progresscast pairing list telegram"),
    )
    listing.add_argument("channel", nargs="?", metavar="CHANNEL", help=f"only this channel ({', '.join(PLATFORMS)})")
    approve = actions.add_parser(
        "approve", help="grant the chat that was given CODE these sessions", parents=[common],
        epilog=example("progresscast pairing approve slack K7QX2M9P --sessions 'ticket-*' 'agent:research:*'"),
    )
    approve.add_argument("channel", metavar="CHANNEL", help=f"the chat's channel ({', '.join(PLATFORMS)})")
    approve.add_argument("code", metavar="CODE", help="the 8-character code the chat was sent")
    approve.add_argument(
        "--sessions", nargs="+", metavar="GLOB", default=["*"],
        help="session globs the chat may follow, as gateway tokens take them (default: * — every session)",
    )
    clear = actions.add_parser(
        "clear", help="drop a pending code (or every one, --all): it can no longer be approved", parents=[common],
        epilog=example("progresscast pairing clear telegram K7QX2M9P", "progresscast pairing clear slack --all"),
    )
    clear.add_argument("channel", metavar="CHANNEL", help=f"the chat's channel ({', '.join(PLATFORMS)})")
    clear.add_argument("code", metavar="CODE", nargs="?", help="the pending code (as `pairing list` shows it)")
    clear.add_argument(
        "--all", action="store_true", dest="clear_all",
        help="every pending code, and the hour's count of new codes (after a flood of strangers)",
    )
    revoke = actions.add_parser(
        "revoke", help="take a chat's approval back: its follows end and its drafts are deleted", parents=[common],
        epilog=example("progresscast pairing revoke telegram -1001234567890"),
    )
    revoke.add_argument("channel", metavar="CHANNEL", help=f"the chat's channel ({', '.join(PLATFORMS)})")
    revoke.add_argument("chat", metavar="CHAT", help="the chat's id (as `pairing list` shows it)")


def _platform(name: str | None) -> str | None:
    if name is not None and name not in PLATFORMS:
        raise UsageError(f"CHANNEL: must be one of {', '.join(PLATFORMS)}, not {name!r}")
    return name


def namespaces(settings: Settings, platform: str) -> list[str]:
    """Where the platform's bots keep their follows and drafts."""
    from ..store import keys

    if platform == "telegram":
        from ..telegram.standby import bots

        return sorted({keys.TG, *(bot.namespace for bot in bots(settings))})
    if platform == "discord":
        return [keys.DISCORD]
    if platform == "matrix":
        return [keys.MATRIX]
    return [keys.SLACK]


def _chat_id(platform: str, raw: str) -> int | str:
    if platform == "telegram":
        try:
            return int(raw)
        except ValueError:
            raise UsageError(f"CHAT: a Telegram chat id is a number, not {raw!r}") from None
    if platform == "discord":
        from ..config.discord import SNOWFLAKE

        if not SNOWFLAKE.fullmatch(raw):
            raise UsageError(f"CHAT: a Discord channel id is 15-21 digits, like 1234567890123456789, not {raw!r}")
    if platform == "matrix":
        from ..config.matrix import MATRIX_ROOM_ID

        if not MATRIX_ROOM_ID.fullmatch(raw):
            raise UsageError(f"CHAT: a Matrix room id looks like !AbCdEf0123:example.org, not {raw!r}")
        return raw
    if not re.fullmatch(r"[A-Z0-9]{2,32}", raw):
        raise UsageError(f"CHAT: a Slack channel id looks like C0123456789, not {raw!r}")
    return raw


def _check(args: argparse.Namespace) -> None:
    from ..channels.chat.access import CODE_ALPHABET, CODE_LENGTH

    if args.pairing_command == "clear" and (args.code is None) == (not args.clear_all):
        raise UsageError("CODE: give one pending code or --all, not both and not neither")
    if args.pairing_command in ("approve", "clear") and args.code is not None:
        code = args.code.strip().upper()
        if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
            raise UsageError(f"CODE: must be {CODE_LENGTH} characters of {CODE_ALPHABET}, as the chat was sent")
    if args.pairing_command == "approve":
        for glob in args.sessions:
            if not glob or any(c.isspace() or not c.isprintable() for c in glob):
                raise UsageError(f"--sessions: {glob!r} must be a glob without spaces or control characters")


def pairing_command(args: argparse.Namespace, settings: Settings) -> int:
    from ..store.connections import connect, redis_url

    _platform(args.channel)
    _check(args)
    if args.pairing_command == "revoke":
        _chat_id(args.channel, args.chat)

    async def run() -> int:
        redis = connect(redis_url(args.redis, settings), settings)
        try:
            return await _run(args, settings, redis)
        finally:
            await redis.aclose()

    return asyncio.run(run())


async def _run(args: argparse.Namespace, settings: Settings, redis: Redis) -> int:
    from ..channels.chat.access import AccessStore
    from ..channels.state.holder import ChannelState

    if args.pairing_command == "list":
        now = time.time()
        lines = []
        for name in [args.channel] if args.channel else PLATFORMS:
            listed = AccessStore(redis, name)
            for pending in await listed.pending():
                age = max(0, int((now - pending.issued) // 60))
                lines.append(f"{name}\tpending\t{pending.code}\tchat {shown(pending.destination)}\t{age} min ago")
            for destination, grant in sorted((await listed.grants()).items()):
                patterns = " ".join(shown(p) for p in grant.patterns) or "-"
                lines.append(f"{name}\tapproved\t{shown(destination)}\tsessions {patterns}")
        print("\n".join(lines) if lines else "no pending codes and no approved chats")
        return 0
    platform: str = args.channel
    store = AccessStore(redis, platform)
    if args.pairing_command == "clear":
        if args.clear_all:
            print(f"cleared {await store.clear_all()} pending {platform} codes")
            return 0
        code = args.code.strip().upper()
        dropped = await store.clear(code)
        if dropped is None:
            print(f"progresscast: no pending {platform} code {code} (`progresscast pairing list` shows them)",
                  file=sys.stderr)
            return 1
        print(f"cleared {platform} code {code} (chat {shown(dropped)})")
        return 0
    if args.pairing_command == "approve":
        approved = await store.approve(args.code, list(args.sessions))
        if approved is None:
            print(
                f"progresscast: no pending {platform} code {args.code.strip().upper()} "
                "(codes are valid for one hour; `progresscast pairing list` shows them)",
                file=sys.stderr,
            )
            return 1
        print(f"approved {platform} chat {shown(approved)}: sessions {' '.join(args.sessions)}")
        return 0
    chat = _chat_id(platform, args.chat)
    had = await store.revoke(chat)
    ended = []
    for namespace in namespaces(settings, platform):
        state = ChannelState(redis, namespace, int if isinstance(chat, int) else str)
        ended += await state.follows.end(chat)
    if not had and not ended:
        print(f"progresscast: {platform} chat {chat} has no approved grant and follows nothing", file=sys.stderr)
        return 1
    names = ", ".join(sorted({k.owner.display_key for k in ended})) or "nothing"
    print(f"revoked {platform} chat {chat}: its follows ended ({names}); its drafts are deleted by the adapter")
    return 0


__all__ = ["PLATFORMS", "add_commands", "namespaces", "pairing_command"]
