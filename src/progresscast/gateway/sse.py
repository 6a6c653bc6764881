"""`GET /v1/events?sessionKey=…[&agentId=…]`: Server-Sent Events for one owner.

Each event is a refresh hint, named by its type (`progressCard.changed`, and also
`activity.changed`, `run.started`, `run.ended`, `ask.changed`, `run.stop`: every type
the owner's stream carries, none filtered), with JSON data
`{sessionKey, agentId, displayKey, revision}` and the stream entry id as the SSE id.
A comment goes out every `heartbeat` seconds of silence: writing to a closed client
is how a server notices it behind proxies that never report the close.

A reconnecting client sending `Last-Event-ID` first gets one hint — the owner's
newest event — if it missed anything, then the live ones.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.types import Receive, Scope, Send

from ..http.auth import bearer, cookie
from ..model.owners import Owner
from ..store.events import Event
from .state import Gateway, gateway_of, readable_owner

_ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")


def frame(event: Event) -> str:
    data = json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n"


class _SlotStream(StreamingResponse):
    """A stream that gives its slot back however it ends (closed, cancelled, or never
    started because the client left first)."""

    def __init__(self, *args: Any, release: Callable[[], None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def events(request: Request) -> Response:
    gw = gateway_of(request)
    owner = readable_owner(request)
    token = bearer(request) or cookie(request) or ""  # the one readable_owner accepted
    resume = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    if resume and not _ENTRY_ID.fullmatch(resume):
        resume = None  # an id we never sent: start from now rather than fail the reconnect
    gw.streams.take(token)  # 429 past gateway.maxStreamsPerToken
    return _SlotStream(
        _stream(gw, owner, resume),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
        release=lambda: gw.streams.give_back(token),
    )


async def _stream(gw: Gateway, owner: Owner, resume: str | None) -> AsyncIterator[str]:
    try:
        sub = await gw.hub.subscribe(owner)
    except (RedisError, RuntimeError):
        # Headers are out already; end the stream and let EventSource reconnect.
        yield "retry: 5000\n: the card store is not answering\n\n"
        return
    try:
        # The first bytes say "listening": anything written from now on is delivered.
        yield "retry: 2000\n: connected\n\n"
        if resume:
            for missed in await _missed(gw, owner, resume):
                yield frame(missed)
        while True:
            try:
                event = await asyncio.wait_for(sub.queue.get(), gw.heartbeat)
            except TimeoutError:
                yield ": heartbeat\n\n"
                continue
            if event is None:  # the server is shutting down
                return
            yield frame(event)
    finally:
        gw.hub.unsubscribe(sub)


def _entry_id(value: str) -> tuple[int, int]:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


async def _missed(gw: Gateway, owner: Owner, after: str) -> list[Event]:
    """What a reconnecting client missed. Events are refresh hints, so the owner's
    newest one, if it is newer than `after`, is all it needs: one read, however long
    the stream (the write scripts keep it beside the owner's other keys)."""
    try:
        last = await gw.store.last_event(owner)
    except RedisError:
        return []
    if not last.get("id") or _entry_id(last["id"]) <= _entry_id(after):
        return []
    revision = last.get("revision") or ""
    return [
        Event(
            id=last["id"],
            type=last.get("type") or "progressCard.changed",
            owner=owner,
            revision=int(revision) if revision.isdigit() else None,
            state=last.get("state") or None,
        )
    ]
