"""`POST /discord/interactions`: Discord's HTTP interactions, on the gateway.

The transport only: the body is read with a bound (413 past it, before it is all
read), its Ed25519 signature — `X-Signature-Ed25519` over `X-Signature-Timestamp` +
the raw body, with the application's public key — is checked with PyNaCl (401 on a
bad one, with nothing done), a `PING` is answered `PONG`, and a `/progresscast`
command becomes one `channels.commands.Invocation` (the channel — a thread is a channel
of its own —, the person, whether they hold Manage Channels, the subcommand and its
option values), handed to the command handler (`commands.py`); its answer goes back at
once as an ephemeral message (type 4, flag 64) — within Discord's 3 seconds, as no
command waits on Discord. When the handler says nothing (a stranger's channel that
already has a pairing code pending), the answer is an empty 204: Discord then shows
the person only that the app did not respond. A button pressed or a modal submitted
(types 3 and 5) goes to the presses handler (`presses.py`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..channels.chat.commands import Invocation, MayChange
from ..http.body import read_body
from ..http.errors import ApiError
from ..model.card import escape_lone_surrogates
from ..render.discord import escape
from .channel import NO_THREAD, PLATFORM

log = logging.getLogger("progresscast.discord")

PATH = "/discord/interactions"
MAX_BODY = 64 * 1024
"""Discord's interactions are a few KiB; anything much larger is not Discord."""
MAX_SKEW = 300
"""Seconds a signed timestamp may be off: an old signed body replayed is refused."""
COMMAND = "progresscast"

PING, APPLICATION_COMMAND, MESSAGE_COMPONENT, MODAL_SUBMIT = 1, 2, 3, 5
PONG, CHANNEL_MESSAGE = 1, 4
EPHEMERAL = 1 << 6
ADMINISTRATOR, MANAGE_CHANNELS = 1 << 3, 1 << 4
MAX_REPLY = 2000

Handler = Callable[[Invocation], Awaitable[str | None]]
"""The answer to one command (plain text), or None: say nothing."""
PressHandler = Callable[[dict[str, Any]], Awaitable[Response]]
"""The response to a signed button press or modal submit."""


def _refuse(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def reply(text: str) -> JSONResponse:
    """An ephemeral message only the person who typed the command sees; what they typed
    may come back in it, so it is escaped, and it can ping nobody."""
    content = escape(escape_lone_surrogates(text))
    if len(content) > MAX_REPLY:
        content = content[: MAX_REPLY - 1] + "…"
    data = {"content": content, "flags": EPHEMERAL, "allowed_mentions": {"parse": []}}
    return JSONResponse({"type": CHANNEL_MESSAGE, "data": data})


def manages_channels(member: dict[str, Any]) -> bool:
    """Manage Channels (or Administrator) in the channel, as the interaction's
    `member.permissions` says (Discord computes them for that channel)."""
    try:
        permissions = int(str(member.get("permissions", "0")))
    except ValueError:
        return False
    return bool(permissions & (MANAGE_CHANNELS | ADMINISTRATOR))


def answer_of(value: bool) -> MayChange:
    async def may_change() -> bool:
        return value

    return may_change


def invocation(payload: dict[str, Any]) -> Invocation | str:
    """The command an interaction carries, or why it carries none."""
    data = payload.get("data")
    if not isinstance(data, dict) or data.get("name") != COMMAND:
        return f"this app only answers /{COMMAND}"
    # Signed by Discord, but read defensively all the same: an odd shape is a reply, never a 500.
    where = payload.get("channel")
    channel = payload.get("channel_id") or (where.get("id") if isinstance(where, dict) else None)
    if not isinstance(channel, str) or not channel.isdigit():
        return "the interaction names no channel"
    member = payload.get("member")
    group = isinstance(member, dict)  # a server's channel; without a member, a DM with the bot
    user = (member if isinstance(member, dict) else payload).get("user") or {}
    options = data.get("options")
    sub = options[0] if isinstance(options, list) and options and isinstance(options[0], dict) else {"name": "help"}
    values = sub.get("options")
    args = tuple(str(o.get("value", "")) for o in values if isinstance(o, dict)) if isinstance(values, list) else ()
    return Invocation(
        platform=PLATFORM,
        destination=channel,
        thread=NO_THREAD,
        user=str(user.get("id", "")) if isinstance(user, dict) else "",
        word=str(sub.get("name", "help")),
        args=args,
        group=group,
        may_change=answer_of(manages_channels(member) if isinstance(member, dict) else True),
    )


class DiscordInteractions:
    def __init__(self, public_key: str, handler: Handler, presses: PressHandler | None = None) -> None:
        self.verify_key = VerifyKey(bytes.fromhex(public_key))
        self.handler = handler
        self.presses = presses

    def routes(self) -> list[Route]:
        return [Route(PATH, self.receive, methods=["POST"])]

    def _verified(self, request: Request, body: bytes) -> bool:
        signature = request.headers.get("x-signature-ed25519", "")
        stamp = request.headers.get("x-signature-timestamp", "")
        if not stamp.isdigit() or abs(time.time() - int(stamp)) > MAX_SKEW:
            return False
        try:
            self.verify_key.verify(stamp.encode() + body, bytes.fromhex(signature))
        except (BadSignatureError, ValueError):
            return False
        return True

    async def receive(self, request: Request) -> Response:
        try:
            body = await read_body(request, MAX_BODY)
        except ApiError as exc:
            return _refuse(413 if exc.code == "body_too_large" else exc.status, exc.message)
        if not self._verified(request, body):
            return _refuse(401, "invalid request signature")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            return _refuse(400, "the body is not JSON")
        if not isinstance(payload, dict):
            return _refuse(400, "the body is not a JSON object")
        kind = payload.get("type")
        if kind == PING:
            return JSONResponse({"type": PONG})
        if kind in (MESSAGE_COMPONENT, MODAL_SUBMIT) and self.presses is not None:
            return await self.presses(payload)
        if kind != APPLICATION_COMMAND:
            return _refuse(400, f"interaction type {kind!r} is not handled")
        found = invocation(payload)
        if isinstance(found, str):
            return reply(f"Sorry, {found}.")
        answer = await self.handler(found)
        return Response(status_code=204) if answer is None else reply(answer)


__all__ = [
    "MESSAGE_COMPONENT", "MODAL_SUBMIT", "PATH", "DiscordInteractions", "answer_of", "invocation", "manages_channels",
    "reply",
]
