"""The Slack transport of presses and typed answers (`channels.asks`): a button of an
ask's message or of a draft (Stop), pressed in Slack and sent as a signed
`block_actions` interaction, and a person's reply in an ask's thread, each turned into a
`Press` for the one handler.

    POST /slack/interactions   Slack's Interactivity Request URL: `payload=<JSON>`,
                               form-encoded, signed like slash commands

An interaction is acknowledged at once (Slack waits three seconds, and a press may wait
for its ask message's send to settle); the press is then taken, and the person is told
what it did by an ephemeral message through the interaction's `response_url` (seen only
by them). Who may press is decided in `channels.asks`; in a channel, "may change its
settings" is what it is for the slash command — whoever can use the app there (Slack
lets the workspace decide who can use an app where), so a channel's `answerers` only
add people. A typed answer comes as an Events API `message` event
(`message.channels`, `message.groups`, `message.im` subscriptions; scopes
`channels:history`, `groups:history`, `im:history`) whose `thread_ts` is the ask
message's `ts`; its author is named by `users.info` (scope `users:read`; else by their
id), and told what it did by a message only they see (`chat.postEphemeral`; a reply in
the thread where Slack refuses that).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from slack_sdk.webhook.async_client import AsyncWebhookClient
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..channels.asks import Press
from ..channels.worker import ChannelWorker
from ..http.body import raw_form
from ..model.asks import STOP_CONTROL, AskState
from ..model.card import CardError, escape_lone_surrogates, reject_lone_surrogates
from .channel import NO_THREAD, PLATFORM
from .client import SlackClient

log = logging.getLogger("progresscast.slack")

Verified = Callable[[Request], Awaitable[bytes | None]]

ANSWER_TIMEOUT = 10
"""Seconds to post the ephemeral answer to a press's `response_url`."""
_UNESCAPES = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


def is_group(channel: str) -> bool:
    """Channels (C…) and private channels (G…) are read by several people; D… is a DM."""
    return not channel.startswith("D")


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def presses_of(payload: dict[str, Any]) -> tuple[list[Press], str]:
    """A `block_actions` payload's presses and its `response_url`; `ValueError` naming
    the field that is missing or wrong."""
    container, message = _dict(payload.get("container")), _dict(payload.get("message"))
    user = _dict(payload.get("user"))
    channel = _text(_dict(payload.get("channel")).get("id")) or _text(container.get("channel_id"))
    ts = _text(container.get("message_ts")) or _text(message.get("ts"))
    user_id = _text(user.get("id"))
    actions = payload.get("actions")
    for name, value in (("channel.id", channel), ("container.message_ts", ts), ("user.id", user_id)):
        if not value:
            raise ValueError(f"payload.{name} is required (a string)")
    if not isinstance(actions, list) or not actions:
        raise ValueError("payload.actions must be a non-empty array")
    thread = _text(container.get("thread_ts")) or _text(message.get("thread_ts"))
    name = _text(user.get("name")) or _text(user.get("username")) or user_id
    presses = []
    for i, action in enumerate(actions):
        control = _text(_dict(action).get("action_id"))
        if not control:
            raise ValueError(f"payload.actions[{i}].action_id is required (a string)")
        presses.append(Press(
            platform=PLATFORM, destination=channel, thread=thread if thread and thread != ts else NO_THREAD,
            user=user_id, name=name, control=control, message_id=ts, group=is_group(channel),
        ))
    return presses, _text(payload.get("response_url"))


def thread_reply(event: Any, *, own_user: str | None, own_bot: str | None) -> tuple[str, str, str, str] | None:
    """A person's reply in a thread — (channel, thread_ts, user, text) — from a `message`
    event; None for anything else (the app's own messages, other apps', edits)."""
    if not isinstance(event, dict) or event.get("type") != "message" or (own_user is None and own_bot is None):
        return None
    if str(event.get("subtype") or "") not in ("", "thread_broadcast") or event.get("bot_id"):
        return None
    channel, ts, thread = _text(event.get("channel")), _text(event.get("ts")), _text(event.get("thread_ts"))
    user, text = _text(event.get("user")), _text(event.get("text"))
    if not (channel and ts and thread and user and text) or thread == ts:
        return None
    if user == own_user:
        return None
    for entity, char in _UNESCAPES:  # Slack sends a person's text with &, <, > escaped
        text = text.replace(entity, char)
    return channel, thread, user, text


def session_stop(event: Any) -> Press | None:
    """Slack's stop button on a thread's agent session — an `agent_session_stopped`
    event — as a confirmed Stop of the draft followed in that thread (it names the
    person by id only); None for anything else."""
    if not isinstance(event, dict) or event.get("type") != "agent_session_stopped":
        return None
    channel, thread, user = _text(event.get("channel")), _text(event.get("thread_ts")), _text(event.get("user"))
    if not (channel and thread and user):
        return None
    return Press(
        platform=PLATFORM, destination=channel, thread=thread, user=user, name=user, control=STOP_CONTROL,
        group=is_group(channel), confirmed=True,
    )


class SlackPresses:
    def __init__(self, worker: ChannelWorker, verified: Verified) -> None:
        self.worker = worker
        self.verified = verified
        """The signature check the slash commands use (`commands.SlackCommands`)."""
        self._tasks: set[asyncio.Task[None]] = set()

    def routes(self) -> list[Route]:
        return [Route("/slack/interactions", self.interaction, methods=["POST"])]

    def _spawn(self, work: Awaitable[None]) -> None:
        task: asyncio.Task[None] = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def interaction(self, request: Request) -> Response:
        body = await self.verified(request)
        if body is None:
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        try:
            payload = json.loads(raw_form(body).get("payload", ""))
            reject_lone_surrogates(payload)
        except CardError as exc:
            return JSONResponse({"error": escape_lone_surrogates(str(exc))}, status_code=400)
        except (ValueError, RecursionError):
            return JSONResponse({"error": "payload must be JSON (form field payload)"}, status_code=400)
        if not isinstance(payload, dict):
            return JSONResponse({"error": "payload must be a JSON object"}, status_code=400)
        if payload.get("type") != "block_actions":
            return Response(status_code=200)  # other interactions (shortcuts, modals) are not ours
        try:
            presses, response_url = presses_of(payload)
        except ValueError as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        # Acknowledged now: Slack waits three seconds, and a press may wait for its ask
        # message's send to settle.
        self._spawn(self._take(presses, response_url))
        return Response(status_code=200)

    async def _take(self, presses: list[Press], response_url: str) -> None:
        for press in presses:
            text = "Sorry, that did not work. Try again in a moment."
            try:
                await self.worker.spoke(press.destination)
                text = await self.worker.presses.press(press)
            except Exception:
                log.exception("a press in channel %s failed", press.destination)
            await self._answer(response_url, text)

    async def _answer(self, response_url: str, text: str) -> None:
        """Tell the presser, and only them (an ephemeral message; the pressed message stays)."""
        if not response_url:
            return
        escaped = escape_lone_surrogates(text)
        for entity, char in _UNESCAPES[::-1]:
            escaped = escaped.replace(char, entity)
        try:
            reply = await AsyncWebhookClient(response_url, timeout=ANSWER_TIMEOUT).send(
                text=escaped, response_type="ephemeral", replace_original=False
            )
            if reply.status_code != 200:
                log.info("answering a press: Slack answered HTTP %s", reply.status_code)
        except Exception as exc:  # too late, or Slack unreachable: the press itself was taken
            log.info("answering a press failed: %s", exc)

    def heard(self, event: Any, *, own_user: str | None, own_bot: str | None) -> None:
        """A `message` event: a person's reply in an ask's thread is its typed answer
        (taken after the event is acknowledged)."""
        reply = thread_reply(event, own_user=own_user, own_bot=own_bot)
        if reply is not None:
            self._spawn(self._typed(*reply))

    def session_stopped(self, event: Any) -> None:
        """An `agent_session_stopped` event: Stop, taken as a press of it is, by the same
        rules (after the event is acknowledged); the draft says who stopped the run."""
        press = session_stop(event)
        if press is not None:
            self._spawn(self._session_stop(press))

    async def _session_stop(self, press: Press) -> None:
        try:
            await self.worker.spoke(press.destination)
            text = await self.worker.presses.press(press)
        except Exception:
            log.exception("a stop of the agent session in channel %s failed", press.destination)
            return
        log.info("agent session stopped in channel %s by %s: %s", press.destination, press.user, text)

    async def _typed(self, channel: str, thread: str, user: str, text: str) -> None:
        slack = self.worker.channel.client
        assert isinstance(slack, SlackClient)  # the Slack worker's channel is Slack's
        try:
            asked = await self._ask_message(channel, thread)
            if asked is None:
                return
            # Named as a press names them (its payload carries the handle; an event only the id).
            name = await slack.handle_of(user) or user
            answer = await self.worker.presses.typed(Press(
                platform=PLATFORM, destination=channel, thread=thread, user=user, name=name,
                message_id=asked, text=text, group=is_group(channel),
            ))
        except Exception:
            log.exception("a reply in channel %s failed", channel)
            return
        if answer is None:
            return
        # Seen by the person alone, as a press's answer is; in the thread for all only
        # when Slack will not whisper it.
        if (await slack.whisper(channel, thread, user, answer)).delivered:
            return
        self.worker.say(channel, thread, answer)

    async def _ask_message(self, channel: str, thread: str) -> str | None:
        """The ask message a reply in `thread` answers: the thread's own first message
        when that is an ask; else, in a follow's thread (where asks are replies), the one
        ask still open there."""
        records = self.worker.asks.records
        if await records.by_message(channel, thread) is not None:
            return thread
        open_here = [
            r for r in (await records.all(channel)).values()
            if str(r.thread) == thread and r.shown == AskState.open.value
        ]
        return str(open_here[0].message_id) if len(open_here) == 1 else None


__all__ = ["SlackPresses", "is_group", "presses_of", "session_stop", "thread_reply"]
