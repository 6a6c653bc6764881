"""`progresscast emulator matrix`: a private Synapse homeserver (from the test extra)
with a bot account, a person and a room of theirs, so anyone can try the Matrix adapter
without an account anywhere. Lines typed on stdin are messages of the person in the
room (`!pc follow ticket-4821`); what the room shows is printed as it happens, read as
the person's client reads it (`/sync`). Ctrl-C stops Synapse and removes its data."""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import socket
import sys
import time
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from ..arguments import UsageError
from ..config.errors import ConfigError
from ..render.matrix_payload import notice_html
from ..testing import asks, press_words
from ..testing.synapse import CLIENT, Account, Synapse
from .emulator_config import Emulated, offer_config
from .typed_lines import serve_typing

SYNC_WAIT_MS = 30_000
"""How long one `/sync` of the person's client waits for news."""


def _check_port(port: int) -> None:
    """A port in use is a mistake of the command line, said before Synapse tries it."""
    if not port:
        return
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as exc:
            raise ConfigError(f"--port: cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None


async def run_matrix_emulator(args: argparse.Namespace, *, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    if importlib.util.find_spec("synapse") is None:
        raise UsageError("emulator matrix needs matrix-synapse: install the test extra: pip install -e '.[test]'")
    _check_port(args.port)
    server = Synapse(port=args.port)
    try:
        try:
            await asyncio.to_thread(server.start)
        except Synapse.Unavailable as exc:
            reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
            print(f"progresscast: Synapse did not start: {reason}", file=sys.stderr)
            raise SystemExit(1) from None
        bot = await asyncio.to_thread(server.register, "bot")
        # The person administers the room (so may change what it follows) and, as
        # the tests' people, is spared Synapse's rate limits; the bot is not.
        person = await asyncio.to_thread(server.register, "person", admin=True, exempt=True)
        room = await asyncio.to_thread(server.create_room, person, invite=[bot.user_id])
        await _console(args, out, server, bot, person, room)
    finally:  # Ctrl-C or SIGTERM (run_emulator): Synapse stops and its data goes
        await asyncio.to_thread(server.stop)


async def _console(
    args: argparse.Namespace, out: TextIO, server: Synapse, bot: Account, person: Account, room: str
) -> None:
    def say(text: str) -> None:
        print(text, file=out, flush=True)

    say(f"Synapse homeserver on {server.url} (its data in {server.dir}, removed when this stops)")
    say(f"The bot: {bot.user_id}")
    say(f"You: {person.user_id}, password {person.password} (log in at {server.url} with a Matrix app, "
        "or type here)")
    say(f"Room {room}: yours, the bot invited (it joins once `progresscast serve` runs)")
    emulated = Emulated("matrix", {
        "homeserver": server.url, "userId": bot.user_id, "accessToken": bot.access_token,
    }, "rooms", room)  # fmt: skip
    offer_config(out, emulated, args.write_config, args.redis)
    say("Type as the person in the room, e.g. !pc follow ticket-4821 (Enter sends it); what the room shows "
        "is printed as it happens. `press N` reacts N to the bot's newest open question (its option N; "
        "`press N on MESSAGE`: to that message), `reply TEXT` replies to that question. Ctrl-C stops Synapse "
        "and removes its data.")
    async with httpx.AsyncClient(
        base_url=server.url, headers={"Authorization": f"Bearer {person.access_token}"}, timeout=60
    ) as http:
        client = _Client(http, room, bot.user_id, out)
        since = await client.sync(None, 0, show=False)  # what the room holds already is not news

        async def printer() -> None:
            nonlocal since
            while True:
                try:
                    since = await client.sync(since, SYNC_WAIT_MS)
                except httpx.HTTPError as exc:
                    say(f"  (the homeserver did not answer: {exc or type(exc).__name__})")
                    await asyncio.sleep(1)

        await serve_typing(printer, client.typed, out)


class _Client:
    """The person's client: sends what is typed, prints the bot's messages as they come."""

    def __init__(self, http: httpx.AsyncClient, room: str, bot: str, out: TextIO) -> None:
        self.http = http
        self.room = room
        self.bot = bot
        self.out = out
        self.open_asks: dict[str, None] = {}
        """The bot's questions still open (their first line says who `asks:`), oldest
        first: what `press` and `reply` answer — never a draft, which takes no number."""
        self._txn = 0

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    async def sync(self, since: str | None, wait_ms: int, *, show: bool = True) -> str:
        room_filter = {"rooms": [self.room], "timeline": {"limit": 50}, "state": {"lazy_load_members": True}}
        params: dict[str, Any] = {
            "timeout": str(wait_ms),
            "filter": json.dumps({"room": room_filter, "presence": {"not_types": ["*"]}}),
        }
        if since:
            params["since"] = since
        reply = await self.http.get(f"{CLIENT}/sync", params=params, timeout=wait_ms / 1000 + 30)
        reply.raise_for_status()
        data = reply.json()
        if show:
            joined = data.get("rooms", {}).get("join", {}).get(self.room, {})
            for event in joined.get("timeline", {}).get("events", []):
                self._show(event)
        return str(data["next_batch"])

    def _show(self, event: dict[str, Any]) -> None:
        if event.get("sender") != self.bot:
            return
        kind, content = event.get("type"), event.get("content") or {}
        if kind == "m.room.member" and content.get("membership") == "join":
            self.say("  (the bot joins the room)")
        elif kind == "m.room.redaction":
            self.say("  ✕ the bot deletes a message")
        elif kind == "m.reaction":
            self.say(f"  the bot reacts {content.get('m.relates_to', {}).get('key', '')}")
        elif kind == "m.room.message":
            relation = content.get("m.relates_to") or {}
            if relation.get("rel_type") == "m.replace":
                edited, body = str(relation.get("event_id")), content.get("m.new_content", {}).get("body", "")
                if not asks(body):
                    self.open_asks.pop(edited, None)  # answered, expired or withdrawn
                self._lines(f"  ✎ the bot edits message {edited}:", body)
            elif "formatted_body" not in content or (
                content.get("msgtype") == "m.notice"
                and content["formatted_body"] == notice_html(content.get("body", ""))
            ):
                # A command's reply or a ping. An ask is formatted as plainly but is an
                # `m.text` (it notifies): it is what `press`/`reply` answer.
                self._lines("  bot →", content.get("body", ""), inline=True)
            else:
                sent, body = str(event.get("event_id")), content.get("body", "")
                if asks(body):
                    self.open_asks[sent] = None
                self._lines(f"  ＋ the bot sends message {sent}:", body)

    def _lines(self, head: str, body: str, *, inline: bool = False) -> None:
        rows = str(body or "(empty)").split("\n")
        if inline:
            self.say(f"{head} {rows[0]}" + "".join(f"\n    {row}" for row in rows[1:]))
        else:
            self.say(head + "".join(f"\n    │ {row}" for row in rows))

    async def typed(self, text: str) -> None:
        word, _, rest = text.partition(" ")
        newest = next(reversed(self.open_asks), None)
        pressed = press_words(rest) if word == "press" else None
        if (word == "reply" or (pressed is not None and pressed[1] is None)) and newest is None:
            self.say("  (no open question to answer; press N on MESSAGE reacts to another message)")
            return
        if word == "reply" and not rest.strip():
            self.say("  (reply TEXT: the answer to the newest open question)")
            return
        if pressed is not None:
            n, target = pressed[0], pressed[1] or newest
            content: dict[str, Any] = {"m.relates_to": {"rel_type": "m.annotation", "event_id": target, "key": str(n)}}
            kind, echo = "m.reaction", f"you react {n} to message {target}"
        elif word == "reply" and rest.strip():
            content = {
                "msgtype": "m.text", "body": rest.strip(), "m.relates_to": {"m.in_reply_to": {"event_id": newest}}
            }
            kind, echo = "m.room.message", f"you reply to message {newest}: {rest.strip()}"
        else:
            content, kind, echo = {"msgtype": "m.text", "body": text}, "m.room.message", f"you → {text}"
        self._txn += 1
        path = f"{CLIENT}/rooms/{quote(self.room)}/send/{kind}/pc{self._txn}.{time.monotonic_ns()}"
        try:
            reply = await self.http.put(path, json=content)
        except httpx.HTTPError as exc:
            self.say(f"  (the homeserver did not answer: {exc or type(exc).__name__})")
            return
        if reply.status_code >= 400:
            self.say(f"  (the homeserver refused it: {reply.status_code} {reply.text[:200]})")
            return
        self.say(f"  {echo}")


__all__ = ["run_matrix_emulator"]
