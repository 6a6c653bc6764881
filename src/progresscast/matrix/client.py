"""The Matrix client: client-server API calls for drafts (matrix-nio's AsyncClient),
and what their replies mean.

- send: `PUT /rooms/{room}/send/m.room.message/{txnId}` with the payload's content;
- edit: the same with an `m.replace` of the draft's first event (`render.matrix.edit_content`);
- delete: a redaction, with a transaction id made from the event id (a repeated
  redaction is the same one).

Every call returns a `channels.Outcome` instead of raising; the shared lifecycle acts
on its kind:

- `rate_limited`: `M_LIMIT_EXCEEDED` (HTTP 429), wait `retry_after_ms` (or
  `Retry-After`). Nothing was applied. The homeserver limits the account, so the
  channel's budgets hold back every room (`Budgets.held_together`).
- `refused_content`: `M_TOO_LARGE`, `M_BAD_JSON`, `M_NOT_JSON`: the plain fallback.
- `gone`: `M_NOT_FOUND` (an edit of an event that is not there): a new draft.
- `locked`: an edit the server will not relate to the draft (`M_UNKNOWN`/400 on an
  `m.replace`, someone else's event): a new draft.
- `transient`: the request surely never left (connection refused).
- `unsure`: it may have been applied (a timeout, a broken connection, a 5xx).
- `forbidden`: `M_FORBIDDEN` — the room refuses the bot (not in it, kicked, banned,
  no power to send): the room is paused until it speaks again (`channels.pause`).
- `refused`: everything else (`M_UNKNOWN_TOKEN`, …): not tried again until the
  content changes.

Duplicate-free sends. Each send gets a fresh transaction id, remembered in Redis for
the content and room (write-ahead, before the request leaves) for
`TXN_MEMORY` seconds — less than the half hour Synapse keeps transactions. An
unsure send is "probed" by sending the same content again with the same transaction
id: a homeserver answers a transaction it already applied with the event it made
then, and applies it now otherwise — either way there is exactly one event, and the
probe answers `found` with its id. Without a remembered id (none was ever sent) the
probe answers `absent`.

matrix-nio retries nothing here (`max_limit_exceeded=0`, `max_timeouts=0`): the
worker decides what is tried again, and when.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
from nio import AsyncClient, ErrorResponse, RoomRedactResponse, RoomSendResponse
from redis.asyncio import Redis

from ..channels.draft.outcome import MessageId, Outcome, OutcomeKind
from ..channels.draft.state import Intent
from ..channels.state.ids import Id
from ..render.matrix import edit_content
from ..render.matrix_payload import matrix_notice
from ..render.payload import Payload
from ..store import keys

TXN_MEMORY = 20 * 60
"""Seconds a send's transaction id is remembered for a repeat (Synapse keeps 30 minutes)."""

REFUSED_CONTENT = frozenset({"M_TOO_LARGE", "M_BAD_JSON", "M_NOT_JSON"})
RATE_LIMITED = "M_LIMIT_EXCEEDED"
FORBIDDEN = "M_FORBIDDEN"


def _retry_after(reply: ErrorResponse) -> float:
    if reply.retry_after_ms:
        return max(float(reply.retry_after_ms) / 1000, 0.0)
    transport = getattr(reply, "transport_response", None)
    header = transport.headers.get("Retry-After") if transport is not None else None
    try:
        return float(header) if header else 1.0
    except ValueError:
        return 1.0


def _status(reply: Any) -> int:
    transport = getattr(reply, "transport_response", None)
    return int(getattr(transport, "status", 0) or 0)


def classify(reply: Any, *, edit: bool = False) -> Outcome:
    """A reply (or an exception raised instead of one) as an Outcome."""
    if isinstance(reply, BaseException):
        if isinstance(reply, aiohttp.ClientConnectorError | ConnectionRefusedError):
            return Outcome(OutcomeKind.transient, detail=f"{type(reply).__name__}: {reply}")
        return Outcome(OutcomeKind.unsure, detail=f"{type(reply).__name__}: {reply}")
    if isinstance(reply, RoomSendResponse | RoomRedactResponse):
        return Outcome(OutcomeKind.ok, str(reply.event_id))
    if not isinstance(reply, ErrorResponse):
        return Outcome(OutcomeKind.unsure, detail=f"unexpected reply {type(reply).__name__}")
    code, status = reply.status_code or "", _status(reply)
    detail = f"{code or status} {reply.message}".strip()
    if code == RATE_LIMITED or status == 429:
        return Outcome(OutcomeKind.rate_limited, retry_after=_retry_after(reply), detail=detail)
    if code in REFUSED_CONTENT or status == 413:
        return Outcome(OutcomeKind.refused_content, detail=detail)
    if code == "M_NOT_FOUND":
        return Outcome(OutcomeKind.gone, detail=detail)
    if code == FORBIDDEN:
        return Outcome(OutcomeKind.forbidden, detail=detail)
    if status >= 500 or (not code and status == 0):
        return Outcome(OutcomeKind.unsure, detail=detail)
    if edit and status == 400 and code in ("M_UNKNOWN", "M_INVALID_PARAM", ""):
        return Outcome(OutcomeKind.locked, detail=detail)
    return Outcome(OutcomeKind.refused, detail=detail)


def content_digest(method: str, params: Any) -> str:
    blob = json.dumps([method, params], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


Check = Callable[[], None]
"""Called before every request (the lease's fence): raises when this process may no
longer act for the account."""


def unfenced() -> None:
    """The `Check` of an account no lease fences: it may always act."""


class MatrixClient:
    """`channels.Client` for one bot account."""

    def __init__(self, nio: AsyncClient, redis: Redis, user_id: str, *, check: Check | None = None) -> None:
        self.nio = nio
        self.redis = redis
        self.user_id = user_id
        self.check = check or (lambda: None)
        """Called before every request (the lease's fence): raises when this process may
        no longer act for the account."""

    async def _call(self, request: Awaitable[Any], *, edit: bool = False) -> Outcome:
        self.check()
        try:
            reply = await request
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            return classify(exc)
        return classify(reply, edit=edit)

    async def _put(self, room: str, method: str, content: dict[str, Any], txn: str, *, edit: bool = False) -> Outcome:
        return await self._call(self.nio.room_send(room, method, content, tx_id=txn), edit=edit)

    def _txn_key(self, room: str, method: str, params: Any) -> str:
        return keys.mx_txn(self.user_id, room, content_digest(method, params))

    async def send(
        self, chat_id: Id, thread_id: Id, payload: Payload, *, reply_to: MessageId | None = None, silent: bool = False
    ) -> Outcome:
        """A new event; a reply (a ping) relates to the draft it answers (`m.in_reply_to`,
        in its thread when it has one). (Drafts notify nobody: they are `m.notice`s.)"""
        room = str(chat_id)
        txn = f"pc.{secrets.token_hex(12)}"
        self.check()
        await self.redis.set(self._txn_key(room, payload.method, payload.params), txn, ex=TXN_MEMORY)
        content = dict(payload.params)
        if reply_to is not None:
            reply = {"m.in_reply_to": {"event_id": str(reply_to)}}
            relation = content.get("m.relates_to")
            if isinstance(relation, dict) and relation.get("rel_type") == "m.thread":
                content["m.relates_to"] = {**relation, "is_falling_back": False, **reply}
            else:
                content["m.relates_to"] = reply
        return await self._put(room, payload.method, content, txn)

    async def edit(self, chat_id: Id, message_id: MessageId, payload: Payload) -> Outcome:
        content = edit_content(dict(payload.params), str(message_id))
        txn = f"pc.{secrets.token_hex(12)}"  # an edit repeated is harmless: the newest wins
        outcome = await self._put(str(chat_id), payload.method, content, txn, edit=True)
        return Outcome(OutcomeKind.ok, message_id) if outcome.kind is OutcomeKind.ok else outcome

    async def delete(self, chat_id: Id, message_id: MessageId) -> Outcome:
        txn = "pc.redact." + hashlib.sha256(str(message_id).encode()).hexdigest()[:24]
        return await self._call(self.nio.room_redact(str(chat_id), str(message_id), tx_id=txn))

    async def probe(self, chat_id: Id, message_id: int, intent: Intent) -> Outcome:
        """Repeat the unsure send `intent` with its own transaction id (see the module doc)."""
        room = str(chat_id)
        self.check()
        txn = await self.redis.get(self._txn_key(room, intent.method, intent.params))
        if not txn:
            return Outcome(OutcomeKind.absent, detail="no transaction of this content is remembered")
        outcome = await self._put(room, intent.method, dict(intent.params), str(txn))
        if outcome.kind is OutcomeKind.ok:
            return Outcome(OutcomeKind.found, outcome.message_id)
        if outcome.kind in (OutcomeKind.refused, OutcomeKind.refused_content):
            return Outcome(OutcomeKind.absent, detail=outcome.detail)
        return outcome

    async def say(self, chat_id: Id, thread_id: Id, text: str) -> Outcome:
        return await self.send(chat_id, thread_id, self.said(thread_id, text))

    def said(self, thread_id: Id, text: str) -> Payload:
        thread = str(thread_id)
        return matrix_notice(text, thread_root=thread if thread not in ("", "0") else None)


__all__ = ["TXN_MEMORY", "MatrixClient", "classify", "content_digest"]
