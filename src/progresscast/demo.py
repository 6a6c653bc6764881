"""`progresscast demo`: the bundled example session, played through the gateway to a
Telegram chat — the real adapter, talking to the shipped Bot API emulator.

The demo keeps to itself: it runs on its own temporary home and embedded Redis (never
the configured store, which a `serve` may be using), with a bot and a chat of its own
(not the emulator's defaults that `progresscast emulator telegram` uses), and removes
its home when it ends. There it starts the Bot API emulator, the gateway and web page
and the Telegram adapter with a chat that follows the demo session; mints a one-off
token; and plays the example through `POST /v1/rpc` — the path an agent harness takes. What the chat shows is printed as
it happens: each message the bot sends, edits or deletes, as a person reads it.
At a terminal the page then stays up until Enter or Ctrl-C; otherwise (`make demo`
in CI, stdin closed) the demo ends by itself. `--serve` keeps serving until Ctrl-C or
SIGTERM (either way its Redis and its home go).

Entries of the example (`examples/session.json`), in order:

    {"card": {...}}                   progressCard.put with this card input ({} clears)
    {"activity": {...}}               activity.put (headline, tool, answer)
    {"run": {"state": "completed"}}   run.end of the demo run (completed|failed|canceled)
    {"reset": true}                   progressCard.reset
    {"ask": {...}, "press": "Allow"}  progressCard.ask, the chat's person presses that button,
                                      and progressCard.waitAnswer hands the agent the answer
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Awaitable, Callable
from importlib import resources
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from .config.gateway import GatewaySettings, GatewayToken
from .config.settings import ChannelSettings, Settings
from .config.telegram import ChatSettings, TelegramSettings
from .gateway.server import run_gateway
from .http.auth import READ, WRITE, check_token_strength
from .http.server import address, bind
from .model.owners import Owner
from .stopping import stop_on_sigterm
from .store.connections import connect
from .store.embedded import ensure_embedded, stop_embedded
from .testing import BotAPIEmulator
from .testing.console import ChatConsole

log = logging.getLogger("progresscast")

SESSION = "demo-ticket-4821"
RUN_ID = "demo-run"
DEFAULT_DELAY = 0.8
SERVE_DELAY = 2.0  # someone is about to open the page: give them time to watch
CHAT = 48219
"""The emulated private chat that follows the demo session (not the emulator's default)."""
DEMO_TOKEN = "482100:DEMO-token_for-the-progresscast-demo"
"""The demo's own bot (the emulator's default bot is the one a user tries it with)."""
SHUTDOWN_SECONDS = 12.0
"""How long each part of the demo may take to stop."""
PING_SECONDS = 10.0
"""How long the demo waits for the chat to show a blocked step's ping."""
NEEDS_YOU = "Needs you"
"""The words of the ping (the Telegram theme's `needs_you`)."""
SETTLE_SECONDS = 30.0
"""How long the demo waits for the chat to show the final answer."""


class DemoError(RuntimeError):
    pass


def example_session() -> list[dict[str, Any]]:
    """The bundled example: a list of writes (`{"card": {...}}`) and activity updates."""
    text = resources.files("progresscast").joinpath("examples/session.json").read_text()
    steps: list[dict[str, Any]] = json.loads(text)
    return steps


def with_demo_token(settings: Settings, token: str) -> Settings:
    """The settings plus a one-off token that may read and write every session."""
    tokens = [*settings.gateway.tokens, GatewayToken(token=token, scopes=[READ, WRITE], sessions=["*"])]
    return settings.model_copy(update={"gateway": settings.gateway.model_copy(update={"tokens": tokens})})


class Rpc:
    """A tiny client of `POST /v1/rpc` that raises on `{"ok": false}`."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def __call__(self, method: str, **params: Any) -> Any:
        response = await self.client.post("/v1/rpc", json={"method": method, "params": params})
        body = response.json()
        if not body.get("ok"):
            raise DemoError(f"{method}: {body['error']['message']} (HTTP {response.status_code})")
        return body["result"]


def demo_settings(settings: Settings, token: str, api: BotAPIEmulator) -> Settings:
    """The demo's own settings: the configured agents, templates and gateway address (a
    free port when it is taken), a one-off token, and a Telegram adapter on the emulator
    whose chat `CHAT` follows the demo session — nothing else of the configuration (its
    store, tokens, channels, A2A agents) is used."""
    telegram = TelegramSettings(
        token=api.token, apiBaseUrl=api.base_url, chats=[ChatSettings(id=CHAT, follow=[SESSION])]
    )
    own = Settings(
        agents=settings.agents,
        templates=settings.templates,
        gateway=GatewaySettings(listen=settings.gateway.listen),
        channels=ChannelSettings(telegram=telegram),
    )
    return with_demo_token(own, token)


Press = Callable[[str], Awaitable[None]]
"""The chat's person presses the button of this label on the newest ask (the demo's part)."""


async def play(
    rpc: Rpc, owner: Owner, *, delay: float, out: TextIO, run_id: str = RUN_ID,
    pinged: Callable[[], Awaitable[None]] | None = None, press: Press | None = None,
) -> None:
    """Play the example through the gateway; the chat's changes are printed meanwhile.
    `pinged`: after a card with a blocked step, wait until the chat shows its ping (at
    the chat's pace the next write would otherwise unblock it before the ping leaves).
    `press`: how the chat's person answers an ask (without it, asks are skipped)."""

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    start = await rpc("progressCard.reset", sessionKey=owner.session_key, agentId=owner.agent_id)
    # Every write takes a revision, a reset too: say so, or the first receipt's rev 2 puzzles.
    say(
        f"agent: progressCard.reset → rev {start['revision']}: a clean card to start from "
        "(a reset is a write too, so the plan below starts at the next revision)"
    )
    await rpc("run.start", sessionKey=owner.session_key, agentId=owner.agent_id, runId=run_id)
    who = {"sessionKey": owner.session_key, "agentId": owner.agent_id}
    for number, entry in enumerate(example_session(), 1):
        if "card" in entry:
            result = await rpc("progressCard.put", **who, **entry["card"])
            what = f"progressCard.put → {result['receipt']}"
            blocked = any(step.get("status") == "blocked" for step in entry["card"].get("plan") or [])
            if blocked and pinged is not None:
                say(f"[{number}] agent: {what}")
                await pinged()
                await asyncio.sleep(delay)
                continue
        elif "activity" in entry:
            await rpc("activity.put", **who, **entry["activity"])
            what = "activity.put → " + ", ".join(f"{k}: {v}" for k, v in entry["activity"].items())
        elif "run" in entry:
            state = entry["run"].get("state", "completed")
            await rpc("run.end", **who, runId=run_id, state=state)
            what = f"run.end → {state}"
        elif entry.get("reset"):
            result = await rpc("progressCard.reset", **who)
            what = f"progressCard.reset → {result['receipt']}"
        elif "ask" in entry:
            if press is None:
                continue
            made = await rpc("progressCard.ask", **who, **entry["ask"], source="demo")
            say(f"[{number}] agent: progressCard.ask → {made['askId'][:8]}…: {entry['ask']['prompt']} (waits)")
            await press(str(entry.get("press", made["options"][0])))
            waited = await rpc("progressCard.waitAnswer", **who, askId=made["askId"], timeoutSeconds=30)
            answer = waited.get("answer") or {}
            by = (answer.get("by") or {}).get("name", "?")
            say(f"    agent: progressCard.waitAnswer → {waited['state']}: {', '.join(answer.get('options', []))} "
                f"(by {by}, from the chat)")
            await asyncio.sleep(delay)
            continue
        else:
            raise DemoError(f"example entry {number}: expected card, activity, run or reset")
        say(f"[{number}] agent: {what}")
        await asyncio.sleep(delay)


async def _shown(api: BotAPIEmulator, text: str) -> None:
    """Until the chat shows `text` (bounded: the demo goes on without it)."""
    try:
        await api.wait_for(lambda: any(text in t for t in api.chat(CHAT).texts()), PING_SECONDS)
    except TimeoutError:
        pass


async def _press(api: BotAPIEmulator, console: ChatConsole, label: str, out: TextIO) -> None:
    """The chat's person presses `label` on the ask as soon as it shows (as a person
    would, from the phone), and sees the bot's answer to the press. The press is
    printed after the message it presses."""
    def ask() -> int | None:
        for message in reversed(api.chat(CHAT).visible()):
            buttons = [b.get("text") for row in (message.reply_markup or {}).get("inline_keyboard", []) for b in row]
            if label in buttons:
                return message.message_id
        return None

    message_id = await api.wait_for(ask, PING_SECONDS)
    await api.wait_for(console.shown_all, PING_SECONDS)  # the send that made it, answered and printed
    query = api.press(CHAT, message_id, label, first_name="Dana")
    print(f"  you press [{label}] on message {message_id}", file=out, flush=True)
    await api.wait_for(lambda: api.callback(query).answered, PING_SECONDS)
    print(f"  bot → {api.callback(query).text}", file=out, flush=True)


async def _enter_pressed() -> None:
    """Until a line (or end of input) arrives on stdin, without a thread that would
    keep the process alive after Ctrl-C."""
    loop = asyncio.get_running_loop()
    ready = asyncio.Event()
    loop.add_reader(sys.stdin.fileno(), ready.set)
    try:
        await ready.wait()
    finally:
        loop.remove_reader(sys.stdin.fileno())


def _interactive() -> bool:
    try:
        return sys.stdin.isatty() and os.getpgrp() == os.tcgetpgrp(sys.stdin.fileno())
    except OSError:
        return False


async def run_demo(
    args: argparse.Namespace, settings: Settings, *, out: TextIO | None = None, interactive: bool | None = None
) -> None:
    out = out or sys.stdout
    interactive = _interactive() if interactive is None else interactive
    for warning in check_token_strength(settings, settings.gateway.listen):  # refuses beyond loopback
        print(f"progresscast demo: warning: {warning}", file=sys.stderr)
    token = secrets.token_urlsafe(18)
    serving = bool(getattr(args, "serve", False))
    delay = args.delay if args.delay is not None else (SERVE_DELAY if serving else DEFAULT_DELAY)
    # SIGTERM (as `--help` promises) stops the demo as Ctrl-C does: its Redis and its
    # home go with it (uncaught, the signal would end the process and leave both).
    stopping = stop_on_sigterm(log)
    home = Path(tempfile.mkdtemp(prefix="progresscast-demo-"))
    try:
        url = await asyncio.to_thread(ensure_embedded, home)
        await _play_demo(args, settings, url, token, delay, serving, interactive, out)
    except asyncio.CancelledError:
        if not stopping.is_set():
            raise  # Ctrl-C: asyncio.run turns this into KeyboardInterrupt
    finally:
        await asyncio.to_thread(stop_embedded, home)
        shutil.rmtree(home, ignore_errors=True)


async def _play_demo(
    args: argparse.Namespace, settings: Settings, url: str, token: str, delay: float, serving: bool,
    interactive: bool, out: TextIO,
) -> None:
    """The demo on the store at `url` (its own)."""
    from .telegram.bot import run_adapter

    tasks: list[asyncio.Task[Any]] = []
    async with BotAPIEmulator(DEMO_TOKEN) as api:
        settings = demo_settings(settings, token, api)
        redis = connect(url, settings)
        owner = Owner(agent_id=settings.agents.default, session_key=SESSION)
        # The configured address, or any free port when something else holds it.
        sock = bind(settings.gateway.listen, fallback=True)
        base = address(sock)
        started = asyncio.Event()
        console = ChatConsole(api, CHAT, out)
        try:
            tasks.append(asyncio.create_task(run_gateway(settings, redis, sock=sock, started=started)))
            tasks.append(asyncio.create_task(run_adapter(settings, redis)))
            await asyncio.wait_for(started.wait(), 10)
            # The adapter polls once it has subscribed the chat to the demo session.
            await api.wait_for(lambda: any(c.method == "getUpdates" for c in api.calls), 30)
            page = f"{base}/sessions/{quote(owner.display_key, safe=':')}?token={token}"
            print(f"progresscast demo: gateway and web page on {base}, on its own temporary store", file=out)
            if getattr(args, "redis", None):
                print("(--redis is not used: the demo never touches another store)", file=out)
            print(f"Watch the card live: {page}", file=out)
            print(f"(RPC: POST {base}/v1/rpc with 'Authorization: Bearer {token}')", file=out)
            print(
                f"A Telegram chat follows {owner.display_key}: the real adapter, talking to the Bot API "
                "emulator. What the chat shows is printed below as it happens.",
                file=out,
            )
            print(file=out, flush=True)
            tasks.append(asyncio.create_task(console.run()))
            headers = {"Authorization": f"Bearer {token}"}
            async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client:
                # A new run id each time: the chat's draft state remembers runs it finished.
                await play(
                    Rpc(client), owner, delay=delay, out=out, run_id=f"{RUN_ID}-{secrets.token_hex(4)}",
                    pinged=lambda: _shown(api, NEEDS_YOU), press=lambda label: _press(api, console, label, out),
                )
            answer = next(e["activity"]["answer"] for e in example_session() if "answer" in e.get("activity", {}))
            try:
                await api.wait_for(lambda: any(answer[:40] in t for t in api.chat(CHAT).texts()), SETTLE_SECONDS)
            except TimeoutError:
                print(f"(the chat did not show the final answer within {SETTLE_SECONDS:.0f} s)", file=out)
            console.catch_up()
            print(file=out)
            if serving:
                print(f"Still serving on {base} — press Ctrl-C to stop.", file=out, flush=True)
                await asyncio.Event().wait()
            elif interactive:
                print(f"The page stays up at {page}\nPress Enter (or Ctrl-C) to stop.", file=out, flush=True)
                await _enter_pressed()
            else:
                print(
                    "Demo done (stdin is not a terminal, so it ends here; in a terminal the page stays up "
                    "until Enter). `progresscast demo --serve` keeps serving.",
                    file=out, flush=True,
                )
        finally:
            for task in reversed(tasks):  # the console, the adapter, then the gateway
                task.cancel()
                # Bounded: a long poll the adapter is in may hold it; the demo ends anyway.
                done, _ = await asyncio.wait([task], timeout=SHUTDOWN_SECONDS)
                if task in done and not task.cancelled() and task.exception() is not None:
                    print(f"(stopping: {task.exception()})", file=out)
            await redis.aclose()
