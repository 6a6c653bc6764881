"""A loopback Slack Web API for tests, beside the Bot API emulator.

    async with SlackAPIEmulator(channels=["C0TEST"]) as slack:
        client = AsyncWebClient(token=slack.token, base_url=slack.base_url)
        await client.chat_postMessage(channel="C0TEST", text="hi")
        await slack.wait_for(lambda: slack.channel("C0TEST").texts())
        response = await slack.send_slash_command(app_url, "follow ticket-1", channel_id="C0TEST")

It serves ``/api/<method>`` over real HTTP (uvicorn on 127.0.0.1, a free port) so the
code under test runs slack_sdk's real HTTP client, and behaves like Slack where tests
care: the JSON envelopes and error strings (``invalid_auth``, ``channel_not_found``,
``message_not_found``, ``cant_update_message``, ``cant_delete_message``,
``msg_too_long``, ``invalid_blocks``, ``no_text``, ``message_not_in_streaming_state``,
``unknown_method``), Block Kit's limits (see ``slack_blocks``), and rate limits —
``chat.postMessage`` about one a second per channel (a short burst tolerated), every
other method its tier per workspace — answered with HTTP 429, ``Retry-After`` and
``ratelimited``. Tests read what each channel shows (:meth:`channel`), inject faults
(:meth:`fail_next`, :meth:`timeout_next`), act as people (:meth:`post_as_user`,
:meth:`delete_by_user`) and send slash commands and events signed like Slack
(:meth:`send_slash_command`, :meth:`send_event`).

It runs on the shared loopback server base (``_loopback.LoopbackServer``: start, stop,
``url``, ``wait_for``). ``time_scale`` (default: the shared setting ``PROGRESSCAST_TIME_SCALE``, as the
adapters read it) makes every pace that many times slower (0.05: twenty times
faster); ``Retry-After`` is then still said in emulated seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..timescale import time_scale as scale_setting
from ._loopback import LoopbackServer
from ._pacing import Pace, _Bucket
from ._slack_state import SlackCall, SlackChannel, SlackError, SlackMessage, Task, new_ts
from .slack_blocks import MAX_MESSAGE_TEXT, InvalidBlocks, check_blocks

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "xoxb-0000000000-progresscast-test"
DEFAULT_SIGNING_SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
TEAM_ID = "T0PROGRESS"
BOT_USER_ID = "U0PROGRESS"
BOT_ID = "B0PROGRESS"
PERSON_ID = "U0PERSON01"

CHANNEL_PACE = Pace(burst=3, per_second=1.0)
"""chat.postMessage: about one message a second per channel, short bursts tolerated."""
TIERS = {
    1: Pace(burst=1, per_second=1 / 60),
    2: Pace(burst=5, per_second=20 / 60),
    3: Pace(burst=10, per_second=50 / 60),
    4: Pace(burst=20, per_second=100 / 60),
}
"""Slack's method tiers, per method per workspace: 1+, 20+, 50+, 100+ a minute."""
METHOD_TIERS = {
    "chat.update": 3,
    "chat.delete": 3,
    "conversations.history": 3,
    "conversations.replies": 3,
    "chat.startStream": 2,
    "chat.appendStream": 4,
    "chat.stopStream": 2,
    "auth.test": 4,
}
_WRITES = frozenset(
    {"chat.postMessage", "chat.update", "chat.delete", "chat.startStream", "chat.appendStream", "chat.stopStream"}
)
_TASK_STATUSES = frozenset({"pending", "in_progress", "complete", "error"})
MAX_TASK_TEXT = 256
MAX_STREAM_MARKDOWN = 12_000


@dataclass
class _Fault:
    method: str
    channel: str | None
    remaining: int
    error: str = "internal_error"
    status: int = 200
    retry_after: int | None = None
    delay: float | None = None
    apply: bool = True

    def matches(self, method: str, channel: str | None) -> bool:
        return self.method == method and (self.channel is None or self.channel == channel)


def sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's request signature: ``v0=`` + hex HMAC-SHA256 of ``v0:<timestamp>:<body>``."""
    base = b"v0:" + timestamp.encode() + b":" + body
    return "v0=" + hmac.new(secret.encode(), base, hashlib.sha256).hexdigest()


class SlackAPIEmulator(LoopbackServer):
    """An emulated Slack workspace with one app; use as ``async with SlackAPIEmulator() as slack``.

    ``channels`` lists the channel ids that exist (more with :meth:`add_channel`);
    others answer ``channel_not_found``. Pass ``channel_pace=None`` / ``tiers={}`` to
    switch rate limits off. ``streaming=False`` emulates a workspace without the
    streaming methods (``unknown_method``).
    """

    name = "Slack emulator"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        channels: list[str] | tuple[str, ...] = ("C0TEST0001",),
        signing_secret: str = DEFAULT_SIGNING_SECRET,
        channel_pace: Pace | None = CHANNEL_PACE,
        tiers: dict[int, Pace] | None = None,
        time_scale: float | None = None,
        timeout_delay: float = 6.0,
        streaming: bool = True,
    ) -> None:
        self.token = token
        self.signing_secret = signing_secret
        self.team_id = TEAM_ID
        self.bot_user_id = BOT_USER_ID
        self.channel_pace = channel_pace
        self.tiers = dict(TIERS if tiers is None else tiers)
        self.time_scale = time_scale if time_scale is not None else scale_setting()
        self.timeout_delay = timeout_delay
        self.streaming = streaming
        self.calls: list[SlackCall] = []
        self.responses: list[dict[str, Any]] = []
        """What the app posted to slash commands' ``response_url``."""
        self._channels: dict[str, SlackChannel] = {}
        for cid in channels:
            self.add_channel(cid)
        self._buckets: dict[object, _Bucket] = {}
        self._faults: list[_Fault] = []
        self._handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "auth.test": self._auth_test,
            "chat.postMessage": self._post_message,
            "chat.update": self._update,
            "chat.delete": self._delete,
            "conversations.history": self._history,
            "conversations.replies": self._replies,
            "chat.startStream": self._start_stream,
            "chat.appendStream": self._append_stream,
            "chat.stopStream": self._stop_stream,
        }
        app = Starlette(
            routes=[
                Route("/api/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/response/{rid}", self._response_url, methods=["POST"]),
            ]
        )
        super().__init__(app)

    @property
    def base_url(self) -> str:
        """What slack_sdk takes as ``base_url`` (the method name is appended to it)."""
        return f"{self.url}/api/"

    # --- what tests look at ----------------------------------------------------------------

    def add_channel(self, channel_id: str, name: str | None = None) -> SlackChannel:
        channel = self._channels.get(channel_id)
        if channel is None:
            channel = self._channels[channel_id] = SlackChannel(channel_id, name or channel_id.lower())
        return channel

    def channel(self, channel_id: str) -> SlackChannel:
        """What a channel shows: ``.messages`` (ts → SlackMessage), ``.visible()``, ``.texts()``."""
        return self._channels[channel_id]

    def calls_for(self, channel_id: str, method: str | None = None) -> list[SlackCall]:
        return [c for c in self.calls if c.channel == channel_id and (method is None or c.method == method)]

    # --- what people do --------------------------------------------------------------------

    def post_as_user(
        self, channel_id: str, text: str, *, user: str = PERSON_ID, thread_ts: str | None = None
    ) -> SlackMessage:
        """A person writes in a channel (or a thread); the app cannot edit or delete it."""
        channel = self.channel(channel_id)
        msg = SlackMessage(new_ts(), channel_id, user, text=text, thread_ts=thread_ts, editable=False)
        channel.messages[msg.ts] = msg
        self._notify()
        return msg

    def delete_by_user(self, channel_id: str, ts: str) -> None:
        """A person deletes a message: later updates answer ``message_not_found``."""
        channel = self.channel(channel_id)
        if ts not in channel.messages:
            raise KeyError(f"channel {channel_id} shows no message {ts}")
        channel.deleted[ts] = channel.messages.pop(ts)
        self._notify()

    def make_uneditable(self, channel_id: str, ts: str) -> None:
        """The message can no longer be edited (``cant_update_message``), e.g. too old."""
        self.channel(channel_id).messages[ts].editable = False

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
        known = self._channels.get(channel_id) if isinstance(channel_id, str) else None
        form = {
            "token": "verification-token-deprecated",
            "team_id": self.team_id,
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

    # --- fault injection -------------------------------------------------------------------

    def fail_next(
        self,
        method: str,
        error: str = "internal_error",
        *,
        status: int | None = None,
        retry_after: int | None = None,
        times: int = 1,
        channel: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` (to ``channel`` if given) with
        ``error``; nothing is applied. ``ratelimited`` answers HTTP 429 with
        ``Retry-After`` (``retry_after`` or 1); other errors HTTP 200 unless ``status``."""
        self._check_method(method)
        if error == "ratelimited":
            status, retry_after = status or 429, retry_after or 1
        self._faults.append(_Fault(method, channel, times, error, status or 200, retry_after))

    def timeout_next(
        self, method: str, times: int = 1, *, apply: bool = True, delay: float | None = None, channel: str | None = None
    ) -> None:
        """Hold the answer to the next ``times`` calls of ``method`` for ``delay`` seconds
        (default :attr:`timeout_delay`); with ``apply`` the call still takes effect."""
        self._check_method(method)
        self._faults.append(
            _Fault(method, channel, times, delay=self.timeout_delay if delay is None else delay, apply=apply)
        )

    def clear_faults(self) -> None:
        self._faults.clear()

    def _check_method(self, method: str) -> None:
        if method not in self._handlers:
            raise ValueError(f"the emulator has no method {method!r}")

    # --- serving ---------------------------------------------------------------------------

    async def _params(self, request: Request) -> dict[str, Any]:
        params: dict[str, Any] = dict(request.query_params)
        body = await request.body()
        if body:
            ctype = request.headers.get("content-type", "")
            if ctype.startswith("application/json"):
                try:
                    decoded = json.loads(body)
                except ValueError:
                    raise SlackError("invalid_json") from None
                if not isinstance(decoded, dict):
                    raise SlackError("invalid_json")
                params.update(decoded)
            else:
                params.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
        for name in ("blocks", "chunks"):  # JSON-encoded in a form, as Slack accepts them
            if isinstance(params.get(name), str):
                try:
                    params[name] = json.loads(params[name])
                except ValueError:
                    raise SlackError("invalid_blocks_format" if name == "blocks" else "invalid_chunks") from None
        return params

    def _authorize(self, request: Request, params: dict[str, Any]) -> None:
        header = request.headers.get("authorization", "")
        token = header[7:] if header.lower().startswith("bearer ") else params.pop("token", None)
        if not token:
            raise SlackError("not_authed")
        if token != self.token:
            raise SlackError("invalid_auth")

    async def _endpoint(self, request: Request) -> JSONResponse:
        method = request.path_params["method"]
        call = SlackCall(method, None, {}, time.monotonic())
        self.calls.append(call)
        hold = 0.0
        headers: dict[str, str] = {}
        try:
            call.params = await self._params(request)
            call.channel = call.params.get("channel") if isinstance(call.params.get("channel"), str) else None
            self._authorize(request, call.params)
            handler = self._handlers.get(method)
            if handler is None or (not self.streaming and method.endswith("Stream")):
                raise SlackError("unknown_method")
            fault = self._take_fault(method, call.channel)
            if fault is not None:
                call.injected = True
                if fault.delay is None:
                    extra = {"Retry-After": str(fault.retry_after)} if fault.retry_after else None
                    raise SlackError(fault.error, fault.status, headers=extra)
                call.timed_out, hold = True, fault.delay
                if not fault.apply:
                    raise SlackError("request_timeout", 504)
            else:
                self._pace(method, call.channel, call.at)
            body = handler(call.params)
            call.result = body
            call.applied = method in _WRITES
        except SlackError as e:
            call.status, call.error = e.status, e.error
            body, headers = e.envelope(), e.headers
        except Exception:  # a bug of the emulator: answer like Slack's fatal_error, keep the traceback
            log.exception("Slack emulator failed on %s", method)
            call.status, call.error = 500, "fatal_error"
            body = {"ok": False, "error": "fatal_error"}
        self._notify()
        if hold:
            await self.hold(hold)
        return JSONResponse(body, status_code=call.status, headers=headers)

    async def _response_url(self, request: Request) -> JSONResponse:
        try:
            payload = json.loads(await request.body())
        except ValueError:
            return JSONResponse({"ok": False, "error": "invalid_json"}, status_code=400)
        self.responses.append(payload if isinstance(payload, dict) else {"payload": payload})
        self._notify()
        return JSONResponse({"ok": True})

    def _take_fault(self, method: str, channel: str | None) -> _Fault | None:
        for fault in self._faults:
            if fault.matches(method, channel):
                fault.remaining -= 1
                if fault.remaining <= 0:
                    self._faults.remove(fault)
                return fault
        return None

    def _bucket(self, key: object, pace: Pace, now: float) -> _Bucket:
        scaled = Pace(pace.burst, pace.per_second / self.time_scale)
        bucket = self._buckets.get(key)
        if bucket is None or bucket.pace != scaled:
            bucket = self._buckets[key] = _Bucket(scaled, scaled.burst, now)
        bucket.refill(now)
        return bucket

    def _pace(self, method: str, channel: str | None, now: float) -> None:
        """Take a token from the method's bucket, or answer ``ratelimited``."""
        if method == "chat.postMessage":
            if self.channel_pace is None or channel is None:
                return
            bucket = self._bucket(("post", channel), self.channel_pace, now)
        else:
            pace = self.tiers.get(METHOD_TIERS.get(method, 0))
            if pace is None:
                return
            bucket = self._bucket(("tier", method), pace, now)
        wait = bucket.wait()
        if wait > 0:
            retry = max(1, math.ceil(wait / self.time_scale))
            raise SlackError("ratelimited", 429, headers={"Retry-After": str(retry)})
        bucket.tokens -= 1

    # --- methods ---------------------------------------------------------------------------

    def _channel_of(self, params: dict[str, Any]) -> SlackChannel:
        cid = params.get("channel")
        if not cid:
            raise SlackError("channel_not_found")
        channel = self._channels.get(str(cid))
        if channel is None:
            raise SlackError("channel_not_found")
        if channel.archived:
            raise SlackError("is_archived")
        if not channel.app_member:
            raise SlackError("not_in_channel")
        return channel

    def _content(self, params: dict[str, Any], *, update: bool) -> tuple[str | None, list[dict[str, Any]] | None]:
        text = params.get("text")
        blocks = params.get("blocks")
        if text is not None and not isinstance(text, str):
            text = str(text)
        if blocks is not None:
            try:
                check_blocks(blocks)
            except InvalidBlocks as e:
                raise SlackError("invalid_blocks", errors=e.errors, response_metadata={"messages": e.errors}) from None
        if not update and not text and not blocks:
            raise SlackError("no_text")
        if text and len(text) > MAX_MESSAGE_TEXT:
            raise SlackError("msg_too_long")
        return text, blocks

    def _message(self, channel: SlackChannel, ts: Any) -> SlackMessage:
        msg = channel.messages.get(str(ts)) if ts else None
        if msg is None:
            raise SlackError("message_not_found")
        return msg

    def _auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "ok": True,
            "url": "https://progresscast-test.slack.com/",
            "team": "progresscast test",
            "user": "progresscast",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _post_message(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        text, blocks = self._content(params, update=False)
        thread_ts = params.get("thread_ts") or None
        msg = SlackMessage(
            new_ts(),
            channel.id,
            self.bot_user_id,
            text=text or "",
            blocks=list(blocks or []),
            thread_ts=str(thread_ts) if thread_ts else None,
            bot_id=BOT_ID,
        )
        channel.messages[msg.ts] = msg
        return {"ok": True, "channel": channel.id, "ts": msg.ts, "message": msg.to_api()}

    def _update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        msg = self._message(channel, params.get("ts"))
        if not msg.from_bot or not msg.editable or msg.stream:
            raise SlackError("cant_update_message")
        text, blocks = self._content(params, update=True)
        if text is None and blocks is None:
            raise SlackError("no_text")
        if text is not None:
            msg.text = text
        if blocks is not None:  # omitted blocks are kept, [] removes them (as Slack does)
            msg.blocks = list(blocks)
        msg.edits += 1
        return {"ok": True, "channel": channel.id, "ts": msg.ts, "text": msg.text, "message": msg.to_api()}

    def _delete(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        msg = self._message(channel, params.get("ts"))
        if not msg.from_bot:
            raise SlackError("cant_delete_message")
        channel.deleted[msg.ts] = channel.messages.pop(msg.ts)
        return {"ok": True, "channel": channel.id, "ts": msg.ts}

    def _page(self, messages: list[SlackMessage], params: dict[str, Any]) -> dict[str, Any]:
        try:
            limit = max(1, min(int(params.get("limit", 100)), 1000))
        except (TypeError, ValueError):
            limit = 100
        oldest, latest = params.get("oldest"), params.get("latest")
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")

        def keep(ts: str) -> bool:
            if oldest and (ts < str(oldest) or (ts == str(oldest) and not inclusive)):
                return False
            return not (latest and (ts > str(latest) or (ts == str(latest) and not inclusive)))

        chosen = [m for m in messages if keep(m.ts)]
        return {
            "ok": True,
            "messages": [m.to_api() for m in chosen[:limit]],
            "has_more": len(chosen) > limit,
            "pin_count": 0,
            "response_metadata": {"next_cursor": ""},
        }

    def _history(self, params: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages, newest first (replies live in conversations.replies)."""
        channel = self._channel_of(params)
        top = [m for m in channel.messages.values() if m.thread_ts is None or m.thread_ts == m.ts]
        return self._page(sorted(top, key=lambda m: m.ts, reverse=True), params)

    def _replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent first, then the replies, oldest first."""
        channel = self._channel_of(params)
        parent = self._message(channel, params.get("ts"))
        replies = (m for m in channel.messages.values() if m.thread_ts == parent.ts and m.ts != parent.ts)
        thread = [parent, *sorted(replies, key=lambda m: m.ts)]
        return self._page(thread, params)

    def _apply_chunks(self, msg: SlackMessage, params: dict[str, Any]) -> None:
        chunks = params.get("chunks") or []
        if not isinstance(chunks, list):
            raise SlackError("invalid_chunks")
        markdown = params.get("markdown_text")
        if markdown is not None:
            chunks = [*chunks, {"type": "markdown_text", "text": markdown}]
        for chunk in chunks:
            kind = chunk.get("type") if isinstance(chunk, dict) else None
            if kind == "markdown_text":
                text = str(chunk.get("text", ""))
                if len(text) > MAX_STREAM_MARKDOWN:
                    raise SlackError("msg_too_long")
                msg.markdown += text
            elif kind == "plan_update":
                msg.plan_title = str(chunk.get("title", ""))[:MAX_TASK_TEXT]
            elif kind == "task_update":
                if not chunk.get("id") or not chunk.get("title") or chunk.get("status") not in _TASK_STATUSES:
                    raise SlackError("invalid_chunks")
                for name in ("title", "details", "output"):
                    if chunk.get(name) is not None and len(str(chunk[name])) > MAX_TASK_TEXT:
                        raise SlackError("invalid_chunks")
                msg.tasks[str(chunk["id"])] = Task(
                    str(chunk["id"]),
                    str(chunk["title"]),
                    str(chunk["status"]),
                    chunk.get("details"),
                    chunk.get("output"),
                )
            elif kind == "blocks":
                try:
                    check_blocks(chunk.get("blocks"))
                except InvalidBlocks as e:
                    raise SlackError("invalid_blocks", errors=e.errors) from None
                msg.blocks += list(chunk["blocks"])
            else:
                raise SlackError("invalid_chunks")

    def _start_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel_of(params)
        thread_ts = params.get("thread_ts")
        if not thread_ts or str(thread_ts) not in channel.messages:
            raise SlackError(
                "invalid_arguments",
                response_metadata={"messages": ["[ERROR] thread_ts must be a message in the channel"]},
            )
        if channel.id.startswith(("C", "G")) and not (
            params.get("recipient_user_id") and params.get("recipient_team_id")
        ):
            raise SlackError(
                "invalid_arguments",
                response_metadata={
                    "messages": ["[ERROR] recipient_user_id and recipient_team_id are required in channels"]
                },
            )
        mode = params.get("task_display_mode", "timeline")
        if mode not in ("timeline", "plan"):
            raise SlackError("invalid_arguments")
        msg = SlackMessage(
            new_ts(),
            channel.id,
            self.bot_user_id,
            thread_ts=str(thread_ts),
            bot_id=BOT_ID,
            streaming=True,
            stream=True,
            task_display_mode=str(mode),
            recipient_user_id=params.get("recipient_user_id"),
            recipient_team_id=params.get("recipient_team_id"),
        )
        self._apply_chunks(msg, params)
        channel.messages[msg.ts] = msg
        return {"ok": True, "channel": channel.id, "ts": msg.ts}

    def _streaming_message(self, params: dict[str, Any]) -> tuple[SlackChannel, SlackMessage]:
        channel = self._channel_of(params)
        msg = self._message(channel, params.get("ts"))
        if not msg.streaming:
            raise SlackError("message_not_in_streaming_state")
        return channel, msg

    def _append_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, msg = self._streaming_message(params)
        self._apply_chunks(msg, params)
        msg.edits += 1
        return {"ok": True, "channel": channel.id, "ts": msg.ts}

    def _stop_stream(self, params: dict[str, Any]) -> dict[str, Any]:
        channel, msg = self._streaming_message(params)
        blocks = params.get("blocks")
        self._apply_chunks(msg, {k: v for k, v in params.items() if k != "blocks"})
        if blocks is not None:
            try:
                check_blocks(blocks)
            except InvalidBlocks as e:
                raise SlackError("invalid_blocks", errors=e.errors) from None
            msg.blocks = list(blocks)
        msg.streaming = False
        return {"ok": True, "channel": channel.id, "ts": msg.ts, "message": msg.to_api()}


__all__ = [
    "BOT_USER_ID",
    "CHANNEL_PACE",
    "DEFAULT_SIGNING_SECRET",
    "DEFAULT_TOKEN",
    "METHOD_TIERS",
    "PERSON_ID",
    "TEAM_ID",
    "TIERS",
    "SlackAPIEmulator",
    "sign",
]
