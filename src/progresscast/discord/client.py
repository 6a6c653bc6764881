"""The Discord client: REST calls for drafts (`rest.py`, over httpx; no gateway
WebSocket), and what their answers mean.

Every call returns a `channels.Outcome` instead of raising; the shared lifecycle acts
on its kind:

- `gone`: 10008 Unknown Message (a person deleted the draft).
- `locked`: 30046 (too many edits to a message older than an hour), 50005 (not our
  message): a new draft replaces it.
- `refused_content`: 50035 Invalid Form Body, 50006 empty message: the payload's
  fallback (plain `content` for Components V2) is shown.
- `forbidden`: 50001 Missing Access, 50013 Missing Permissions, 10003 Unknown Channel:
  the channel refuses the bot (it cannot see it, may not post there, or the channel is
  gone). The shared worker pauses it (`channels/chat/pause.py`): no calls until someone
  uses `/progresscast` there, or a probe after a backoff of minutes up to an hour.
- `refused`: 401, any other 4xx.
- `rate_limited`: a 429 — or a call refused before it left because Discord's
  `X-RateLimit-*` headers said its bucket is empty — waits `retry_after` (a float);
  `global` pauses the whole bot. Nothing was applied.
- `transient`: the request surely never left (connection refused, no free connection).
- `unsure`: a timeout, a broken connection, a 5xx: edits and deletes are retried; a
  create is looked for (`probe`), never repeated blindly.

Probing for an unsure create lists the channel's messages after a snowflake made from
shortly before the send (`GET /channels/{id}/messages?after=…`): one of the bot's
with exactly the text that was sent is the create (`found`); none is `absent`.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import httpx

from ..channels.draft.outcome import MessageId, Outcome, OutcomeKind, kind_of, looked_for
from ..channels.draft.state import Intent
from ..channels.state.ids import Id
from ..render.discord import SUPPRESS_EMBEDS, TEXT_DISPLAY, escape
from ..render.discord_payload import CONTENT
from ..render.payload import Payload
from ..timescale import time_scale
from .breaker import Breaker
from .rest import DiscordHTTPError, DiscordREST, RateLimited

log = logging.getLogger("progresscast.discord")

GONE = frozenset({10008})
LOCKED = frozenset({30046, 50005})
REFUSED_CONTENT = frozenset({50035, 50006})
FORBIDDEN = frozenset({50001, 50013, 10003})
"""Missing Access, Missing Permissions, Unknown Channel: refused for good, whatever is sent."""
CODES = (
    (OutcomeKind.forbidden, FORBIDDEN), (OutcomeKind.gone, GONE), (OutcomeKind.locked, LOCKED),
    (OutcomeKind.refused_content, REFUSED_CONTENT),
)
IS_COMPONENTS_V2 = 1 << 15
EDIT_FLAGS = IS_COMPONENTS_V2 | SUPPRESS_EMBEDS
"""The only flags an edit may carry (Discord refuses others)."""
MESSAGES = "/channels/{channel}/messages"
MESSAGE = "/channels/{channel}/messages/{message}"

DISCORD_EPOCH_MS = 1_420_070_400_000
PROBE_MARGIN = 120.0
"""Seconds before the unsure send from which messages are listed (clock skew)."""
PROBE_LIMIT = 100


def classify(exc: BaseException, *, scale: float = 1.0) -> Outcome:
    """What an answer that was not a success (or a transport error) means for a draft."""
    if isinstance(exc, RateLimited):
        # The server's seconds are real ones; an outcome's are unscaled (the pacer scales).
        scope = "global" if exc.is_global else "route"
        return Outcome(OutcomeKind.rate_limited, retry_after=exc.retry_after / scale, detail=f"429 ({scope})")
    if isinstance(exc, DiscordHTTPError):
        code, text = exc.code, str(exc)
        if exc.status >= 500:
            return Outcome(OutcomeKind.unsure, detail=text)
        return Outcome(kind_of(code, CODES) or OutcomeKind.refused, detail=text)
    if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout)):
        return Outcome(OutcomeKind.transient, detail=str(exc) or type(exc).__name__)
    return Outcome(OutcomeKind.unsure, detail=str(exc) or type(exc).__name__)


def message_body(payload: Payload, *, edit: bool) -> dict[str, Any]:
    """The JSON body of a create or an edit: the payload's own, with the flags an edit may carry."""
    body = dict(payload.params)
    body.setdefault("allowed_mentions", {"parse": []})
    if edit:
        body["flags"] = int(body.get("flags", 0) or 0) & EDIT_FLAGS
    return body


def snowflake_at(seconds: float) -> int:
    """The smallest id Discord could give a message made at `seconds` (Unix time)."""
    return max(int(seconds * 1000) - DISCORD_EPOCH_MS, 0) << 22


def _texts(components: Sequence[Mapping[str, Any]]) -> list[str]:
    out: list[str] = []
    for c in components:
        if c.get("type") == TEXT_DISPLAY:
            out.append(str(c.get("content", "")))
        out += _texts(c.get("components") or ())
    return out


def _same(message: Mapping[str, Any], params: Mapping[str, Any]) -> bool:
    """Does `message` show exactly what `params` sent? (A plain message may carry
    buttons too: the Components V2 flag says which text to compare.)"""
    if int(params.get("flags", 0) or 0) & IS_COMPONENTS_V2:
        return _texts(message.get("components") or ()) == _texts(params["components"])
    return str(message.get("content") or "") == str(params.get("content", ""))


class DiscordClient:
    """`channels.Client` for one bot; `rest` is set once the adapter started."""

    def __init__(
        self, rest: DiscordREST | None = None, *, breaker: Breaker | None = None, scale: float | None = None
    ) -> None:
        self.rest = rest
        self.breaker = breaker or Breaker()
        self.scale = time_scale() if scale is None else scale
        self.bot_user_id: str | None = None

    async def _call(self, make: Callable[[DiscordREST], Awaitable[Any]]) -> Any:
        """Make one call unless the breaker paused the bot; every answer is counted for
        it. Returns the call's JSON answer, or an Outcome. (A channel that refuses the
        bot is paused by the shared worker, which then makes no call to it.)"""
        if self.rest is None:
            return Outcome(OutcomeKind.transient, detail="the Discord client is not started")
        paused = self.breaker.paused_for()
        if paused > 0:
            return Outcome(OutcomeKind.rate_limited, retry_after=paused, detail="the bot is paused")
        try:
            result = await make(self.rest)
        except Exception as exc:
            outcome = classify(exc, scale=self.scale)
            if isinstance(exc, RateLimited):
                if exc.sent:
                    self.breaker.answered(429)
                if exc.is_global:
                    self.breaker.hold(outcome.retry_after)
            elif isinstance(exc, DiscordHTTPError):
                self.breaker.answered(exc.status)
            return outcome
        return result

    async def send(
        self, chat_id: Id, thread_id: Id, payload: Payload, *, reply_to: MessageId | None = None, silent: bool = False
    ) -> Outcome:
        """A new message in the channel (a thread is a channel of its own); a reply (a
        ping) references the draft, and is sent even when that is gone. (Drafts are
        silent by their own flags, `SUPPRESS_NOTIFICATIONS`, set by the renderer.)"""
        body = message_body(payload, edit=False)
        if reply_to is not None:
            body["message_reference"] = {"message_id": str(reply_to), "fail_if_not_exists": False}
        path = MESSAGES.format(channel=chat_id)
        result = await self._call(
            lambda rest: rest.request("POST", MESSAGES, major=str(chat_id), path=path, json=body)
        )
        if isinstance(result, Outcome):
            return result
        return Outcome(OutcomeKind.ok, message_id=str(result["id"]))

    async def edit(self, chat_id: Id, message_id: MessageId, payload: Payload) -> Outcome:
        body = message_body(payload, edit=True)
        path = MESSAGE.format(channel=chat_id, message=message_id)
        result = await self._call(
            lambda rest: rest.request("PATCH", MESSAGE, major=str(chat_id), path=path, json=body)
        )
        return result if isinstance(result, Outcome) else Outcome(OutcomeKind.ok, message_id=message_id)

    async def delete(self, chat_id: Id, message_id: MessageId) -> Outcome:
        path = MESSAGE.format(channel=chat_id, message=message_id)
        result = await self._call(lambda rest: rest.request("DELETE", MESSAGE, major=str(chat_id), path=path))
        return result if isinstance(result, Outcome) else Outcome(OutcomeKind.ok, message_id=message_id)

    async def probe(self, chat_id: Id, message_id: int, intent: Intent) -> Outcome:
        """Look for the unsure create among the channel's messages since shortly before it."""
        params = {"after": str(snowflake_at(intent.at - PROBE_MARGIN)), "limit": str(PROBE_LIMIT)}
        path = MESSAGES.format(channel=chat_id)
        result = await self._call(
            lambda rest: rest.request("GET", MESSAGES, major=str(chat_id), path=path, params=params)
        )
        if isinstance(result, Outcome):
            return looked_for(result)  # a refusing channel is paused
        for message in result if isinstance(result, list) else []:
            author = str((message.get("author") or {}).get("id", ""))
            if (self.bot_user_id is None or author == self.bot_user_id) and _same(message, intent.params):
                return Outcome(OutcomeKind.found, message_id=str(message["id"]))
        return Outcome(OutcomeKind.absent, detail="not among the channel's recent messages")

    def said(self, thread_id: Id, text: str) -> Payload:
        """What `say` sends (its text escaped: it may quote what a person typed)."""
        params = {"content": escape(text), "flags": SUPPRESS_EMBEDS, "allowed_mentions": {"parse": []}}
        return Payload("createMessage", params, CONTENT)

    async def say(self, chat_id: Id, thread_id: Id, text: str) -> Outcome:
        return await self.send(chat_id, thread_id, self.said(thread_id, text))


__all__ = ["DiscordClient", "classify", "message_body", "snowflake_at"]
