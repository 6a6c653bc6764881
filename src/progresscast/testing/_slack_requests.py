"""What the emulated Slack sends to the app, signed like Slack: slash commands and
Events API events (a ``message`` event for every new message, in order, one at a time).

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
from typing import Any
from urllib.parse import urlencode

import httpx

from ._slack import FakeSlack
from ._slack_state import SlackCall, SlackMessage

DEFAULT_SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
PERSON_ID = "U0PERSON01"


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class SlackRequestSender:
    """What the emulator needs to send requests to the app (mixed into `SlackAPIEmulator`)."""

    signing_secret: str
    workspace: FakeSlack
    calls: list[SlackCall]
    responses: list[dict[str, Any]]
    events_url: str | None
    events: list[tuple[dict[str, Any], int]]
    _outbox: asyncio.Queue[dict[str, Any]]

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
            "user_name": "tester",
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


__all__ = ["DEFAULT_SIGNING_SECRET", "PERSON_ID", "SlackRequestSender", "sign"]
