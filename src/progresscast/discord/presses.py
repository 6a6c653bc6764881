"""The Discord transport of presses and typed answers (`channels.asks`): a button pressed
on an ask or on a draft's Stop (a signed `MESSAGE_COMPONENT` interaction), and a typed
answer — the modal a "Type an answer…" press opens, submitted (`MODAL_SUBMIT`) — each
turned into a `Press` for the one handler.

A press that wins — it answers the ask, or arms or records Stop — is answered with
type 7 (`UPDATE_MESSAGE`), as Discord documents for a button: the pressed message as it
now looks (the outcome without buttons; the draft whose Stop reads "Press again to
stop", or says it is stopping), rendered by the destination's renderer the lane uses
for that message, of the message's own kind (Components V2 or plain). The lane's own
edit follows, paced, with the same body: it changes nothing the person sees. A press
that changes nothing (a bystander, a second press, a late one) is told why in an
ephemeral message (type 4, flag 64) only the presser sees. A modal submit carries the
message its button was on (Discord sends it for a modal opened from a component), so a
typed answer updates the ask message too; one without it is answered type 4.

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

from ..channels.asks import Press, Pressed
from ..channels.worker import ChannelWorker
from ..model.asks import parse_control
from ..render.asks import word
from ..render.discord import IS_COMPONENTS_V2
from ..render.discord_payload import ANSWER_INPUT, MODAL_PREFIX, DiscordRenderers, answer_modal, of_kind
from ..render.payload import Payload
from .channel import NO_THREAD, PLATFORM
from .client import message_body
from .interactions import MESSAGE_COMPONENT, answer_of, manages_channels, reply

log = logging.getLogger("progresscast.discord")

UPDATE_MESSAGE, MODAL = 7, 9
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


def _message_of(payload: dict[str, Any]) -> dict[str, Any] | None:
    """The message the component was on (a modal's: the one its button was on), if any."""
    message = payload.get("message")
    return message if isinstance(message, dict) else None


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


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
            return await self._submitted(payload, data, who)
        except Exception:
            log.exception("a press in channel %s failed", who.destination)
            return reply(FAILED)

    async def _pressed(self, payload: dict[str, Any], data: dict[str, Any], who: Press) -> Response:
        control = str(data.get("custom_id", ""))
        message = _message_of(payload)
        message_id = str(message.get("id", "")) if message is not None else ""
        press = replace(who, control=control, message_id=message_id if message_id.isdigit() else None)
        return await self._within(self._press(press, message))

    async def _press(self, press: Press, message: dict[str, Any] | None) -> Response:
        done = await self.worker.presses.take(press)
        parsed = parse_control(press.control)
        # The handler says how to type an answer only to someone who may answer this ask here.
        if parsed is not None and parsed[0] == "t" and done.text == word("reply_hint") and press.message_id:
            return JSONResponse({"type": MODAL, "data": answer_modal(str(press.message_id), self.templates_dir)})
        return await self._update(done, message) or reply(done.text or FAILED)

    async def _submitted(self, payload: dict[str, Any], data: dict[str, Any], who: Press) -> Response:
        custom_id = str(data.get("custom_id", ""))
        message_id = custom_id.removeprefix(MODAL_PREFIX)
        if not custom_id.startswith(MODAL_PREFIX) or not message_id.isdigit():
            return reply(word("not_here"))
        text = _typed_text(data.get("components"))
        if not text or not text.strip():
            return reply(word("bad_answer", rule="an answer needs a text"))
        message = _message_of(payload)
        # Only the message the modal was opened from may be updated (a crafted submit has none).
        shown = message if message is not None and str(message.get("id", "")) == message_id else None
        return await self._within(self._typed(replace(who, message_id=message_id, text=text), shown))

    async def _typed(self, press: Press, message: dict[str, Any] | None) -> Response:
        done = await self.worker.presses.take_typed(press)
        if done is None:
            return reply(word("not_here"))
        return await self._update(done, message) or reply(done.text)

    async def _update(self, done: Pressed, message: dict[str, Any] | None) -> Response | None:
        """Type 7: the pressed message as it now looks, when this press changed it (None:
        it changed nothing, or there is nothing to show it with — the person is told)."""
        key = done.shows
        if key is None or message is None:
            return None
        try:
            renderers = await self.worker.channel.renderers(key)
            if not isinstance(renderers, DiscordRenderers):
                return None
            payload: Payload | None
            if done.ask is not None:
                payload = renderers.ask(key.owner, done.ask)
            else:
                # The view as the lane reads it: a live run's times on its last whole minute.
                payload = renderers.draft((await self.worker.store.view(key.owner)).at(self.worker.clock()))
            v2 = bool(_int(message.get("flags")) & IS_COMPONENTS_V2)
            shown = of_kind(payload, v2=v2) if payload is not None else None
        except Exception:
            log.exception("rendering a pressed message in channel %s failed", key.chat_id)
            return None
        if shown is None:
            return None
        # The body the lane's edit of the message sends: its later edit changes nothing.
        return JSONResponse({"type": UPDATE_MESSAGE, "data": message_body(shown, edit=True)})

    async def _within(self, work: Awaitable[Response]) -> Response:
        """`work`'s response, or `SLOW` once Discord's deadline nears (the work goes on)."""
        task = asyncio.ensure_future(work)
        try:
            return await asyncio.wait_for(asyncio.shield(task), DEADLINE)
        except TimeoutError:
            self._slow.add(task)
            task.add_done_callback(self._slow.discard)
            return reply(SLOW)


__all__ = ["DiscordPresses", "person"]
