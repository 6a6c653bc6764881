"""`progresscast emulator telegram|slack`: a shipped service emulator on its own, so
anyone can try a channel without a token or a workspace. It prints what to put in the
config (or writes a whole one: emulator_config.py); lines typed on stdin are sent as a
person of one chat or channel; what that chat or channel shows is printed as it happens."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TextIO

import httpx

from ..stopping import stop_on_sigterm
from ..testing import BotAPIEmulator, SlackAPIEmulator
from ..testing.console import ChatConsole
from ..testing.slack_console import ChannelConsole
from ..testing.slackapi import PERSON_ID
from .emulator_config import Emulated, listen_of, offer_config
from .emulator_setup import listening
from .typed_lines import serve_typing

log = logging.getLogger("progresscast.emulator")

SLASH = "/progresscast"
GROUP_USER = 424242
"""Who types in a group chat (in a private chat, its own id)."""


async def run_emulator(args: argparse.Namespace, *, out: TextIO | None = None) -> None:
    # SIGTERM (a service manager, a closing terminal's kill) ends it as Ctrl-C does, so
    # what it started goes with it (the Matrix one's Synapse and its data), and exits 0
    # as `serve` does.
    stopping = stop_on_sigterm(log)
    try:
        await _run(args, out)
    except asyncio.CancelledError:
        if not stopping.is_set():
            raise  # Ctrl-C: asyncio.run turns this into KeyboardInterrupt


async def _run(args: argparse.Namespace, out: TextIO | None) -> None:
    if args.emulator == "discord":
        from .emulator_discord import run_discord_emulator

        await run_discord_emulator(args, out=out)
        return
    if args.emulator == "matrix":
        from .emulator_matrix import run_matrix_emulator

        await run_matrix_emulator(args, out=out)
        return
    out = out or sys.stdout
    if args.emulator == "slack":
        await _run_slack(args, out)
    else:
        await _run_telegram(args, out)


async def _run_telegram(args: argparse.Namespace, out: TextIO) -> None:
    chat = args.chat
    user = chat if chat > 0 else GROUP_USER
    api = BotAPIEmulator(port=args.port, fault_rate=args.fault_rate, fault_seed=args.fault_seed)
    async with listening(api, args.port):
        print(f"Bot API emulator on {api.url}", file=out)
        emulated = Emulated("telegram", {"token": api.token, "apiBaseUrl": api.base_url}, "chats", chat)
        offer_config(out, emulated, args.write_config, args.redis)
        if chat < 0:
            if args.admin:
                api.bot().set_admins(chat, user)  # the first administrator is the group's creator
            print(
                f"Chat {chat} is a group: you are "
                + ("its creator, so you may change what it follows." if args.admin else
                   "an ordinary member, so a /follow there is refused (--admin makes you its creator)."),
                file=out,
            )
        print(
            f"Type as the user of chat {chat}, e.g. /follow ticket-4821 (Enter sends it); what the chat "
            "shows is printed as it happens. `press N` presses the N-th button of the newest open question, else "
            "of the newest message with buttons (`press N on MESSAGE`: of that message), `reply TEXT` answers "
            "the newest open question. Ctrl-C stops.",
            file=out, flush=True,
        )
        if args.fault_rate:
            print(
                f"Failing {args.fault_rate:.0%} of the calls that act on a chat (5xx, timeouts, 429; "
                f"seed {args.fault_seed}).",
                file=out, flush=True,
            )

        console = ChatConsole(api, chat, out)

        async def typed(text: str) -> None:
            acted = console.act(text, user)
            if acted is None:
                api.send_user_message(chat, text, user_id=user)
                print(f"  you → {text}", file=out, flush=True)
                return
            echo, query = acted
            answer = None if query is None else partial(console.answer_of, query)
            await _pressed(out, echo, answer, api.wait_for, "bot")

        await serve_typing(console.run, typed, out)


async def _run_slack(args: argparse.Namespace, out: TextIO) -> None:
    channel = args.channel
    slack = SlackAPIEmulator(channels=[channel], port=args.port)
    app = args.app.rstrip("/")
    async with listening(slack, args.port):
        slack.events_url = f"{app}/slack/events"
        slack.interactions_url = f"{app}/slack/interactions"
        print(f"Slack Web API emulator on {slack.url}", file=out)
        emulated = Emulated("slack", {
            "token": slack.token, "signingSecret": slack.signing_secret, "apiBaseUrl": slack.base_url,
        }, "channels", channel, listen=listen_of(app, "--app"))  # fmt: skip
        offer_config(out, emulated, args.write_config, args.redis)
        print(
            f"Slash commands, events and presses go to the app at {app} (/slack/commands, /slack/events, "
            "/slack/interactions), signed with that secret.",
            file=out,
        )
        print(
            f"Type as a person in channel {channel}: {SLASH} follow ticket-4821 is a slash command (its "
            "answer, seen only by you, is printed); `press N` presses the N-th button of the newest message with "
            "buttons (`press N on MESSAGE`: of that message), `reply TEXT` "
            "answers the newest open question in its thread; any other line is a message in the channel. What the "
            "channel shows is printed as it happens. Ctrl-C stops.",
            file=out, flush=True,
        )
        console = ChannelConsole(slack, channel, out)

        async def typed(text: str) -> None:
            if text == SLASH or text.startswith(SLASH + " "):
                print(f"  you → {text}", file=out, flush=True)
                await _slash(slack, app, channel, text.removeprefix(SLASH).strip(), out)
                return
            acted = console.act(text, PERSON_ID)
            if acted is None:
                slack.post_as_user(channel, text)
                print(f"  you → {text}", file=out, flush=True)
                return
            echo, pressed = acted
            answer = None if pressed is None else (lambda: pressed.answer)
            await _pressed(out, echo, answer, slack.wait_for, "app (only you see it)")

        await serve_typing(console.run, typed, out)


async def _pressed(out: TextIO, echo: str, answer: Callable[[], str | None] | None,
                   wait_for: Callable[[Callable[[], bool], float], Awaitable[None]], who: str) -> None:
    """A press or reply typed on a console: its echo, then the app's answer to the press
    as the person sees it (or why none came)."""
    print(f"  {echo}", file=out, flush=True)
    if answer is None:
        return
    try:
        await wait_for(lambda: answer() is not None, 10)
        print(f"  {who} → {answer()}", file=out, flush=True)
    except TimeoutError:
        print("  (no answer to the press: is `progresscast serve` running?)", file=out, flush=True)


async def _slash(slack: SlackAPIEmulator, app: str, channel: str, text: str, out: TextIO) -> None:
    """A slash command as Slack sends it (signed), and the app's answer as the person sees it."""
    try:
        response = await slack.send_slash_command(f"{app}/slack/commands", text or "help", channel_id=channel)
    except httpx.HTTPError as exc:
        print(f"  (no answer from the app at {app}: {exc or type(exc).__name__}; is `progresscast serve` "
              "running with this [channels.slack]?)", file=out, flush=True)
        return
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code == 200 and isinstance(body, dict):
        answer = str(body.get("text", "")).replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
        print(f"  app → {answer}", file=out, flush=True)
    else:
        print(f"  (the app answered HTTP {response.status_code})", file=out, flush=True)
