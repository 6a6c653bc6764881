"""The change stream (docs/events-and-runs.md) and the consumer group that reads it.

An event is a refresh hint: a consumer re-reads the owner's state, it never renders
the event body. So events of one owner can be coalesced freely.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis
from redis.exceptions import ResponseError

from . import keys
from .connections import StreamReply
from .owners import Owner


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    owner: Owner
    revision: int | None
    state: str | None = None

    @classmethod
    def from_entry(cls, entry_id: str, fields: dict[str, str]) -> Event:
        rev = fields.get("revision") or ""
        return cls(
            id=entry_id,
            type=fields.get("type", ""),
            owner=Owner(agent_id=fields["agentId"], session_key=fields["sessionKey"]),
            revision=int(rev) if rev else None,
            state=fields.get("state") or None,
        )

    def to_json(self) -> dict[str, Any]:
        """The wire shape of `progressCard.changed` and friends."""
        out: dict[str, Any] = {
            "sessionKey": self.owner.session_key,
            "agentId": self.owner.agent_id,
            "displayKey": self.owner.display_key,
            "revision": self.revision,
        }
        if self.state:
            out["state"] = self.state
        return out


def _is_event(fields: dict[str, str] | None) -> bool:
    # An entry without an owner (written by something else) is skipped, not fatal.
    return fields is not None and "agentId" in fields and "sessionKey" in fields


class EventGroup:
    """One consumer in a consumer group on the change stream.

    Each event goes to one consumer of the group; entries a dead consumer left
    pending are claimed after `claim_idle_ms`.
    """

    def __init__(
        self,
        redis: Redis,
        group: str,
        consumer: str,
        *,
        stream: str = keys.EVENTS,
        claim_idle_ms: int = 30_000,
    ) -> None:
        self.redis = redis
        self.group = group
        self.consumer = consumer
        self.stream = stream
        self.claim_idle_ms = claim_idle_ms

    async def ensure(self, start: str = "$") -> None:
        try:
            await self.redis.xgroup_create(self.stream, self.group, id=start, mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def read(self, *, count: int = 100, block_ms: int = 1000) -> list[Event]:
        """Pending entries of this consumer first (after a restart), then new ones."""
        events = await self._read("0", count, None)
        if events:
            return events
        _, claimed, *_ = await self.redis.xautoclaim(
            self.stream, self.group, self.consumer, self.claim_idle_ms, "0-0", count=count
        )
        if claimed:
            return await self._keep_events(claimed)
        return await self._read(">", count, block_ms)

    async def _read(self, start: str, count: int, block_ms: int | None) -> list[Event]:
        reply = cast(
            "StreamReply | None",
            await self.redis.xreadgroup(self.group, self.consumer, {self.stream: start}, count=count, block=block_ms),
        )
        return await self._keep_events([entry for _, entries in reply or [] for entry in entries])

    async def _keep_events(self, entries: list[tuple[str, dict[str, str] | None]]) -> list[Event]:
        """Events among `entries`; anything else is acknowledged at once, so it cannot
        sit in the pending list for ever."""
        junk = [i for i, f in entries if not _is_event(f)]
        if junk:
            await self.redis.xack(self.stream, self.group, *junk)
        return [Event.from_entry(i, f) for i, f in entries if f is not None and _is_event(f)]

    async def ack(self, events: list[Event]) -> None:
        if events:
            await self.redis.xack(self.stream, self.group, *[e.id for e in events])


async def last_id(redis: Redis, stream: str = keys.EVENTS) -> str:
    """The id of the newest entry ever added to the stream ("0-0" when there is none).

    A live viewer resolves this *before* it tells its client it is listening, so a
    write made right after cannot fall between "subscribed" and the first XREAD.
    """
    try:
        info = await redis.xinfo_stream(stream)
    except ResponseError:  # no such key: nothing was ever written
        return "0-0"
    last = info["last-generated-id"]
    return last.decode() if isinstance(last, bytes) else str(last)


async def tail(
    redis: Redis, *, start: str = "$", block_ms: int = 15_000, stream: str = keys.EVENTS
) -> AsyncIterator[Event | None]:
    """Every event after `start`, for live viewers (SSE): no group, nothing acknowledged.

    `start="$"` means "after the newest entry now" — resolved on the first iteration,
    so pass `await last_id(redis)` instead when the caller must know it is listening.
    Yields None after `block_ms` without events: a heartbeat that lets the caller
    notice a closed client.
    """
    last = await last_id(redis, stream) if start == "$" else start
    while True:
        reply = cast("StreamReply | None", await redis.xread({stream: last}, block=block_ms, count=100))
        if not reply:
            yield None
            continue
        for _, entries in reply:
            for entry_id, fields in entries:
                last = entry_id
                if _is_event(fields):
                    yield Event.from_entry(entry_id, fields)


def coalesce(events: list[Event]) -> list[Owner]:
    """The owners touched, once each, in first-seen order."""
    return list(dict.fromkeys(e.owner for e in events))
