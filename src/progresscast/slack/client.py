"""The Slack client: Web API calls for drafts (slack_sdk's AsyncWebClient), and what
their replies mean.

Every call returns a `channels.Outcome` instead of raising; the shared lifecycle acts
on its kind:

- `rate_limited`: HTTP 429 / `ratelimited`, wait `Retry-After`. Nothing was applied.
- `gone`: `message_not_found` — deleted by a person, or a bad `ts`: a new draft.
- `locked`: `cant_update_message`, `cant_delete_message`, `edit_window_closed`,
  `message_not_in_streaming_state` (a plan display that has ended): a new draft.
- `refused_content`: `invalid_blocks`, `invalid_blocks_format`, `msg_too_long`,
  `no_text`, `invalid_chunks`: the payload's fallback is shown.
- `unsupported`: the workspace does not offer the plan display (`unknown_method`,
  `not_allowed_token_type`, `invalid_arguments` on a stream): Block Kit from now on.
- `transient`: the request surely never left (connection refused).
- `unsure`: it may have been applied (a timeout, a broken connection, a 5xx,
  `internal_error`, `fatal_error`, `service_unavailable`, `request_timeout`): edits
  and deletes are retried; a first post is looked for, never repeated blindly.
- `forbidden`: `channel_not_found`, `not_in_channel`, `is_archived`: the channel
  refuses the app; it is paused until it speaks again (or a probe is due).
- `refused`: everything else (`invalid_auth`, …): not tried again until the content
  changes.

slack_sdk retries nothing here (`retry_handlers=[]`): its connection-error handler
would repeat a post whose outcome is unknown.

An unsure post is looked for in the channel's history (or its thread's replies):
a message of this app posted since shortly before the send, with exactly the text
that was sent, is the post (`found`); none is `absent`, and it is safe to post again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import aiohttp
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from ..channels.draft.outcome import MessageId, Outcome, OutcomeKind, kind_of, looked_for
from ..channels.draft.state import Intent
from ..channels.state.ids import Id
from ..render.payload import Payload
from ..render.slack import escape
from ..render.slack_payload import STREAM_METHODS

FORBIDDEN = frozenset({"channel_not_found", "not_in_channel", "is_archived"})
"""The channel refuses the app for good: it is paused until it speaks again."""
GONE = frozenset({"message_not_found", "thread_not_found"})
LOCKED = frozenset(
    {"cant_update_message", "cant_delete_message", "edit_window_closed", "message_not_in_streaming_state"}
)
REFUSED_CONTENT = frozenset({"invalid_blocks", "invalid_blocks_format", "msg_too_long", "no_text", "invalid_chunks"})
UNSUPPORTED = frozenset({"unknown_method", "not_allowed_token_type", "method_deprecated", "invalid_arguments"})
UNSURE = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout"})

CODES = (
    (OutcomeKind.forbidden, FORBIDDEN), (OutcomeKind.gone, GONE), (OutcomeKind.locked, LOCKED),
    (OutcomeKind.refused_content, REFUSED_CONTENT),
)

PROBE_MARGIN = 120.0
"""Seconds before the unsure send's time from which history is searched (clock skew)."""

_UPDATE_PARAMS = ("text", "blocks", "link_names", "parse", "metadata")
_STREAM_PARAMS = ("chunks", "markdown_text")


def classify(exc: BaseException, *, stream: bool = False) -> Outcome:
    """What a slack_sdk exception (or a transport error) means for a draft."""
    if isinstance(exc, SlackApiError):
        response = exc.response
        error = str(response.get("error", "") or "")
        status = response.status_code
        if status == 429 or error == "ratelimited":
            raw = next((v for k, v in dict(response.headers).items() if k.lower() == "retry-after"), "1")
            try:
                seconds = float(raw[0] if isinstance(raw, list) else raw)
            except (TypeError, ValueError):
                seconds = 1.0
            return Outcome(OutcomeKind.rate_limited, retry_after=seconds, detail=error or "ratelimited")
        kind = kind_of(error, CODES)
        if kind is not None:
            return Outcome(kind, detail=error)
        if stream and error in UNSUPPORTED:
            return Outcome(OutcomeKind.unsupported, detail=error)
        if error in UNSURE or status >= 500:
            return Outcome(OutcomeKind.unsure, detail=error or f"HTTP {status}")
        return Outcome(OutcomeKind.refused, detail=error or f"HTTP {status}")
    if isinstance(exc, aiohttp.ClientConnectorError):
        return Outcome(OutcomeKind.transient, detail=str(exc) or "connection refused")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, aiohttp.ClientError)):
        return Outcome(OutcomeKind.unsure, detail=str(exc) or type(exc).__name__)
    return Outcome(OutcomeKind.unsure, detail=repr(exc))


def _thread(thread_id: Id) -> str | None:
    text = str(thread_id or "")
    return None if text in ("", "0") else text


log = logging.getLogger(__name__)

NAMES_KEPT = 10_000
"""People's handles remembered (`handle_of`): a bound, not a policy."""
NAME_FRESH_SECONDS = 3600.0
"""How long a remembered handle is used before Slack is asked again (a rename shows then)."""


class SlackClient:
    """`channels.Client` for one Slack app in one workspace."""

    def __init__(self, web: AsyncWebClient, bot_user_id: str | None = None, bot_id: str | None = None) -> None:
        self.web = web
        self.bot_user_id = bot_user_id
        self.bot_id = bot_id
        """The app's bot id (`B…`): its own messages carry it."""
        self._handles: dict[str, tuple[str, float]] = {}

    async def handle_of(self, user: str) -> str | None:
        """A person's handle (`users.info`'s `name`), as a press's payload names them: a
        message event names only the id. None when Slack does not say (no `users:read`
        scope, an unknown user, Slack unreachable): the caller shows the id."""
        now = time.monotonic()
        kept = self._handles.get(user)
        if kept is not None and now - kept[1] < NAME_FRESH_SECONDS:
            return kept[0]
        try:
            reply = await self.web.users_info(user=user)
        except Exception as exc:  # SlackApiError (missing_scope, user_not_found), a network error
            log.info("users.info for %s: %s", user, exc)
            return None
        found = reply.get("user")
        name = found.get("name") if isinstance(found, dict) else None
        if not isinstance(name, str) or not name.strip():
            return None
        if len(self._handles) >= NAMES_KEPT:
            self._handles.clear()
        self._handles[user] = (name, now)
        return name

    async def whisper(self, chat_id: Id, thread_id: Id, user: str, text: str) -> Outcome:
        """A plain-text message only `user` sees (`chat.postEphemeral`), in the thread."""
        params: dict[str, Any] = {"channel": str(chat_id), "user": user, "text": escape(text)}
        thread = _thread(thread_id)
        if thread:
            params["thread_ts"] = thread
        try:
            await self.web.chat_postEphemeral(**params)
        except Exception as exc:
            return classify(exc)
        return Outcome(OutcomeKind.ok)

    async def send(
        self, chat_id: Id, thread_id: Id, payload: Payload, *, reply_to: MessageId | None = None, silent: bool = False
    ) -> Outcome:
        """A new message: `chat.postMessage`, or `chat.startStream` for the plan display
        (one call: a finished plan is stopped by an edit, in a slot of its own). A reply
        (a ping) to a draft in a thread is a thread reply also shown in the channel
        (`reply_broadcast`); elsewhere it is a new message. (`silent`: Slack posts
        notify nobody unless they mention someone, which agent text never does.)"""
        if payload.method == "chat.stopStream":
            raise ValueError("a plan display is started with chat.startStream (its payload's opening)")
        params: dict[str, Any] = {"channel": str(chat_id), **payload.params}
        thread = _thread(thread_id)
        if thread and not params.get("thread_ts"):
            params["thread_ts"] = thread
        if reply_to is not None and params.get("thread_ts"):
            params["reply_broadcast"] = True
        try:
            reply = await self.web.api_call(payload.method, json=params)
        except Exception as exc:
            return classify(exc, stream=payload.method in STREAM_METHODS)
        return Outcome(OutcomeKind.ok, message_id=str(reply["ts"]))

    async def edit(self, chat_id: Id, message_id: MessageId, payload: Payload) -> Outcome:
        """Make message `message_id` show the payload: `chat.update` (blocks replaced, so
        a plain fallback sends `blocks: []`), or for the plan display `chat.appendStream`
        with the tasks (updated in place by their ids) — `chat.stopStream` once the run
        has ended."""
        stream = payload.method in STREAM_METHODS
        if stream:
            method = "chat.stopStream" if payload.method == "chat.stopStream" else "chat.appendStream"
            params = {k: v for k, v in payload.params.items() if k in _STREAM_PARAMS}
        else:
            method = "chat.update"
            params = {k: v for k, v in payload.params.items() if k in _UPDATE_PARAMS}
            params.setdefault("blocks", [])
        try:
            await self.web.api_call(method, json={"channel": str(chat_id), "ts": str(message_id), **params})
        except Exception as exc:
            return classify(exc, stream=stream)
        return Outcome(OutcomeKind.ok, message_id=message_id)

    async def delete(self, chat_id: Id, message_id: MessageId) -> Outcome:
        try:
            await self.web.chat_delete(channel=str(chat_id), ts=str(message_id))
        except Exception as exc:
            return classify(exc)
        return Outcome(OutcomeKind.ok, message_id=message_id)

    async def probe(self, chat_id: Id, message_id: int, intent: Intent) -> Outcome:
        """Look for the unsure send in the channel (or its thread): our message since
        shortly before it, with exactly the text that was sent."""
        channel = str(chat_id)
        thread = intent.params.get("thread_ts")
        oldest = f"{max(intent.at - PROBE_MARGIN, 0):.6f}"
        try:
            if thread:
                reply = await self.web.conversations_replies(channel=channel, ts=str(thread), oldest=oldest, limit=200)
            else:
                reply = await self.web.conversations_history(channel=channel, oldest=oldest, limit=200)
        except Exception as exc:
            return looked_for(classify(exc))
        text = intent.params.get("text")
        for message in reply.get("messages") or []:
            if not isinstance(message, dict) or message.get("ts") == thread:
                continue
            ours = message.get("bot_id") is not None and (
                self.bot_user_id is None or message.get("user") in (None, self.bot_user_id)
            )
            if ours and text is not None and message.get("text") == text:
                return Outcome(OutcomeKind.found, message_id=str(message["ts"]))
        return Outcome(OutcomeKind.absent, detail="not in the history")

    async def set_session_status(self, chat_id: Id, thread_ts: str, status: str) -> Outcome:
        """`agents.sessions.setStatus`: the thread's agent session shows `status`
        (`processing`: with Slack's stop button), made if it was not. The same status
        set again changes nothing, so an unsure call is simply made again."""
        params = {"channel_id": str(chat_id), "thread_ts": thread_ts, "status": status}
        try:
            await self.web.api_call("agents.sessions.setStatus", json=params)
        except Exception as exc:
            return classify(exc)
        return Outcome(OutcomeKind.ok)

    def said(self, thread_id: Id, text: str) -> Payload:
        """What `say` posts (its text as escaped), for looking it up in the history."""
        params: dict[str, Any] = {"text": escape(text)}
        thread = _thread(thread_id)
        if thread:
            params["thread_ts"] = thread
        return Payload("chat.postMessage", params)

    async def say(self, chat_id: Id, thread_id: Id, text: str) -> Outcome:
        """A plain-text message (escaped: it may quote what a person typed)."""
        params: dict[str, Any] = {"channel": str(chat_id), "text": escape(text)}
        thread = _thread(thread_id)
        if thread:
            params["thread_ts"] = thread
        try:
            reply = await self.web.chat_postMessage(**params)
        except Exception as exc:
            return classify(exc)
        return Outcome(OutcomeKind.ok, message_id=str(reply["ts"]))


__all__ = ["SlackClient", "classify"]
