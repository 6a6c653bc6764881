"""`progresscast emulator discord`: the shipped Discord emulator on its own, so anyone can
try the Discord adapter without a bot. Lines typed on stdin are slash commands of a
member of one channel (`/progresscast follow ticket-4821`, or just `follow
ticket-4821`), sent to the interactions URL signed like Discord; the ephemeral answer
(or the pressed message, as a press updated it) and every message the bot creates,
edits or deletes in the channel are printed."""

from __future__ import annotations

import argparse
import sys
from functools import partial
from typing import Any, TextIO

import httpx

from ..discord.presses import MODAL, UPDATE_MESSAGE
from ..model.asks import parse_control
from ..testing import DiscordAPIEmulator, press_words, pressed_button
from ..testing.discord_console import DiscordConsole
from ..testing.discord_markdown import read_markdown
from .emulator_config import Emulated, listen_of, offer_config
from .emulator_setup import listening
from .typed_lines import serve_typing


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
            "what the channel shows is printed as it happens. `press N` presses the N-th button of the newest "
            "open question, else of the newest message with buttons (`press N on MESSAGE`: of that message), "
            "`reply TEXT` types an answer to the newest ask. Ctrl-C stops.")
        await serve_typing(DiscordConsole(discord, channel, out).run, partial(_typed, discord, channel, out), out)


async def _typed(discord: DiscordAPIEmulator, channel: str, out: TextIO, line: str) -> None:
    text = line.strip().removeprefix("/progresscast").strip()
    if not line.strip():
        return
    word, _, rest = text.partition(" ")
    rest = rest.strip()
    try:
        if word == "press" and press_words(rest) is not None:
            response = await _press(discord, channel, out, rest)
        elif word == "reply" and rest:
            response = await _reply(discord, channel, out, rest)
        else:
            print(f"  you → /progresscast {text}", file=out, flush=True)
            response = await discord.slash_command(None, text, channel_id=channel)
    except ValueError as exc:  # not registered, no such subcommand
        print(f"  (Discord: {exc})", file=out, flush=True)
        return
    except httpx.HTTPError as exc:
        print(f"  (the interactions URL did not answer: {exc})", file=out, flush=True)
        return
    if response is not None:
        _print_answer(response, out, discord, channel)


async def _press(discord: DiscordAPIEmulator, channel: str, out: TextIO, rest: str) -> httpx.Response | None:
    """`press N [on MESSAGE]`: the N-th button of the newest open question, else of the
    newest message that has buttons (or of that message)."""
    picked = pressed_button(
        rest, [m for m in discord.channel(channel).visible() if m.buttons()], lambda m: m.id,
        lambda m: [str(b.get("custom_id", "")) for b in m.buttons()],
    )
    if isinstance(picked, str):
        print(f"  {picked}", file=out, flush=True)
        return None
    target, i = picked
    button = target.buttons()[i]
    print(f"  you press [{button.get('label', '')}] on message {target.id}", file=out, flush=True)
    return await discord.press(channel, target.id, str(button["custom_id"]))


async def _reply(discord: DiscordAPIEmulator, channel: str, out: TextIO, text: str) -> httpx.Response | None:
    """`reply TEXT`: the bot reads no messages on Discord, so a typed answer goes through
    the newest ask's "Type an answer…" button and the modal it opens."""
    asks = [m for m in discord.channel(channel).visible() if any(_is_text_button(b) for b in m.buttons())]
    if not asks:
        print("  (no ask that takes a typed answer)", file=out, flush=True)
        return None
    target = asks[-1]
    button = next(b for b in target.buttons() if _is_text_button(b))
    opened = await discord.press(channel, target.id, str(button["custom_id"]))
    if opened.status_code != 200 or (_json(opened) or {}).get("type") != MODAL:
        _print_answer(opened, out, discord, channel)  # not theirs to answer, or already answered: why
        return None
    print(f"  you answer message {target.id} → {text}", file=out, flush=True)
    return await discord.submit_modal(channel, text)


def _is_text_button(button: dict[str, Any]) -> bool:
    parsed = parse_control(str(button.get("custom_id", "")))
    return parsed is not None and parsed[0] == "t"


def _json(response: httpx.Response) -> dict[str, Any] | None:
    try:
        data = response.json()
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


def _print_answer(response: httpx.Response, out: TextIO, discord: DiscordAPIEmulator, channel: str) -> None:
    """The app's answer to a command or a press: an ephemeral message only the member
    sees, or the pressed message updated in place."""
    if response.status_code == 204:  # the app says nothing (Discord: "did not respond")
        print("  (the app said nothing)", file=out, flush=True)
        return
    if (_json(response) or {}).get("type") == UPDATE_MESSAGE:
        _print_update(discord, channel, out)
        return
    try:
        answer = response.json()["data"]["content"]
    except (ValueError, KeyError, TypeError):
        print(f"  (the app answered {response.status_code}: {response.text[:200]})", file=out, flush=True)
        return
    for row in read_markdown(str(answer)).text.split("\n"):
        print(f"  ⓘ {row}", file=out)
    out.flush()


def _print_update(discord: DiscordAPIEmulator, channel: str, out: TextIO) -> None:
    """The pressed message as it now reads (or why Discord did not update it)."""
    interaction, refusal = discord.refused[-1] if discord.refused else ({}, None)
    if refusal is not None and interaction is discord.responses[-1][0]:
        print(f"  (Discord refused the update: {refusal})", file=out, flush=True)
        return
    pressed = (discord.responses[-1][0].get("message") or {}).get("id")
    message = discord.channel(channel).messages.get(str(pressed))
    if message is None:
        return
    print(f"  ✎ the press updates message {message.id}:", file=out)
    for line in (message.read().text or "(empty)").split("\n"):
        print(f"    │ {line}", file=out)
    if buttons := message.buttons():
        print("    " + "  ".join(f"[{i}: {b.get('label', '')}]" for i, b in enumerate(buttons, 1)), file=out)
    out.flush()
