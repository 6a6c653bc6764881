"""`GET /v1/events?sessionKey=…[&agentId=…]`: Server-Sent Events for one owner.

Each event is a refresh hint, named by its type (`progressCard.changed`, and also
`activity.changed`, `run.started`, `run.ended`), with JSON data
`{sessionKey, agentId, displayKey, revision}` and the stream entry id as the SSE id.
A comment goes out every `heartbeat` seconds of silence: writing to a closed client
is how a server notices it behind proxies that never report the close.

A reconnecting client sending `Last-Event-ID` first gets the owner's events it
missed (up to 1,000), then the live ones.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import AsyncIterator
from typing import cast

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from .. import keys
from ..card import CardError
from ..connections import StreamEntry
from ..events import Event
from ..owners import Owner
from . import errors
from .errors import ApiError
from .state import Gateway, gateway_of, readable_owner

_ENTRY_ID = re.compile(r"\d{1,20}-\d{1,20}")
REPLAY_PAGE = 1000
REPLAY_PAGES = 20
"""A reconnect scans at most this many pages of the stream for what it missed."""


def frame(event: Event) -> str:
    data = json.dumps(event.to_json(), ensure_ascii=False, separators=(",", ":"))
    return f"id: {event.id}\nevent: {event.type}\ndata: {data}\n\n"


async def events(request: Request) -> Response:
    gw = gateway_of(request)
    try:
        owner = readable_owner(request)
    except ApiError as exc:
        return exc.response()
    except CardError as exc:
        return errors.from_card_error(exc).response()
    resume = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
    if resume and not _ENTRY_ID.fullmatch(resume):
        resume = None  # an id we never sent: start from now rather than fail the reconnect
    return StreamingResponse(
        _stream(gw, owner, resume),
        media_type="text/event-stream",
        headers={"Cache-Control": "no-cache, no-transform", "X-Accel-Buffering": "no"},
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


async def _missed(gw: Gateway, owner: Owner, after: str) -> list[Event]:
    """What a reconnecting client missed. Events are refresh hints, so the newest one of
    this owner since `after` is all it needs; the stream is scanned page by page."""
    newest: Event | None = None
    start = f"({after}"
    try:
        for _ in range(REPLAY_PAGES):
            entries = cast(
                "list[StreamEntry]", await gw.redis.xrange(keys.EVENTS, min=start, max="+", count=REPLAY_PAGE)
            )
            for entry_id, fields in entries:
                if fields.get("agentId") == owner.agent_id and fields.get("sessionKey") == owner.session_key:
                    newest = Event.from_entry(entry_id, fields)
            if len(entries) < REPLAY_PAGE:
                return [newest] if newest else []
            start = f"({entries[-1][0]}"
        # Too far behind to scan: a hint built from the card as it is now.
        card = await gw.store.get(owner)
        revision = card.revision if card else None
        return [Event(id=start[1:], type="progressCard.changed", owner=owner, revision=revision)]
    except RedisError:
        return []
