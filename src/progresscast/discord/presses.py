"""The Discord transport of presses and typed answers (`channels.asks`): a button pressed
on an ask or on a draft's Stop (a signed `MESSAGE_COMPONENT` interaction), and a typed
answer — the modal a "Type an answer…" press opens, submitted (`MODAL_SUBMIT`) — each
turned into a `Press` for the one handler.

What the person is told comes back at once as an ephemeral message (type 4, flag 64)
that only they see; the ask message itself is edited to its outcome by its lane, as on
every platform. Not type 7 (`UPDATE_MESSAGE`): a press that changes nothing (a
bystander, a second press, a late one) must still be told why, and the message's new
look is the lane's to send, paced with the channel's other calls.

A "Type an answer…" press from someone who may answer is answered with the modal (type
9), whose `custom_id` names the ask message (`pc:m:<message id>`): its submit is then a
typed answer to that message, looked up and checked like a reply on other platforms.
Every answer leaves within Discord's 3 seconds: a press that takes longer goes on, and
the person is told the message will show the outcome.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import replace
from pathlib import Path
from typing import Any

from starlette.responses import JSONResponse, Response

from ..channels.asks import Press
from ..channels.worker import ChannelWorker
from ..model.asks import parse_control
from ..render.asks import word
from ..render.discord_payload import ANSWER_INPUT, MODAL_PREFIX, answer_modal
from .channel import NO_THREAD, PLATFORM
from .interactions import MESSAGE_COMPONENT, answer_of, manages_channels, reply

log = logging.getLogger("progresscast.discord")

MODAL = 9
DEADLINE = 2.5
"""Seconds a press may take before the person is answered anyway (Discord waits 3)."""
FAILED = "Sorry, that did not work. Try again in a moment."
SLOW = "Still working on it: the message will show the outcome in a moment."


def person(payload: dict[str, Any]) -> Press | str:
    """Who pressed, and where (no control yet); or why the interaction names nobody."""
    channel = payload.get("channel_id")
    if not isinstance(channel, str) or not channel.isdigit():
        return "the interaction names no channel"
    member = payload.get("member")
    group = isinstance(member, dict)  # a server's channel; without a member, a DM with the bot
    user = (member if isinstance(member, dict) else payload).get("user")
    if not isinstance(user, dict) or not str(user.get("id", "")).isdigit():
        return "the interaction names no user"
    user_id = str(user["id"])
    nick = member.get("nick") if isinstance(member, dict) else None
    name = next((str(n) for n in (nick, user.get("global_name"), user.get("username")) if n), user_id)
    return Press(
        platform=PLATFORM, destination=channel, thread=NO_THREAD, user=user_id, name=name, group=group,
        may_change=answer_of(manages_channels(member) if isinstance(member, dict) else True),
    )


def _typed_text(components: Any) -> str | None:
    """The answer's text input value in a modal submit (in a row, or a label's `component`)."""
    for c in components if isinstance(components, list) else ():
        if not isinstance(c, dict):
            continue
        if c.get("custom_id") == ANSWER_INPUT and isinstance(c.get("value"), str):
            return str(c["value"])
        inner = c.get("components") or ([c["component"]] if isinstance(c.get("component"), dict) else [])
        found = _typed_text(inner)
        if found is not None:
            return found
    return None


class DiscordPresses:
    def __init__(self, worker: ChannelWorker, templates_dir: str | Path | None = None) -> None:
        self.worker = worker
        self.templates_dir = templates_dir
        self._slow: set[asyncio.Task[Any]] = set()

    async def receive(self, payload: dict[str, Any]) -> Response:
        """A signed component interaction or modal submit: the response to send Discord."""
        who = person(payload)
        if isinstance(who, str):
            return reply(f"Sorry, {who}.")
        try:
            await self.worker.spoke(who.destination)
            data = payload.get("data")
            data = data if isinstance(data, dict) else {}
            if payload.get("type") == MESSAGE_COMPONENT:
                return await self._pressed(payload, data, who)
            return await self._submitted(data, who)
        except Exception:
            log.exception("a press in channel %s failed", who.destination)
            return reply(FAILED)

    async def _pressed(self, payload: dict[str, Any], data: dict[str, Any], who: Press) -> Response:
        control = str(data.get("custom_id", ""))
        message = payload.get("message")
        message_id = str(message.get("id", "")) if isinstance(message, dict) else ""
        press = replace(who, control=control, message_id=message_id if message_id.isdigit() else None)
        text = await self._within(self.worker.presses.press(press)) or FAILED
        parsed = parse_control(control)
        # The handler says how to type an answer only to someone who may answer this ask here.
        if parsed is not None and parsed[0] == "t" and text == word("reply_hint") and message_id.isdigit():
            return JSONResponse({"type": MODAL, "data": answer_modal(message_id, self.templates_dir)})
        return reply(text)

    async def _submitted(self, data: dict[str, Any], who: Press) -> Response:
        custom_id = str(data.get("custom_id", ""))
        message_id = custom_id.removeprefix(MODAL_PREFIX)
        if not custom_id.startswith(MODAL_PREFIX) or not message_id.isdigit():
            return reply(word("not_here"))
        text = _typed_text(data.get("components"))
        if not text or not text.strip():
            return reply(word("bad_answer", rule="an answer needs a text"))
        answer = await self._within(self.worker.presses.typed(replace(who, message_id=message_id, text=text)))
        return reply(answer if answer is not None else word("not_here"))

    async def _within(self, work: Awaitable[str | None]) -> str | None:
        """`work`'s answer, or `SLOW` once Discord's deadline nears (the work goes on)."""
        task = asyncio.ensure_future(work)
        try:
            return await asyncio.wait_for(asyncio.shield(task), DEADLINE)
        except TimeoutError:
            self._slow.add(task)
            task.add_done_callback(self._slow.discard)
            return SLOW


__all__ = ["DiscordPresses", "person"]
