"""The Slack command surface: `/progresscast follow|unfollow|card|mode|rich|help`,
received over HTTP on the gateway, verified with the app's signing secret.

    POST /slack/commands   a slash command (form-encoded, signed)
    POST /slack/events     the Events API: answers `url_verification`; a `message`
                           event notes where someone else's message landed (the drafts
                           above it move down with their next update, `events.py`), and
                           a reply in an ask's thread is its typed answer (`presses.py`);
                           with `agentSessions`, `agent_session_stopped` is Stop
                           pressed on the thread's draft (`sessions.py`); other events
                           are acknowledged and ignored
    POST /slack/interactions  a button pressed (`block_actions`, `presses.py`)

A body is read up to 64 KiB (413 past it, before anything else looks at it), then
checked with `slack_sdk.signature.SignatureVerifier` (`X-Slack-Signature` over
`v0:<timestamp>:<body>`, timestamps older than five minutes refused): a bad or stale
signature, or a timestamp that is not a number, answers 401 and nothing is done. A command is turned into a
`channels.commands.Invocation` and answered by the one handler, at once (Slack waits
three seconds), with an ephemeral reply seen only by the person who typed it; the
drafts it asks for go through the channel's lane. Whoever can use the command in a
channel may change what it follows (Slack lets the workspace decide who can use an
app's commands where). A follow made with the plan display on opens a
thread of its own (`slack/threads.py`).
"""

from __future__ import annotations

import json
import logging
import re

from slack_sdk.signature import SignatureVerifier
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..channels.chat.commands import ChatCommands, Invocation, Surface
from ..channels.worker import ChannelWorker
from ..config.settings import Settings
from ..http.body import MAX_BODY, raw_form, read_body
from ..model.card import SURROGATE_RULE, CardError, escape_lone_surrogates, has_lone_surrogate, reject_lone_surrogates
from .channel import NO_THREAD, PLATFORM
from .client import SlackClient
from .events import landed
from .presses import SlackPresses, is_group
from .threads import Threads

log = logging.getLogger("progresscast.slack")

TIMESTAMP = re.compile(r"[0-9]{1,12}")
"""Seconds since 1970, as Slack sends them (12 digits reach the year 33658)."""

SURFACE = Surface(
    prefix="/progresscast ",
    noun="channel",
    rich_name="plan display",
    rich_help="Slack's plan display where it applies",
    rich_on_note=" Follows made from now on get their own thread, with the plan streamed to you.",
    rich_refused_note=" This workspace refused the plan display lately, so drafts stay Block Kit.",
)


def _reply(text: str) -> JSONResponse:
    # Ephemeral: only the person who typed the command sees it. Plain text, no markup
    # of what they typed: Slack shows `text` as mrkdwn, so it is escaped; a lone
    # surrogate it repeats is shown as its escape (no encoder accepts one).
    escaped = escape_lone_surrogates(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return JSONResponse({"response_type": "ephemeral", "text": escaped})


class SlackCommands:
    def __init__(
        self, settings: Settings, worker: ChannelWorker, client: SlackClient | None = None, *,
        agent_sessions: bool = False,
    ) -> None:
        assert settings.channels.slack is not None and settings.channels.slack.signingSecret
        self.worker = worker
        self.client = client
        """Who the app is (its bot user and bot id, once `auth.test` answered): its own
        messages' events are not someone else's."""
        self.verifier = SignatureVerifier(settings.channels.slack.signingSecret)
        self.threads = Threads(worker)
        self.commands = ChatCommands(worker, SURFACE, places=self.threads)
        self.presses = SlackPresses(worker, self._verified)
        self.agent_sessions = agent_sessions
        """`agent_session_stopped` events are taken (`[channels.slack] agentSessions`)."""

    def routes(self) -> list[Route]:
        return [
            Route("/slack/commands", self.command, methods=["POST"]),
            Route("/slack/events", self.event, methods=["POST"]),
            *self.presses.routes(),
        ]

    async def _verified(self, request: Request) -> bytes | None:
        # Bounded first: the signature covers the body, so it is read before it is checked.
        body = await read_body(request, MAX_BODY)
        # The SDK reads the timestamp with int() and compares the signature as a str:
        # anything but digits (`abc`, `1e9`, `nan`) or a non-ASCII signature would raise.
        timestamp = request.headers.get("x-slack-request-timestamp", "")
        signature = request.headers.get("x-slack-signature", "")
        if not (TIMESTAMP.fullmatch(timestamp) and signature.isascii()):
            return None
        if not self.verifier.is_valid(body, timestamp, signature):
            return None
        return body

    async def command(self, request: Request) -> Response:
        body = await self._verified(request)
        if body is None:
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        # Bytes that are not UTF-8 stay lone surrogates, so what they are in (a session
        # key) is refused naming the rule rather than read as another name.
        form = raw_form(body)
        for field in ("channel_id", "user_id", "team_id"):
            if has_lone_surrogate(form.get(field, "")):
                return _reply(f"Sorry, I can't read this command: {field} {SURROGATE_RULE}.")
        channel = form.get("channel_id", "")
        words = form.get("text", "").split()
        inv = Invocation(
            platform=PLATFORM,
            destination=channel,
            thread=NO_THREAD,
            user=form.get("user_id", ""),
            word=words[0].lower() if words else "help",
            args=tuple(words[1:]),
            group=is_group(channel),
        )
        await self.worker.spoke(channel)
        reply = await self.commands.handle(inv)
        if reply is None:
            return Response(status_code=200)  # Slack shows nothing for an empty answer
        return _reply(reply.text)

    async def event(self, request: Request) -> Response:
        body = await self._verified(request)
        if body is None:
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        try:
            payload = json.loads(body)
            reject_lone_surrogates(payload)
        except CardError as exc:
            return JSONResponse({"error": escape_lone_surrogates(str(exc))}, status_code=400)
        except (ValueError, RecursionError):
            return JSONResponse({"error": "body must be JSON"}, status_code=400)
        if isinstance(payload, dict) and payload.get("type") == "url_verification":
            return JSONResponse({"challenge": str(payload.get("challenge", ""))})
        if isinstance(payload, dict) and payload.get("type") == "event_callback" and self.client is not None:
            client = self.client
            try:
                for channel, thread, ts in landed(payload.get("event"), own_user=client.bot_user_id,
                                                  own_bot=client.bot_id):
                    await self.worker.heard(channel, thread, ts)
                self.presses.heard(payload.get("event"), own_user=client.bot_user_id, own_bot=client.bot_id)
                if self.agent_sessions:
                    self.presses.session_stopped(payload.get("event"))
            except Exception:  # Redis down: acknowledged anyway (Slack would only send it again)
                log.exception("noting a Slack message event failed")
        return Response(status_code=200)


__all__ = ["SURFACE", "SlackCommands"]
