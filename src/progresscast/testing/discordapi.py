"""A loopback Discord REST API (v10) for tests, beside the Telegram and Slack emulators.

    async with DiscordAPIEmulator(channels=["200000000000000001"]) as discord:
        rest = DiscordREST(discord.base_url, discord.token)   # the adapter's HTTP client
        ...
        await discord.wait_for(lambda: discord.channel(CHANNEL).texts())
        response = await discord.slash_command(app_url, "follow ticket-1", channel_id=CHANNEL)

It serves ``/api/v10/…`` over real HTTP (uvicorn on 127.0.0.1, a free port) and
behaves like Discord where tests care: its JSON shapes (message objects, the bot user,
command definitions) and error answers (``{"message", "code", "errors"}``: 10003
Unknown Channel, 10008 Unknown Message, 50001 Missing Access, 50013 Missing
Permissions, 50005 not the author, 50006 empty message, 50035 Invalid Form Body with
the field path, 30046 edits to an old message), Components V2 checked with its limits
(``_discord_state.check_body``: ≤ 40 components nested ones counted, ≤ 4,000
characters of text, no ``content`` with the flag, the flag never removed), and its
rate limits: every message call (create, edit, delete) takes from its channel's
bucket — 5 per 5 s — and every call from the bot's global one — 50 per second; each
answer carries ``X-RateLimit-Bucket``, ``-Limit``, ``-Remaining``, ``-Reset``,
``-Reset-After`` and ``-Scope``; a refused call answers 429 with a float
``retry_after`` and ``global`` in the body (and ``X-RateLimit-Global`` for the
global limit). What each channel shows: :meth:`channel`; every call: :attr:`calls`,
with the mentions a sent text makes and those ``allowed_mentions`` would let ping.

Interactions: the emulator holds an Ed25519 key it generates (:attr:`public_key`,
hex, as the developer portal shows it) and sends interactions signed like Discord —
``X-Signature-Ed25519`` over ``X-Signature-Timestamp`` + body — to the
interactions URL: :meth:`ping`, :meth:`slash_command` ("a person types
``/progresscast follow ticket-1``", built from the registered command's options),
:meth:`press` (a person presses a message's button, by label or ``custom_id``) and
:meth:`submit_modal` (they fill in the modal the app answered a press with); an
``UPDATE_MESSAGE`` answer (type 7) updates the pressed message as Discord does, or is
refused (:attr:`refused`) where Discord refuses it. Buttons
are checked as Discord checks them: action rows of 1-5 buttons, at most 5 rows in a
plain message, a ``custom_id`` of 1-100 characters unique in the message, a label of
at most 80.

``time_scale`` (default ``PROGRESSCAST_TIME_SCALE``) makes every window that many
times shorter; the emulator says its windows in its own seconds (a 5 s window at 0.05
is 0.25 s, and its headers say so), as a faster Discord would.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nacl.signing import SigningKey
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..timescale import time_scale as scale_setting
from ._discord_interactions import MANAGE_CHANNELS, PERSON_ID, InteractionSender
from ._discord_limits import MESSAGE_ROUTES, Limits, limited
from ._discord_state import IS_COMPONENTS_V2 as V2_FLAG
from ._discord_state import (
    MISSING_ACCESS,
    MISSING_PERMISSIONS,
    NOT_AUTHOR,
    OLD_MESSAGE_EDITS,
    UNAUTHORIZED,
    UNKNOWN_CHANNEL,
    UNKNOWN_MESSAGE,
    DiscordCall,
    DiscordChannel,
    DiscordError,
    DiscordMessage,
    check_body,
    error,
    invalid_form,
    pings,
    snowflake,
)
from ._faults import take_fault
from ._loopback import LoopbackServer
from .discord_markdown import Read, components_text, read_markdown

log = logging.getLogger(__name__)

DEFAULT_TOKEN = "MTAwMDAwMDAwMDAwMDAwMDAw.progresscast.test-token"
APPLICATION_ID = "300000000000000001"
GUILD_ID = "100000000000000001"
SEND_MESSAGES = 1 << 11


@dataclass
class _Fault:
    route: str
    channel: str | None
    remaining: int
    status: int = 500
    code: int = 0
    message: str = "500: Internal Server Error"
    retry_after: float | None = None
    is_global: bool = False
    delay: float | None = None
    apply: bool = True


class DiscordAPIEmulator(LoopbackServer, InteractionSender):
    """An emulated Discord with one bot in one guild; ``async with DiscordAPIEmulator() as d``.

    ``channels`` are the text channel ids that exist (more with :meth:`add_channel`,
    threads with ``parent=``); others answer 10003. ``message_limit``/``message_period``
    set a channel's message bucket (default 5 per 5 s), ``global_limit`` the calls per
    second of the bot (default 50); None switches a limit off. ``components_v2=False``
    emulates a Discord that refuses the Components V2 flag (50035).
    """

    name = "Discord emulator"

    def __init__(
        self,
        token: str = DEFAULT_TOKEN,
        *,
        channels: list[str] | tuple[str, ...] = ("200000000000000001",),
        message_limit: int | None = 5,
        message_period: float = 5.0,
        global_limit: int | None = 50,
        time_scale: float | None = None,
        timeout_delay: float = 6.0,
        components_v2: bool = True,
        interactions_url: str | None = None,
        port: int = 0,
    ) -> None:
        self.token = token
        self.application_id = APPLICATION_ID
        self.guild_id = GUILD_ID
        self.time_scale = time_scale if time_scale is not None else scale_setting()
        self.limits = Limits(message_limit, message_period, global_limit, self.time_scale)
        self.timeout_delay = timeout_delay
        self.components_v2 = components_v2
        self.interactions_url = interactions_url
        self.signing_key = SigningKey.generate()
        self.calls: list[DiscordCall] = []
        self.interactions: list[tuple[dict[str, Any], int]] = []
        """Every interaction sent, with the status the app answered."""
        self.responses: list[tuple[dict[str, Any], Any]] = []
        self.modals: dict[tuple[str, str], tuple[dict[str, Any], str | None]] = {}
        self.refused: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.commands: dict[str | None, list[dict[str, Any]]] = {}
        """Registered command definitions: None for global ones, else per guild id."""
        self._channels: dict[str, DiscordChannel] = {}
        for cid in channels:
            self.add_channel(cid)
        self._faults: list[_Fault] = []
        self.bot_user = {
            "id": APPLICATION_ID,
            "username": "progresscast",
            "discriminator": "0",
            "global_name": None,
            "avatar": None,
            "bot": True,
            "flags": 0,
        }
        routes = [
            ("/users/@me", self._me, "GET", "me"),
            ("/channels/{channel}/messages", self._create, "POST", "create_message"),
            ("/channels/{channel}/messages", self._list, "GET", "get_messages"),
            ("/channels/{channel}/messages/{message}", self._edit, "PATCH", "edit_message"),
            ("/channels/{channel}/messages/{message}", self._delete, "DELETE", "delete_message"),
            ("/applications/{app}/commands", self._put_commands, "PUT", "commands"),
            ("/applications/{app}/guilds/{guild}/commands", self._put_commands, "PUT", "commands"),
            ("/applications/{app}/commands", self._get_commands, "GET", "commands"),
        ]
        super().__init__(
            Starlette(routes=[Route(f"/api/v10{path}", self._endpoint(h, r), methods=[m]) for path, h, m, r in routes])
        )
        self._port = port

    # --- what tests look at ----------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """What the client takes as its API URL (`channels.discord.apiBaseUrl`)."""
        return f"{self.url}/api/v10"

    def add_channel(self, channel_id: str, *, parent: str | None = None) -> DiscordChannel:
        channel = self._channels.get(channel_id)
        if channel is None:
            channel = self._channels[channel_id] = DiscordChannel(channel_id, GUILD_ID, parent)
        return channel

    def channel(self, channel_id: str) -> DiscordChannel:
        """What a channel (or thread) shows: ``.visible()``, ``.texts()``, ``.messages``."""
        return self._channels[channel_id]

    def calls_for(self, channel_id: str, route: str | None = None) -> list[DiscordCall]:
        return [c for c in self.calls if c.channel == channel_id and (route is None or c.route == route)]

    @property
    def invalid_requests(self) -> int:
        """Answers Discord counts against its 10,000 per 10 minutes: 401, 403 and 429."""
        return sum(1 for c in self.calls if c.status in (401, 403, 429))

    # --- what people do --------------------------------------------------------------------

    def post_as_user(self, channel_id: str, content: str, *, user: str = PERSON_ID) -> DiscordMessage:
        channel = self.channel(channel_id)
        msg = DiscordMessage(snowflake(), channel_id, user, content=content, bot=False)
        channel.messages[msg.id] = msg
        self._notify()
        return msg

    def delete_by_user(self, channel_id: str, message_id: str) -> None:
        """A person (a moderator) deletes a message: later edits answer 10008."""
        channel = self.channel(channel_id)
        channel.deleted[message_id] = channel.messages.pop(message_id)
        self._notify()

    def delete_channel(self, channel_id: str) -> DiscordChannel:
        """A person deletes the channel: every call to it answers 10003 Unknown Channel.
        Returns what it showed."""
        gone = self._channels.pop(channel_id)
        self._notify()
        return gone

    def make_old(self, channel_id: str, message_id: str) -> None:
        """The message is past an hour old and edited often: edits answer 30046."""
        self.channel(channel_id).messages[message_id].old = True

    # --- fault injection -------------------------------------------------------------------

    def fail_next(
        self,
        route: str,
        status: int = 500,
        *,
        code: int = 0,
        message: str | None = None,
        retry_after: float | None = None,
        is_global: bool = False,
        times: int = 1,
        channel: str | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``route`` (to ``channel`` if given) with an
        error; nothing is applied. A 429 carries ``retry_after`` (default 1.0, in the
        emulator's own seconds) and ``global``."""
        if status == 429:
            retry_after = 1.0 if retry_after is None else retry_after
        text = message or ("You are being rate limited." if status == 429 else f"{status}: injected failure")
        self._faults.append(_Fault(route, channel, times, status, code, text, retry_after, is_global))

    def timeout_next(
        self,
        route: str,
        *,
        apply: bool = True,
        times: int = 1,
        channel: str | None = None,
        delay: float | None = None,
    ) -> None:
        """Hold the next answers past the client's timeout; ``apply``: the call still took effect."""
        hold = self.timeout_delay if delay is None else delay
        self._faults.append(_Fault(route, channel, times, delay=hold, apply=apply))

    def _take_fault(self, route: str, channel: str | None) -> _Fault | None:
        return take_fault(self._faults, lambda fault: fault.route == route and fault.channel in (None, channel))

    # --- the endpoint ---------------------------------------------------------------------

    def _endpoint(self, handler: Callable[[DiscordCall, Request], Any], route: str) -> Callable[[Request], Any]:
        async def endpoint(request: Request) -> Response:
            channel = request.path_params.get("channel")
            call = DiscordCall(route, channel, {})
            self.calls.append(call)

            def answered() -> None:
                call.answered = True
                self._notify()

            hold, body = 0.0, None
            try:
                raw = await request.body()
                call.body = json.loads(raw) if raw else {}
                if not isinstance(call.body, dict | list):
                    raise invalid_form("_", "MODEL_TYPE_CONVERT", "Must be an object.")
                if request.headers.get("authorization", "") != f"Bot {self.token}":
                    raise error(UNAUTHORIZED)
                fault = self._take_fault(route, channel)
                if fault is not None and fault.delay is None:
                    call.injected = True
                    raise self._fault_error(fault)
                if fault is None:
                    self.limits.take(route, channel, call.headers)
                else:
                    call.injected = call.timed_out = True
                    hold = fault.delay or 0.0
                    if not fault.apply:
                        answered()
                        await self.hold(hold)
                        return Response(status_code=504)
                if channel is not None:
                    self._channel_of(channel, route)
                body = handler(call, request)
                call.applied = route in MESSAGE_ROUTES
            except DiscordError as e:
                call.status, call.code = e.status, e.code
                call.headers.update(e.headers)
                answered()
                return JSONResponse(e.envelope(), status_code=e.status, headers=call.headers)
            except ValueError:
                call.status, call.code = 400, 50109
                answered()
                return JSONResponse({"message": "The request body contains invalid JSON.", "code": 50109}, 400)
            except BaseException:  # the client went away mid-request (or a bug): never answered
                call.status = 499
                answered()
                raise
            answered()
            if hold:
                await self.hold(hold)
            if body is None:
                call.status = 204
                return Response(status_code=204, headers=call.headers)
            return JSONResponse(body, status_code=call.status, headers=call.headers)

        return endpoint

    def _fault_error(self, fault: _Fault) -> DiscordError:
        if fault.status != 429:
            return DiscordError(fault.status, fault.code, fault.message)
        headers = {"X-RateLimit-Scope": "global" if fault.is_global else "shared"}
        if fault.is_global:
            headers["X-RateLimit-Global"] = "true"
        return limited(fault.retry_after or 0.0, fault.is_global, headers)

    def _channel_of(self, channel_id: str, route: str) -> DiscordChannel:
        channel = self._channels.get(channel_id)
        if channel is None:
            raise error(UNKNOWN_CHANNEL)
        if not channel.access:
            raise error(MISSING_ACCESS)
        if not channel.can_send and route in MESSAGE_ROUTES:
            raise error(MISSING_PERMISSIONS)
        return channel

    def _message(self, channel: DiscordChannel, message_id: str) -> DiscordMessage:
        msg = channel.messages.get(message_id)
        if msg is None:
            raise error(UNKNOWN_MESSAGE)
        return msg

    def _api(self, msg: DiscordMessage) -> dict[str, Any]:
        author = (
            self.bot_user
            if msg.bot
            else {
                "id": msg.author_id,
                "username": "tester",
                "discriminator": "0",
                "global_name": "Tester",
                "avatar": None,
            }
        )
        return msg.to_api(author, GUILD_ID)

    def _record_mentions(self, call: DiscordCall, flags: int, content: str, components: list[Any]) -> None:
        read = Read()
        for source in components_text(components) if flags & V2_FLAG else [content]:
            part = read_markdown(source)
            read.mentions += part.mentions
        call.mentions = read.mentions
        call.pings = pings(call.body if isinstance(call.body, dict) else {}, read)

    # --- routes -----------------------------------------------------------------------------

    def _me(self, call: DiscordCall, request: Request) -> dict[str, Any]:
        return {**self.bot_user, "mfa_enabled": True, "locale": "en-US", "premium_type": 0, "verified": True}

    def _create(self, call: DiscordCall, request: Request) -> dict[str, Any]:
        channel = self._channel_of(str(call.channel), call.route)
        body = call.body if isinstance(call.body, dict) else {}
        flags, content, components = check_body(body, edit=False, v2_allowed=self.components_v2)
        reply_to = _referenced(body, channel.messages)
        self._record_mentions(call, flags, content, components)
        msg = DiscordMessage(snowflake(), channel.id, self.application_id, content, components, flags)
        msg.reply_to = reply_to
        channel.messages[msg.id] = msg
        return self._api(msg)

    def _edit(self, call: DiscordCall, request: Request) -> dict[str, Any]:
        channel = self._channel_of(str(call.channel), call.route)
        msg = self._message(channel, request.path_params["message"])
        if not msg.bot or msg.author_id != self.application_id:
            raise error(NOT_AUTHOR)
        if msg.old:
            raise error(OLD_MESSAGE_EDITS)
        body = call.body if isinstance(call.body, dict) else {}
        flags, content, components = check_body(
            body, edit=True, v2_allowed=self.components_v2, was_v2=msg.components_v2
        )
        self._record_mentions(call, flags | (msg.flags & V2_FLAG), content, components)
        msg.apply_edit(body, flags, content, components)
        return self._api(msg)

    def _delete(self, call: DiscordCall, request: Request) -> None:
        channel = self._channel_of(str(call.channel), call.route)
        msg = self._message(channel, request.path_params["message"])
        if not msg.bot:
            raise error(MISSING_PERMISSIONS)  # someone else's message needs Manage Messages
        channel.deleted[msg.id] = channel.messages.pop(msg.id)
        return None

    def _list(self, call: DiscordCall, request: Request) -> list[dict[str, Any]]:
        """Newest first, as Discord lists them; `after` lists the ones after an id."""
        channel = self._channel_of(str(call.channel), call.route)
        q = request.query_params
        try:
            limit = max(1, min(int(q.get("limit", "50")), 100))
            after = int(q["after"]) if "after" in q else None
            before = int(q["before"]) if "before" in q else None
        except ValueError:
            raise invalid_form("limit", "NUMBER_TYPE_COERCE", "Value is not int.") from None
        chosen = [
            m
            for m in channel.visible()
            if (after is None or int(m.id) > after) and (before is None or int(m.id) < before)
        ]
        chosen = chosen[:limit] if after is not None else chosen[-limit:]
        return [self._api(m) for m in reversed(chosen)]

    def _put_commands(self, call: DiscordCall, request: Request) -> list[dict[str, Any]]:
        if request.path_params.get("app") != self.application_id:
            raise error(MISSING_ACCESS)
        if not isinstance(call.body, list):
            raise invalid_form("_", "BASE_TYPE_ARRAY", "Must be an array.")
        scope = request.path_params.get("guild")
        out = []
        for definition in call.body:
            if not isinstance(definition, dict) or not definition.get("name"):
                raise invalid_form("0.name", "BASE_TYPE_REQUIRED", "This field is required")
            defaults = {
                "type": 1, "description": "", "default_member_permissions": None, "nsfw": False,
                "integration_types": [0], "contexts": None, "options": [],
            }
            out.append(
                {**defaults, **definition, "id": snowflake(), "application_id": self.application_id}
                | {"version": snowflake()}
            )
            if scope:
                out[-1]["guild_id"] = scope
        self.commands[scope] = out
        return out

    def _get_commands(self, call: DiscordCall, request: Request) -> list[dict[str, Any]]:
        return list(self.commands.get(None, []))


def _referenced(body: dict[str, Any], messages: dict[str, DiscordMessage]) -> str | None:
    """The message a create references (`message_reference`), checked as Discord does: a
    missing one is refused unless `fail_if_not_exists` is false (then no reference)."""
    ref = body.get("message_reference")
    if ref is None:
        return None
    if not isinstance(ref, dict) or not str(ref.get("message_id", "")).isdigit():
        raise invalid_form("message_reference", "MODEL_TYPE_CONVERT", "Must be an object with a message_id.")
    message_id = str(ref["message_id"])
    if message_id in messages:
        return message_id
    if ref.get("fail_if_not_exists", True) is False:
        return None
    raise invalid_form("message_reference", "MESSAGE_REFERENCE_UNKNOWN_MESSAGE", "Unknown message")


__all__ = ["APPLICATION_ID", "DEFAULT_TOKEN", "GUILD_ID", "MANAGE_CHANNELS", "PERSON_ID", "DiscordAPIEmulator"]
