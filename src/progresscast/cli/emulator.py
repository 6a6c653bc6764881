"""`progresscast emulator telegram`: the shipped Bot API emulator on its own, so anyone
can try the bot without a token. Lines typed on stdin are sent as a user of one chat;
what the chat shows is printed as it happens."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

from ..config.settings import ConfigError
from ..testing import BotAPIEmulator
from ..testing.console import ChatConsole


async def run_emulator(args: argparse.Namespace, *, out: TextIO | None = None) -> None:
    if args.emulator == "discord":
        from .emulator_discord import run_discord_emulator

        await run_discord_emulator(args, out=out)
        return
    out = out or sys.stdout
    chat = args.chat
    api = BotAPIEmulator(port=args.port, fault_rate=args.fault_rate, fault_seed=args.fault_seed)
    try:
        await api.start()
    except OSError as exc:
        raise ConfigError(f"--port: cannot listen on 127.0.0.1:{args.port} ({exc.strerror})") from None
    try:
        print(f"Bot API emulator on {api.url}", file=out)
        print("Point the Telegram adapter at it (then run `progresscast serve --config FILE`):", file=out)
        print("  [channels.telegram]", file=out)
        print(f'  token = "{api.token}"', file=out)
        print(f'  apiBaseUrl = "{api.base_url}"', file=out)
        print(
            f"Type as the user of chat {chat}, e.g. /follow ticket-4821 (Enter sends it); what the chat "
            "shows is printed as it happens. Ctrl-C stops.",
            file=out, flush=True,
        )
        if args.fault_rate:
            print(
                f"Failing {args.fault_rate:.0%} of the calls that act on a chat (5xx, timeouts, 429; "
                f"seed {args.fault_seed}).",
                file=out, flush=True,
            )
        console = ChatConsole(api, chat, out)
        printer = asyncio.create_task(console.run())
        try:
            await _type_as_user(api, chat, out)
            print("(input closed: still serving until Ctrl-C)", file=out, flush=True)
            await asyncio.Event().wait()
        finally:
            printer.cancel()
    finally:
        await api.stop()


async def _type_as_user(api: BotAPIEmulator, chat: int, out: TextIO) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (PermissionError, ValueError):
        # A regular file or /dev/null cannot be watched by the event loop; it never blocks,
        # so it is read as it is.
        for text in sys.stdin:
            _typed(api, chat, out, text)
        return
    while line := await reader.readline():
        _typed(api, chat, out, line.decode(errors="replace"))


def _typed(api: BotAPIEmulator, chat: int, out: TextIO, line: str) -> None:
    text = line.strip()
    if text:
        api.send_user_message(chat, text)
        print(f"  you → {text}", file=out, flush=True)
