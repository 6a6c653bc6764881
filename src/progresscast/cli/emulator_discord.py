"""`progresscast emulator discord`: the shipped Discord emulator on its own, so anyone can
try the Discord adapter without a bot. Lines typed on stdin are slash commands of a
member of one channel (`/progresscast follow ticket-4821`, or just `follow
ticket-4821`), sent to the interactions URL signed like Discord; the ephemeral answer
and every message the bot creates, edits or deletes in the channel are printed."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TextIO

import httpx

from ..testing import DiscordAPIEmulator
from ..testing.discord_markdown import read_markdown
from .emulator_config import Emulated, listen_of, offer_config
from .emulator_setup import listening

SHOWN = ("create_message", "edit_message", "delete_message")


async def run_discord_emulator(args: argparse.Namespace, *, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    channel = args.channel
    discord = DiscordAPIEmulator(channels=[channel], port=args.port, interactions_url=args.interactions)
    async with listening(discord, args.port):

        def say(text: str) -> None:
            print(text, file=out, flush=True)

        say(f"Discord emulator on {discord.url}")
        emulated = Emulated("discord", {
            "token": discord.token, "applicationId": discord.application_id, "publicKey": discord.public_key,
            "apiBaseUrl": discord.base_url,
        }, "channels", channel, listen=listen_of(args.interactions, "--interactions"),
            then=["progresscast discord register --config {config} --guild " + discord.guild_id])  # fmt: skip
        offer_config(out, emulated, args.write_config, args.redis)
        if args.write_config is None:
            say("Then run `progresscast serve` and `progresscast discord register --guild "
                f"{discord.guild_id}` with that config.")
        say(f"Type /progresscast commands as a member of channel {channel} (sent to {args.interactions}); "
            "what the channel shows is printed as it happens. Ctrl-C stops.")
        printer = asyncio.create_task(_print_channel(discord, channel, out))
        try:
            await _type_commands(discord, channel, out)
            say("(input closed: still serving until Ctrl-C)")
            await asyncio.Event().wait()
        finally:
            printer.cancel()


async def _print_channel(discord: DiscordAPIEmulator, channel: str, out: TextIO) -> None:
    seen = 0
    while True:
        await discord.wait_for(lambda at=seen: len(discord.calls) > at, timeout=3600)  # type: ignore[misc]
        while seen < len(discord.calls):
            call = discord.calls[seen]
            seen += 1
            if call.channel != channel or call.route not in SHOWN or call.status >= 300:
                continue
            if call.route == "delete_message":
                print("  ✕ the bot deletes a message", file=out, flush=True)
                continue
            shown = discord.channel(channel).visible()
            if not shown:
                continue
            verb = "sends" if call.route == "create_message" else "edits"
            message = max(shown, key=lambda m: m.edited_at or 0) if call.route == "edit_message" else shown[-1]
            print(f"  {'＋' if verb == 'sends' else '✎'} the bot {verb} message {message.id}:", file=out)
            for line in (message.read().text or "(empty)").split("\n"):
                print(f"    │ {line}", file=out)
            out.flush()


async def _type_commands(discord: DiscordAPIEmulator, channel: str, out: TextIO) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    except (PermissionError, ValueError):
        for text in sys.stdin:  # a file or /dev/null never blocks: read as it is
            await _typed(discord, channel, out, text)
        return
    while line := await reader.readline():
        await _typed(discord, channel, out, line.decode(errors="replace"))


async def _typed(discord: DiscordAPIEmulator, channel: str, out: TextIO, line: str) -> None:
    text = line.strip().removeprefix("/progresscast").strip()
    if not line.strip():
        return
    print(f"  you → /progresscast {text}", file=out, flush=True)
    try:
        response = await discord.slash_command(None, text, channel_id=channel)
    except ValueError as exc:  # not registered, no such subcommand
        print(f"  (Discord: {exc})", file=out, flush=True)
        return
    except httpx.HTTPError as exc:
        print(f"  (the interactions URL did not answer: {exc})", file=out, flush=True)
        return
    if response.status_code == 204:  # the app says nothing (Discord: "did not respond")
        print("  (the app said nothing)", file=out, flush=True)
        return
    try:
        answer = response.json()["data"]["content"]
    except (ValueError, KeyError, TypeError):
        print(f"  (the app answered {response.status_code}: {response.text[:200]})", file=out, flush=True)
        return
    for row in read_markdown(str(answer)).text.split("\n"):
        print(f"  ⓘ {row}", file=out)
    out.flush()
