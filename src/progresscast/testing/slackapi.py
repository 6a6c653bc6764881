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
(:meth:`send_slash_command`, :meth:`send_event`). A thread's agent session
(``agents.sessions.setStatus``: :meth:`session`) shows Slack's stop button while it is
``processing``: :meth:`stop_agent_session` presses it. With :attr:`events_url` set (the
app's Events API Request URL), every new message — a person's or the app's own — is
sent to it as a ``message`` event, signed, in the order the messages were posted
(:attr:`events`: each one sent, with the app's HTTP status). Messages keep their
``actions`` blocks (buttons checked as Slack does); with :attr:`interactions_url` set
(the app's Interactivity Request URL), :meth:`press` sends a signed ``block_actions``
interaction, and what the app answers through its ``response_url`` is kept on the
returned :class:`Interaction`.

It runs on the shared loopback server base (``_loopback.LoopbackServer``: start, stop,
``url``, ``wait_for``). ``time_scale`` (default: the shared setting ``PROGRESSCAST_TIME_SCALE``, as the
adapters read it) makes every pace that many times slower (0.05: twenty times
faster); ``Retry-After`` is then still said in emulated seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..timescale import time_scale as scale_setting
from ._faults import take_fault
from ._loopback import LoopbackServer, end_task
from ._pacing import Pace, _Bucket
from ._slack import BOT_USER_ID, TEAM_ID, WRITES, FakeSlack
from ._slack_requests import DEFAULT_SIGNING_SECRET, PERSON_ID, PERSON_NAME, Interaction, SlackRequestSender, sign
from ._slack_state import SlackCall, SlackChannel, SlackError, SlackMessage, new_ts

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "xoxb-0000000000-progresscast-test"

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
    "users.info": 4,
    "chat.postEphemeral": 4,
    "agents.sessions.setStatus": 3,
}


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


class SlackAPIEmulator(LoopbackServer, SlackRequestSender):
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
        port: int = 0,
    ) -> None:
        self.token = token
        self.signing_secret = signing_secret
        self.channel_pace = channel_pace
        self.tiers = dict(TIERS if tiers is None else tiers)
        self.time_scale = time_scale if time_scale is not None else scale_setting()
        self.timeout_delay = timeout_delay
        self.streaming = streaming
        self.calls: list[SlackCall] = []
        self.events_url: str | None = None
        """The app's Events API Request URL: new messages are sent there as events."""
        self.events: list[tuple[dict[str, Any], int]] = []
        """Each event sent to `events_url`, with the status the app answered (0: no answer)."""
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._sender: asyncio.Task[None] | None = None
        self.responses: list[dict[str, Any]] = []
        """What the app posted to slash commands' ``response_url``."""
        self.interactions_url: str | None = None
        """The app's Interactivity Request URL: presses are sent there."""
        self.interactions: dict[str, Interaction] = {}
        """Every press, by id, with the app's answers to it."""
        self._pressing: set[asyncio.Task[None]] = set()
        self.workspace = FakeSlack(channels, on_post=self._posted)
        self._buckets: dict[object, _Bucket] = {}
        self._faults: list[_Fault] = []
        app = Starlette(
            routes=[
                Route("/api/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/response/{rid}", self._response_url, methods=["POST"]),
            ]
        )
        super().__init__(app)
        self._port = port  # 0: a free port, chosen at start

    async def start(self) -> SlackAPIEmulator:
        await super().start()
        self._sender = asyncio.create_task(self._send_events())
        return self

    async def stop(self) -> None:
        for task in list(self._pressing):
            await end_task(task)
        await end_task(self._sender)
        self._sender = None
        await super().stop()

    @property
    def base_url(self) -> str:
        """What slack_sdk takes as ``base_url`` (the method name is appended to it)."""
        return f"{self.url}/api/"

    @property
    def team_id(self) -> str:
        return self.workspace.team_id

    @property
    def bot_user_id(self) -> str:
        return self.workspace.bot_user_id

    # --- what tests look at ----------------------------------------------------------------

    def add_channel(self, channel_id: str, name: str | None = None) -> SlackChannel:
        return self.workspace.add_channel(channel_id, name)

    def channel(self, channel_id: str) -> SlackChannel:
        """What a channel shows: ``.messages`` (ts → SlackMessage), ``.visible()``, ``.texts()``."""
        return self.workspace.channels[channel_id]

    def session(self, channel_id: str, thread_ts: str) -> str | None:
        """The thread's agent session status (None: no session was made)."""
        return self.workspace.sessions.get((channel_id, thread_ts))

    def calls_for(self, channel_id: str, method: str | None = None) -> list[SlackCall]:
        return [c for c in self.calls if c.channel == channel_id and (method is None or c.method == method)]

    # --- what people do --------------------------------------------------------------------

    def add_user(self, user: str, name: str | None = None) -> None:
        """A person of the workspace: `users.info` names them (`name`, else their id in lower case)."""
        known = self.workspace.users.get(user)
        self.workspace.users[user] = name or known or (PERSON_NAME if user == PERSON_ID else user.lower())

    def ephemeral_to(self, user: str = PERSON_ID) -> list[str]:
        """The texts of the messages only `user` saw (`chat.postEphemeral`), oldest first."""
        return [m.text for m in self.workspace.ephemeral if m.recipient_user_id == user]

    def post_as_user(
        self, channel_id: str, text: str, *, user: str = PERSON_ID, thread_ts: str | None = None,
        name: str | None = None,
    ) -> SlackMessage:
        """A person writes in a channel (or a thread); the app cannot edit or delete it.
        `name`: their handle, which `users.info` then gives (the default person's: `PERSON_NAME`)."""
        self.add_user(user, name)
        channel = self.channel(channel_id)
        msg = SlackMessage(new_ts(), channel_id, user, text=text, thread_ts=thread_ts, editable=False)
        self.workspace.post(channel, msg)
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
        if method not in self.workspace.methods:
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
        call = SlackCall(method, None, {})
        self.calls.append(call)
        hold = 0.0
        headers: dict[str, str] = {}
        try:
            call.params = await self._params(request)
            named = call.params.get("channel", call.params.get("channel_id"))  # agents.* say channel_id
            call.channel = named if isinstance(named, str) else None
            self._authorize(request, call.params)
            handler = self.workspace.methods.get(method)
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
            call.applied = method in WRITES
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
        payload = payload if isinstance(payload, dict) else {"payload": payload}
        if not self.record_answer(request.path_params["rid"], payload):
            self.responses.append(payload)
        self._notify()
        return JSONResponse({"ok": True})


    def _take_fault(self, method: str, channel: str | None) -> _Fault | None:
        return take_fault(self._faults, lambda fault: fault.matches(method, channel))


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


__all__ = [
    "BOT_USER_ID",
    "CHANNEL_PACE",
    "DEFAULT_SIGNING_SECRET",
    "DEFAULT_TOKEN",
    "METHOD_TIERS",
    "PERSON_ID",
    "TEAM_ID",
    "TIERS",
    "Interaction",
    "SlackAPIEmulator",
    "sign",
]
