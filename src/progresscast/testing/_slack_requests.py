"""What the emulated Slack sends to the app, signed like Slack: slash commands, Events
API events (a ``message`` event for every new message, in order, one at a time; an
``agent_session_stopped`` when a person presses an agent session's stop button), and
``block_actions`` interactions when a person presses a button (``press``), whose
ephemeral answers through their ``response_url`` are kept (``Interaction``).

Slack signs a request with the app's signing secret: ``X-Slack-Signature`` is ``v0=`` +
the hex HMAC-SHA256 of ``v0:<X-Slack-Request-Timestamp>:<body>``.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import json
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

import httpx

from ._slack import FakeSlack
from ._slack_state import SlackCall, SlackMessage
from .slack_blocks import buttons

DEFAULT_SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PERSON_ID = "U0PERSON01"
PERSON_NAME = "tester"
"""The handle of the person the tests and the console act as (`PERSON_ID`)."""


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


@dataclass
class Interaction:
    """A button pressed, sent to the app as a signed `block_actions` interaction."""

    id: str
    channel: str
    ts: str
    action_id: str
    user: str
    status: int = 0
    """The app's HTTP status (0: not answered yet, or it could not be reached)."""
    sent: bool = False
    answers: list[dict[str, Any]] = field(default_factory=list)
    """What the app posted to the interaction's `response_url`."""

    @property
    def answer(self) -> str | None:
        """The text of the app's first answer, as the person reads it (entities decoded)."""
        if not self.answers:
            return None
        text = str(self.answers[0].get("text", ""))
        return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


class SlackRequestSender:
    """What the emulator needs to send requests to the app (mixed into `SlackAPIEmulator`)."""

    signing_secret: str
    workspace: FakeSlack
    calls: list[SlackCall]
    responses: list[dict[str, Any]]
    events_url: str | None
    events: list[tuple[dict[str, Any], int]]
    _outbox: asyncio.Queue[dict[str, Any]]
    interactions_url: str | None
    interactions: dict[str, Interaction]
    _pressing: set[asyncio.Task[None]]

    @property
    def url(self) -> str:
        raise NotImplementedError

    def _notify(self) -> None:
        raise NotImplementedError

    def _posted(self, msg: SlackMessage) -> None:
        """A new message: its `message` event, for the app's Events API (if it has one)."""
        if self.events_url is None:
            return
        event = {**msg.to_api(), "channel": msg.channel, "event_ts": msg.ts, "channel_type": "channel"}
        self._outbox.put_nowait({
            "token": "verification-token-deprecated",
            "team_id": self.workspace.team_id,
            "api_app_id": "A0PROGRESS",
            "type": "event_callback",
            "event_id": f"Ev{msg.ts.replace('.', '')}",
            "event_time": int(float(msg.ts)),
            "event": event,
        })

    def stop_agent_session(self, channel_id: str, thread_ts: str, user: str = PERSON_ID) -> dict[str, Any]:
        """A person presses Slack's stop button on the thread's agent session (shown only
        while it is `processing`): the app's streaming messages in the thread are stopped,
        and an `agent_session_stopped` event is sent to :attr:`events_url`, in order with
        the others (wait on :attr:`events`). Returns the event_callback sent."""
        if self.events_url is None:
            raise RuntimeError("events_url is not set (the app's Events API Request URL)")
        status = self.workspace.sessions.get((channel_id, thread_ts))
        if status != "processing":
            raise RuntimeError(f"the session of {channel_id}/{thread_ts} is {status}: Slack shows no stop button")
        now = f"{time.time():.6f}"
        payload = {
            "token": "verification-token-deprecated",
            "team_id": self.workspace.team_id,
            "api_app_id": "A0PROGRESS",
            "type": "event_callback",
            "event_id": f"Ev{now.replace('.', '')}S",
            "event_time": int(float(now)),
            "event": {
                "type": "agent_session_stopped", "channel": channel_id, "thread_ts": thread_ts, "user": user,
                "streaming_message_ts": self.workspace.stop_streams(channel_id, thread_ts), "event_ts": now,
            },
        }
        self._outbox.put_nowait(payload)
        self._notify()
        return payload

    async def _send_events(self) -> None:
        """Events in order, one at a time (Slack retries a failed one; the emulator does not)."""
        while True:
            payload = await self._outbox.get()
            url = self.events_url
            status = 0
            if url is not None:
                with contextlib.suppress(httpx.HTTPError):
                    status = (await self.send_event(url, payload)).status_code
            self.events.append((payload, status))
            self._notify()

    def _signed(self, body: bytes, *, secret: str | None, timestamp: int | None, content_type: str) -> dict[str, str]:
        stamp = str(int(time.time()) if timestamp is None else timestamp)
        return {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": stamp,
            "X-Slack-Signature": sign(self.signing_secret if secret is None else secret, stamp, body),
        }

    async def send_slash_command(
        self,
        url: str,
        text: str | bytes,
        *,
        channel_id: str | bytes = "C0TEST0001",
        user_id: str = PERSON_ID,
        command: str = "/progresscast",
        secret: str | None = None,
        timestamp: int | None = None,
        timeout: float = 3.0,
    ) -> httpx.Response:
        """A person types ``/progresscast <text>`` in a channel: Slack POSTs the command,
        form-encoded and signed (``secret`` and ``timestamp`` override, to test refusals),
        and gives the app ``timeout`` seconds (Slack's 3) to answer. ``text`` and
        ``channel_id`` may be bytes, sent as they are (to test bytes that are not UTF-8)."""
        known = self.workspace.channels.get(channel_id) if isinstance(channel_id, str) else None
        form = {
            "token": "verification-token-deprecated",
            "team_id": self.workspace.team_id,
            "team_domain": "progresscast-test",
            "channel_id": channel_id,
            "channel_name": known.name if known is not None else "unknown",
            "user_id": user_id,
            "user_name": PERSON_NAME,
            "command": command,
            "text": text,
            "api_app_id": "A0PROGRESS",
            "is_enterprise_install": "false",
            "response_url": f"{self.url}/response/{len(self.responses) + 1}",
            "trigger_id": f"{int(time.time())}.{len(self.calls)}.trigger",
        }
        body = urlencode(form).encode()
        headers = self._signed(
            body, secret=secret, timestamp=timestamp, content_type="application/x-www-form-urlencoded"
        )
        async with httpx.AsyncClient(timeout=timeout) as http:
            return await http.post(url, content=body, headers=headers)

    def press(
        self, channel_id: str, ts: str, button: str, *, user: str = PERSON_ID, name: str = PERSON_NAME,
        forged: bool = False,
    ) -> Interaction:
        """A person presses a button of a message: `button` is its text or its
        `action_id`. Slack sends the app a signed `block_actions` interaction at
        :attr:`interactions_url` (in the background: wait on the returned
        `Interaction`'s `status` or `answer`). `forged`: `button` is an action id the
        message does not carry (a replay, a crafted request signed with a leaked secret)."""
        if self.interactions_url is None:
            raise RuntimeError("interactions_url is not set (the app's Interactivity Request URL)")
        channel = self.workspace.channels[channel_id]
        msg = channel.messages.get(ts)
        if msg is None:
            raise KeyError(f"channel {channel_id} shows no message {ts}")
        shown = buttons(msg.blocks)
        found = next(((text, aid) for text, aid in shown if button in (text, aid)), None)
        if found is None and not forged:
            raise KeyError(f"message {ts} has no button {button!r}; it has {[t for t, _ in shown]}")
        text, action_id = found or (button, button)
        self.workspace.users[user] = name
        pressed = Interaction(f"I{len(self.interactions) + 1}", channel_id, ts, action_id, user)
        self.interactions[pressed.id] = pressed
        container: dict[str, Any] = {"type": "message", "message_ts": ts, "channel_id": channel_id,
                                     "is_ephemeral": False}
        if msg.thread_ts:
            container["thread_ts"] = msg.thread_ts
        payload = {
            "type": "block_actions",
            "user": {"id": user, "username": name, "name": name, "team_id": self.workspace.team_id},
            "api_app_id": "A0PROGRESS",
            "token": "verification-token-deprecated",
            "container": container,
            "trigger_id": f"{int(time.time())}.{pressed.id}.trigger",
            "team": {"id": self.workspace.team_id, "domain": "progresscast-test"},
            "channel": {"id": channel_id, "name": channel.name},
            "message": msg.to_api(),
            "response_url": f"{self.url}/response/{pressed.id}",
            "actions": [{
                "type": "button", "action_id": action_id, "block_id": "b", "value": action_id,
                "text": {"type": "plain_text", "text": text, "emoji": True}, "action_ts": f"{time.time():.6f}",
            }],
        }
        task = asyncio.get_running_loop().create_task(self._interact(pressed, payload))
        self._pressing.add(task)
        task.add_done_callback(self._pressing.discard)
        return pressed

    async def _interact(self, pressed: Interaction, payload: dict[str, Any]) -> None:
        url = self.interactions_url
        if url is not None:
            with contextlib.suppress(httpx.HTTPError):
                pressed.status = (await self.send_interaction(url, payload)).status_code
        pressed.sent = True
        self._notify()

    def record_answer(self, rid: str, payload: dict[str, Any]) -> bool:
        """An answer posted to a press's `response_url` (False: it is no press's)."""
        pressed = self.interactions.get(rid)
        if pressed is None:
            return False
        pressed.answers.append(payload)
        return True

    async def send_interaction(
        self, url: str, payload: dict[str, Any] | str, *, secret: str | None = None, timestamp: int | None = None,
        timeout: float = 3.0,
    ) -> httpx.Response:
        """Slack's interactivity: POST ``payload=<JSON>`` form-encoded, signed; Slack gives
        the app ``timeout`` seconds (its 3) to answer. A str payload is sent as it is."""
        raw = payload if isinstance(payload, str) else json.dumps(payload)
        body = urlencode({"payload": raw}).encode()
        headers = self._signed(
            body, secret=secret, timestamp=timestamp, content_type="application/x-www-form-urlencoded"
        )
        async with httpx.AsyncClient(timeout=timeout) as http:
            return await http.post(url, content=body, headers=headers)

    async def send_event(
        self,
        url: str,
        payload: dict[str, Any],
        *,
        secret: str | None = None,
        timestamp: int | None = None,
        timeout: float = 3.0,
    ) -> httpx.Response:
        """Slack's Events API: POST ``payload`` (``url_verification`` or an
        ``event_callback``) as JSON, signed."""
        body = json.dumps(payload).encode()
        headers = self._signed(body, secret=secret, timestamp=timestamp, content_type="application/json")
        async with httpx.AsyncClient(timeout=timeout) as http:
            return await http.post(url, content=body, headers=headers)


__all__ = ["DEFAULT_SIGNING_SECRET", "PERSON_ID", "Interaction", "SlackRequestSender", "sign"]
