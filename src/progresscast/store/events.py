"""The change streams (one per shard; docs/events-and-runs.md) and the consumer group
that reads them all.

An event is a refresh hint: a consumer re-reads the owner's state, it never renders
the event body. So events of one owner can be coalesced freely.

Each shard has its own stream in its own hash slot. On one Redis a group consumer
reads every shard's stream in one command; on a Cluster, which refuses a command that
spans two slots, it runs one reader loop per shard. A loop hands its batch over and
reads again only once the batch is acknowledged or given back, which is what keeps the
pending list honest; after a batch smaller than it asked for it lingers a moment
(`GroupReading.linger`), so the events written meanwhile come as one batch.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio.cluster import RedisCluster
from redis.exceptions import RedisError, ResponseError

from ..backoff import Backoff, Retrying
from ..failure_log import FailureLog
from ..model.owners import Owner
from .connections import READ_BLOCK_MS, StreamReply
from .sharding import layout_of

log = logging.getLogger("progresscast.store.events")

BACKOFF = Backoff(cap=5.0)
"""The one retry policy (backoff.py), capped low: a reader back soon loses nothing."""


@dataclass(frozen=True)
class Event:
    id: str
    type: str
    owner: Owner
    revision: int | None
    state: str | None = None
    stream: str = field(default="", compare=False)
    """The shard stream it came from (for acknowledging)."""

    @classmethod
    def from_entry(cls, entry_id: str, fields: dict[str, str], stream: str = "") -> Event:
        rev = fields.get("revision") or ""
        return cls(
            id=entry_id,
            type=fields.get("type", ""),
            owner=Owner(agent_id=fields["agentId"], session_key=fields["sessionKey"]),
            revision=int(rev) if rev else None,
            state=fields.get("state") or None,
            stream=stream,
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


Entries = list[tuple[str, str, dict[str, str] | None]]
"""(stream, entry id, fields) of what a read returned."""


class _StreamsReader:
    """The loop reading some shard streams for one group consumer: all of them in one
    command (one Redis), or one (a Cluster)."""

    def __init__(self, group: EventGroup, streams: list[str]) -> None:
        self.group = group
        self.streams = streams
        self.outstanding: set[tuple[str, str]] = set()
        self.released = asyncio.Event()
        self.pending = set(streams)
        """Streams whose entries pending for this consumer are read first (at start,
        after an error, after a batch was given back unacknowledged)."""
        self.next_claim = 0.0

    @property
    def where(self) -> str:
        return self.streams[0] if len(self.streams) == 1 else f"{len(self.streams)} shard streams"

    def _describe(self, exc: BaseException) -> str:
        return f"{self.where}: {exc}"

    async def run(self) -> None:
        redis = self.group.redis
        # Every reader logs through the group's one failure log: Redis gone is one line
        # per interval, not one per shard per retry.
        retry = Retrying(
            "change stream read failed", log=self.group.failures, backoff=BACKOFF, describe=self._describe
        )
        while not self.group.closed:
            entries = await retry.run(self._read, retry_on=(RedisError,))
            if entries is None:
                continue
            if self.group.closed:
                return  # what this last read got stays pending: the next consumer reads it
            junk: dict[str, list[str]] = {}
            for stream, entry_id, fields in entries:
                if not _is_event(fields):
                    junk.setdefault(stream, []).append(entry_id)
            for stream, ids in junk.items():
                with contextlib.suppress(RedisError):
                    await redis.xack(stream, self.group.group, *ids)
            batch = [Event.from_entry(i, f, stream) for stream, i, f in entries if f and _is_event(f)]
            if not batch:
                continue
            self.outstanding = {(e.stream, e.id) for e in batch}
            self.released.clear()
            await self.group.queue.put(batch)
            await self.released.wait()
            if self.group.closed:
                return
            if len(batch) < self.group.count and self.group.reading.linger > 0:
                await asyncio.sleep(self.group.reading.linger)

    async def _read(self) -> Entries | None:
        """The next entries; None: nothing read (the reader is closed, or the group was
        made again)."""
        if self.group.closed:
            return None
        try:
            return await self._next_entries()
        except ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            # A stream or the group went away (a flushed Redis): everything such a
            # stream holds now was written since, so the group starts from its start
            # (where the group is there, making it again changes nothing).
            log.warning("%s: the consumer group is gone: recreating it", self.where)
            with contextlib.suppress(RedisError):
                for stream in self.streams:
                    await self.group.create(stream, "0")
            return None
        except RedisError:
            self.pending = set(self.streams)
            raise

    async def _next_entries(self) -> Entries:
        group, redis = self.group, self.group.redis
        if self.pending:
            reply = await redis.xreadgroup(
                group.group, group.consumer, {s: "0" for s in sorted(self.pending)}, count=group.count
            )
            entries = _entries(reply)
            self.pending = {stream for stream, _, _ in entries}  # the others have none left
            if entries:
                return entries
        now = time.monotonic()
        if now >= self.next_claim:
            # A dead consumer's entries, idle past claim_idle_ms, become ours.
            self.next_claim = now + group.reading.claim_every
            claimed: Entries = []
            for stream in self.streams:
                _, got, *_ = await redis.xautoclaim(
                    stream, group.group, group.consumer, group.reading.claim_idle_ms, "0-0", count=group.count
                )
                claimed += [(stream, i, f) for i, f in got if i]
            if claimed:
                return claimed
        reply = await redis.xreadgroup(
            group.group, group.consumer, {s: ">" for s in self.streams}, count=group.count,
            block=group.reading.block_ms,
        )
        return _entries(reply)

    def settle(self, stream: str, ids: set[str], *, acked: bool) -> None:
        self.outstanding -= {(stream, i) for i in ids}
        if not acked:
            self.pending.add(stream)
        if not self.outstanding:
            self.released.set()


_LIVE: dict[tuple[int, str, str], EventGroup] = {}
"""The newest group reader per (client, group, consumer) in this process."""


def _entries(reply: Any) -> Entries:
    return [(stream, i, f) for stream, entries in reply or [] for i, f in entries]


@dataclass(frozen=True)
class GroupReading:
    """How a group's shard readers read their stream."""

    claim_idle_ms: int = 20_000
    """A dead consumer's pending entry is claimed once idle this long."""
    claim_every: float = 5.0
    """Seconds between two looks for such entries."""
    block_ms: int = READ_BLOCK_MS
    """The longest one blocking read waits."""
    linger: float = 0.0
    """Seconds a reader waits after a batch smaller than it asked for before it reads
    again: what is written meanwhile comes as one batch (one read, and one look-up of
    who follows its owners) instead of one each. 0: read again at once."""


class EventGroup:
    """One consumer in a consumer group on every shard's change stream.

    Each event goes to one consumer of the group; entries a dead consumer left
    pending are claimed (`GroupReading`). An event is acknowledged by `ack` — call it
    once the work it asks for is scheduled; a batch not acknowledged by the next
    `read` is delivered again.
    """

    def __init__(self, redis: Any, group: str, consumer: str, *, reading: GroupReading = GroupReading()) -> None:
        self.redis = redis
        self.group = group
        self.consumer = consumer
        self.reading = reading
        self.count = 100
        """Entries asked of a shard at once: the `count` of the latest `read`."""
        self.queue: asyncio.Queue[list[Event]] = asyncio.Queue()
        self._readers: dict[str, _StreamsReader] = {}
        """Each stream's reader (one reader may read them all)."""
        self._tasks: list[asyncio.Task[None]] = []
        self._handed: list[Event] = []
        self.closed = False
        self._tasks_left: list[asyncio.Task[None]] = []
        self.failures = FailureLog(log)
        """Where every shard's reader says its failures."""

    async def streams(self) -> list[str]:
        return (await layout_of(self.redis)).streams

    async def create(self, stream: str, start: str = "$") -> None:
        try:
            await self.redis.xgroup_create(stream, self.group, id=start, mkstream=True)
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    async def ensure(self, start: str = "$") -> None:
        """Create the group on every shard stream (kept where it exists)."""
        for stream in await self.streams():
            await self.create(stream, start)

    async def _start(self) -> None:
        if self._tasks:
            return
        # An earlier reader of this consumer in this process (an adapter restarted in
        # place) may still be in a read: let it end first, so what it took is pending
        # again when the new readers look at their pending entries.
        key = (id(self.redis), self.group, self.consumer)
        earlier = _LIVE.get(key)
        if earlier is not None and earlier is not self and earlier._tasks_left:
            await asyncio.wait(earlier._tasks_left, timeout=self.reading.block_ms / 1000 + 1)
        _LIVE[key] = self
        self.closed = False
        streams = await self.streams()
        parts = [[s] for s in streams] if isinstance(self.redis, RedisCluster) else [streams]
        for part in parts:
            reader = _StreamsReader(self, part)
            for stream in part:
                self._readers[stream] = reader
            name = f"events-{self.group}-{part[0] if len(part) == 1 else 'all'}"
            self._tasks.append(asyncio.create_task(reader.run(), name=name))
        # The readers live as long as the task that reads from them: when it ends
        # (a stopped adapter), so do they.
        consumer = asyncio.current_task()
        if consumer is not None:
            consumer.add_done_callback(lambda _: self._cancel())

    def _cancel(self) -> list[asyncio.Task[None]]:
        # No task.cancel(): a read cancelled half-way can be left hanging; each reader
        # sees `closed` when its current read (at most block_ms) returns, and stops.
        tasks, self._tasks = self._tasks, []
        self.closed = True
        for reader in self._readers.values():
            reader.released.set()
        self._readers.clear()
        self._tasks_left = [t for t in tasks if not t.done()]
        return tasks

    async def read(self, *, count: int = 100, block_ms: int = 1000) -> list[Event]:
        """The next events of any shard (waiting up to `block_ms`), at most about `count`.

        Pending entries of this consumer come first (after a restart), then entries a
        dead consumer left, then new ones. Events handed out by the previous read and
        not acknowledged since are handed out again.
        """
        self.count = count
        await self._start()
        if self._handed:
            self._settle(self._handed, acked=False)
            self._handed = []
        out: list[Event] = []
        try:
            out += await asyncio.wait_for(self.queue.get(), block_ms / 1000)
        except TimeoutError:
            return []
        while len(out) < count and not self.queue.empty():
            out += self.queue.get_nowait()
        self._handed = list(out)
        return out

    async def ack(self, events: list[Event]) -> None:
        async with self.redis.pipeline(transaction=False) as pipe:
            self.queue_ack(pipe, events)
            await pipe.execute()
        self.acked(events)

    def queue_ack(self, pipe: Any, events: list[Event]) -> None:
        """Queue the acknowledgement of `events` on a pipeline (with the reads their
        batch needs: one round trip); `acked` once it ran."""
        by_stream: dict[str, list[str]] = {}
        for e in events:
            by_stream.setdefault(e.stream, []).append(e.id)
        for stream, ids in by_stream.items():
            pipe.xack(stream, self.group, *ids)

    def acked(self, events: list[Event]) -> None:
        """`events` were acknowledged (`queue_ack`): they are not handed out again."""
        acked = {(e.stream, e.id) for e in events}
        self._handed = [e for e in self._handed if (e.stream, e.id) not in acked]
        self._settle(events, acked=True)

    def _settle(self, events: list[Event], *, acked: bool) -> None:
        by_stream: dict[str, set[str]] = {}
        for e in events:
            by_stream.setdefault(e.stream, set()).add(e.id)
        for stream, ids in by_stream.items():
            reader = self._readers.get(stream)
            if reader is not None:
                reader.settle(stream, ids, acked=acked)

    async def close(self) -> None:
        tasks = self._cancel()
        if tasks:
            # Bounded: a reader cancelled in the middle of a blocking read may take
            # until its block time ends to notice.
            await asyncio.wait(tasks, timeout=self.reading.block_ms / 1000 + 1)

    async def lag(self) -> int:
        """Entries of all shards not yet delivered to this group, plus those pending."""
        total = 0
        for stream in await self.streams():
            total += await group_lag(self.redis, stream, self.group)
        return total


async def group_lag(redis: Any, stream: str, group: str, *, cap: int = 100_000) -> int:
    """Undelivered + unacknowledged entries of `group` on `stream` (0 when absent)."""
    try:
        groups = await redis.xinfo_groups(stream)
    except ResponseError:
        return 0
    for info in groups:
        name = info.get("name")
        if (name.decode() if isinstance(name, bytes) else name) != group:
            continue
        pending = int(info.get("pending") or 0)
        if info.get("lag") is not None:
            return int(info["lag"]) + pending
        # Redis before 7 reports no lag: count what lies past the last delivered entry.
        after = f"({info.get('last-delivered-id') or '0-0'}"
        return len(await redis.xrange(stream, min=after, max="+", count=cap)) + pending
    return 0


async def last_id(redis: Any, stream: str) -> str:
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
    redis: Any, stream: str, *, start: str = "$", block_ms: int = READ_BLOCK_MS
) -> AsyncIterator[Event | None]:
    """Every event of one shard stream after `start`, for live viewers (SSE): no group,
    nothing acknowledged.

    `start="$"` means "after the newest entry now" — resolved on the first iteration,
    so pass `await last_id(redis, stream)` instead when the caller must know it is
    listening. Yields None after `block_ms` without events: a heartbeat that lets the
    caller notice a closed client.
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
                    yield Event.from_entry(entry_id, fields, stream)


ACTIVITY_CHANGED = "activity.changed"
"""The event of a change to an owner's activity only (tool lines, a headline, the answer)."""


def coalesce(events: list[Event]) -> dict[Owner, bool]:
    """The owners touched, once each, in first-seen order: whether only their activity
    changed (not the card, not the run)."""
    out: dict[Owner, bool] = {}
    for event in events:
        out[event.owner] = out.get(event.owner, True) and event.type == ACTIVITY_CHANGED
    return out
