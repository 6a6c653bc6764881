"""CardStore: the one write path of every input, and the reads, on redis-py asyncio.

Every input — the gateway's RPC, the command line, the MCP server, the agent hooks, A2A
(stream, push, poll, ingest) — writes through this class, and every write is one script
of scripts.py: its admission rules (the reset boundary by arrival on the Redis clock,
the expected revision, A2A order) are checked in the same script that writes, bumps
the revision, appends the history entry and publishes the change — all or nothing,
and all in one hash slot. Validation happens before a script runs, so a rejected
write never touches Redis.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.asyncio import Redis, RedisCluster
from redis.commands.core import AsyncScript
from redis.exceptions import RedisError

from ..model.activity import Activity
from ..model.asks import StopMark
from ..model.card import Card, CardError, CardInput, Step, StepCounts, WriteResult
from ..model.history import HistoryEntry
from ..model.owners import Owner
from ..model.timing import Usage
from ..model.view import TERMINAL, RunState, View
from . import keys, scripts
from .asks import AskStore
from .errors import StoreError as StoreError
from .keys import Layout
from .reads import READ_MANY, Reads
from .retention import retention_ms
from .sharding import layout_of
from .views import VIEW_REPLIES, activity_of, card_of, iso, queue_view, view_of

TS_WIDTH = 20
"""A2A timestamps are compared as zero-padded strings: exact at any size, in any Lua."""

MAX_ANSWER_BYTES = 65_536
"""What Redis keeps of an A2A streamed answer (the activity shows its last 16,384 characters)."""


@dataclass(frozen=True)
class StatusWrite:
    """What an A2A status update or task snapshot writes (a2a/apply.py maps it)."""

    task_id: str
    timestamp_us: int | None
    """None: untimed, applied in arrival order (the caller decides when that is allowed)."""
    plan: CardInput | None
    """The update's whole plan (the note is kept); None when it carried no valid plan."""
    headline: str | None = None
    attention: str | None = None
    ended: RunState | None = None
    stoppable: bool = False
    """A run this update starts offers Stop: its follower cancels the task when pressed."""


def _ago(arrived: float) -> int:
    """How long ago the write arrived (µs): a duration needs no clock shared with Redis,
    which compares it with the last reset on its own clock."""
    return max(0, int((time.monotonic() - arrived) * 1_000_000))


def _plan_json(card: CardInput) -> str:
    return json.dumps([s.to_json() for s in card.plan], ensure_ascii=False) if card.plan else ""


class CardStore:
    def __init__(self, redis: Redis, *, events_maxlen: int = keys.EVENTS_MAXLEN, metrics: bool = True) -> None:
        """`metrics=False` for a short-lived process nobody scrapes (an agent hook): its
        writes are not counted, and it never imports prometheus_client (~10 ms)."""
        self.redis = redis
        self.events_maxlen = events_maxlen
        self.metrics = metrics
        self._cluster = isinstance(redis, RedisCluster)  # asked once: redis-py's classes make it slow
        self._card_script = redis.register_script(scripts.CARD)
        self._activity = redis.register_script(scripts.ACTIVITY)
        self._run = redis.register_script(scripts.RUN)
        self._a2a_status = redis.register_script(scripts.A2A_STATUS)
        self._a2a_answer = redis.register_script(scripts.A2A_ANSWER)
        self._read_many = redis.register_script(READ_MANY)
        self._asks: AskStore | None = None

    async def layout(self) -> Layout:
        """The store's key layout (its recorded shard count), learnt on first use."""
        return await layout_of(self.redis)

    async def call(
        self, script: AsyncScript, owner: Owner, args: Sequence[str | int], *, arrived: float | None = None
    ) -> object:
        """Run a write script; with `arrived`, its first own argument is how long ago the
        write arrived, taken last (after the layout, which a first use may take a while to learn)."""
        lay = await self.layout()
        retained = scripts.retention_arg(await retention_ms(self.redis))
        given = [_ago(arrived), *args] if arrived is not None else list(args)
        return await script(
            keys=scripts.owner_keys(lay, owner),
            args=[*scripts.common_args(owner, self.events_maxlen), *given, retained],
        )

    # -- cards ---------------------------------------------------------------

    async def put(
        self,
        owner: Owner,
        card: CardInput,
        *,
        expected_revision: int | None = None,
        arrived: float | None = None,
        keep_markdown: bool = False,
    ) -> WriteResult:
        """Store the card. `arrived` (a `time.monotonic()` reading taken when the write
        arrived; default: now) refuses it when a reset came in between. `keep_markdown`
        writes the plan alone and keeps the stored note (`card.markdown` must be None)."""
        if keep_markdown and card.markdown is not None:
            raise CardError("markdown", "must be absent when the card's note is kept")
        return await self._write(owner, card, expected_revision, arrived, keep_markdown=keep_markdown)

    async def put_plan(self, owner: Owner, steps: Sequence[Step], *, arrived: float | None = None) -> WriteResult:
        """Replace the plan, keeping the card's note (`update_plan`, the hooks)."""
        return await self.put(owner, CardInput(plan=list(steps)), arrived=arrived, keep_markdown=True)

    async def clear(
        self, owner: Owner, *, expected_revision: int | None = None, arrived: float | None = None
    ) -> WriteResult:
        return await self.put(owner, CardInput(), expected_revision=expected_revision, arrived=arrived)

    async def reset(self, owner: Owner) -> WriteResult:
        """Clear at a boundary: writes that arrived before it are refused afterwards."""
        return await self._write(owner, CardInput(), None, None, reset=True)

    async def _write(
        self, owner: Owner, card: CardInput, expected_revision: int | None, arrived: float | None, *,
        keep_markdown: bool = False, reset: bool = False,
    ) -> WriteResult:
        """The one write of `put` and `reset` (which sets the boundary)."""
        if arrived is None:
            arrived = time.monotonic()
        plan, markdown = _plan_json(card), card.markdown or ""
        expected = "" if expected_revision is None else int(expected_revision)
        try:
            reply = await self.call(
                self._card_script, owner,
                [expected, "1" if reset else "0", plan, markdown, "1" if keep_markdown else "0"],
                arrived=arrived,
            )
        except RedisError:
            self._count("error")
            raise
        status, value, cleared, *more = cast("list[str | int]", reply)
        stop = StopMark.from_stored(str(more[0])) if more and more[0] else None
        if status != "ok":
            self._count("conflict")
        if status == "revision":
            raise StoreError(
                "expectedRevision",
                f"is {expected_revision} but the card is at revision {value}",
                revision=int(value),
            )
        if status == "reset":
            raise StoreError("sessionKey", "the card was reset after this write was admitted")
        self._count("ok")
        if int(cleared):
            return WriteResult(revision=int(value), cleared=True, stop=stop)
        steps = card.plan or []
        counts = StepCounts(completed=sum(s.done for s in steps), total=len(steps)) if steps else None
        return WriteResult(revision=int(value), steps=counts, stop=stop)

    def _count(self, outcome: str) -> None:
        if self.metrics:
            from .. import metrics

            metrics.WRITES.labels(outcome).inc()

    # -- A2A -------------------------------------------------------------------

    async def apply_status(
        self, owner: Owner, write: StatusWrite, *, arrived: float | None = None, max_skew: float = 300.0
    ) -> str:
        """Apply an A2A status update: `applied`, `stale`, `duplicate`, `future` (its
        timestamp is more than `max_skew` seconds ahead of the store's clock) or `reset`
        (the owner was reset after the update arrived). The plan and the status are each
        applied when newer than the last of their kind (scripts.py)."""
        if arrived is None:
            arrived = time.monotonic()
        ts = "" if write.timestamp_us is None else str(write.timestamp_us).zfill(TS_WIDTH)
        (outcome,) = cast(
            "list[str]",
            await self.call(
                self._a2a_status, owner,
                [
                    ts,
                    int(max_skew * 1_000_000),
                    write.task_id,
                    "0" if write.plan is None else "1",
                    "" if write.plan is None else _plan_json(write.plan),
                    write.headline or "",
                    write.attention or "",
                    write.ended.value if write.ended else "",
                    "1" if write.stoppable else "0",
                ],
                arrived=arrived,
            ),
        )
        return str(outcome)

    async def apply_answer(
        self, owner: Owner, *, task_id: str, artifact_id: str, text: str, append: bool, last_chunk: bool
    ) -> str:
        """A2A artifact text for the answer of the task whose run is current: `applied` or `stale`."""
        (outcome,) = cast(
            "list[str]",
            await self.call(
                self._a2a_answer, owner,
                [task_id, artifact_id, text, "1" if append else "0", "1" if last_chunk else "0", MAX_ANSWER_BYTES],
            ),
        )
        return str(outcome)

    async def get(self, owner: Owner) -> Card | None:
        lay = await self.layout()
        raw = cast("dict[str, str]", await self.redis.hgetall(lay.card(owner)))
        return card_of(owner, raw) if raw else None

    async def revision(self, owner: Owner) -> int:
        lay = await self.layout()
        return int(await self.redis.get(lay.revision(owner)) or 0)

    async def history(self, owner: Owner, *, limit: int = 50, before: int | None = None) -> list[HistoryEntry]:
        """What the owner's accepted writes changed, newest first: at most `limit` entries,
        only those of revisions below `before` when given."""
        lay = await self.layout()
        # Newest first and few (scripts.HISTORY_MAX): paging by revision reads them all.
        end = limit - 1 if before is None else -1
        raw = cast("list[str]", await self.redis.lrange(lay.history(owner), 0, end))
        entries = [e for e in map(HistoryEntry.from_stored, raw) if e is not None]
        if before is not None:
            entries = [e for e in entries if e.revision < before]
        return entries[:limit]

    # -- runs and activity ---------------------------------------------------

    async def start_run(self, owner: Owner, run_id: str, *, stoppable: bool = False) -> None:
        """A new agent turn: earlier activity is dropped, the card stays (and may show paused).
        `stoppable`: the caller acts on a Stop pressed in chat, so chats offer one."""
        await self._run_script(owner, run_id, RunState.active, stoppable=stoppable)

    async def end_run(self, owner: Owner, run_id: str, state: RunState, *, usage: Usage | None = None) -> bool:
        """End the active run, with what it used when its agent knows; False when
        `run_id` is not the current run."""
        if state not in TERMINAL:
            raise CardError("state", "must be one of completed, failed, canceled")
        return bool(await self._run_script(owner, run_id, state, usage=usage))

    async def _run_script(
        self, owner: Owner, run_id: str, state: RunState, *, stoppable: bool = False, usage: Usage | None = None
    ) -> int:
        if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 200:
            raise CardError("runId", "must be a non-empty string of at most 200 characters")
        used = json.dumps(usage.to_json(), separators=(",", ":")) if usage is not None and not usage.empty else ""
        args = [run_id, state.value, "1" if stoppable else "0", used]
        return int(cast("int", await self.call(self._run, owner, args)))

    @property
    def asks(self) -> AskStore:
        """The owner's asks and Stop: the same write path (store/asks.py)."""
        if self._asks is None:
            self._asks = AskStore(self)
        return self._asks

    async def update_activity(
        self,
        owner: Owner,
        *,
        headline: str | None = None,
        tool: str | None = None,
        answer: str | None = None,
        replace: bool = False,
        replaces: str | None = None,
    ) -> Activity:
        """Merge into the owner's activity: a given headline or answer replaces the old one
        (an empty string removes it), a tool line is appended to the recent ones — or, with
        `replaces`, takes the place of the newest line equal to that (a tool call that
        changed: appended when the old line is gone)."""
        from ..model.activity import MAX_TOOL_LINES

        # Validate through the model first so nothing half-written reaches Redis.
        checked = Activity.parse(
            {"headline": headline, "tools": [tool] if tool is not None else [], "answer": answer}
        )
        # Cleaned as the stored line was, so it compares equal.
        old = Activity.parse({"tools": [replaces]}).tools if replaces is not None else ()

        def arg(given: str | None, clean: str | None) -> str:
            if given is None:
                return ""
            return clean if clean else "\0"

        await self.call(
            self._activity, owner,
            [
                arg(headline, checked.headline),
                checked.tools[0] if checked.tools else "",
                arg(answer, checked.answer),
                MAX_TOOL_LINES,
                "1" if replace else "0",
                old[0] if old else "",
            ],
        )
        return await self.activity(owner)

    async def activity(self, owner: Owner) -> Activity:
        lay = await self.layout()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(lay.activity(owner))
            pipe.lrange(lay.tools(owner), 0, -1)
            fields, tools = await pipe.execute()
        return activity_of(fields, tuple(tools))

    async def view(self, owner: Owner) -> View:
        """Card, activity and run state read in one script call, so they agree."""
        lay = await self.layout()
        reads = Reads()
        queue_view(reads, lay, owner)
        return view_of(owner, await reads.run(self._read_many))

    async def view_with(self, owner: Owner, queue: Callable[[Any], None]) -> tuple[View, list[Any]]:
        """The owner's view and the replies of the reads `queue` adds (`Reads`: `get`,
        `hgetall` …), in one script call on a single Redis; on a Cluster, where a script
        keeps to one slot, the others in a pipeline first, then the view."""
        lay = await self.layout()
        if self._cluster:
            async with self.redis.pipeline(transaction=False) as pipe:
                queue(pipe)
                others = await pipe.execute()
            return await self.view(owner), others
        reads = Reads()
        queue(reads)
        queue_view(reads, lay, owner)
        replies = await reads.run(self._read_many)
        return view_of(owner, replies[-VIEW_REPLIES:]), replies[:-VIEW_REPLIES]

    async def last_event(self, owner: Owner) -> dict[str, str]:
        """The owner's newest event as stored beside it ({} when it never had one)."""
        lay = await self.layout()
        return cast("dict[str, str]", await self.redis.hgetall(lay.last_event(owner)))

    async def last_change(self, owner: Owner) -> str | None:
        """When the owner last changed (a write, a clear, activity, a run), ISO 8601 on
        the store's clock — the time its newest event was appended; None: never."""
        event_id = (await self.last_event(owner)).get("id", "")
        ms, _, _ = event_id.partition("-")
        return iso(int(ms)) if ms.isdigit() else None

    async def owners(
        self, *, page: int = 500, after: tuple[int, str] | None = None
    ) -> AsyncIterator[tuple[str, int]]:
        """Every display key with its last change (ms), newest first, across all shards;
        `after` (ms, display key): only those that come after it in that order.

        Each shard's index is read `page` entries at a time (from `after` on, found by
        score: nothing before it is read) and merged, so a caller that stops early (a
        listing that filled its page) reads little more than it shows.
        """
        lay = await self.layout()
        heads = [self._index(name, page, after) for name in lay.indexes]
        current: list[tuple[int, str, int] | None] = []
        for i, head in enumerate(heads):
            row = await anext(head, None)
            current.append(None if row is None else (row[1], row[0], i))
        while True:
            live = [c for c in current if c is not None]
            if not live:
                return
            score, key, i = max(live)
            yield key, score
            row = await anext(heads[i], None)
            current[i] = None if row is None else (row[1], row[0], i)

    async def _index(self, name: str, page: int, after: tuple[int, str] | None) -> AsyncIterator[tuple[str, int]]:
        top: float | str = "+inf" if after is None else after[0]
        start = 0
        while True:
            reply = await self.redis.zrevrangebyscore(name, top, "-inf", start=start, num=page, withscores=True)
            rows = cast("list[tuple[str, float]]", reply)
            for key, score in rows:
                # Equal scores come in reverse order of their keys, as the merge wants them.
                if after is None or (int(score), key) < after:
                    yield key, int(score)
            if len(rows) < page:
                return
            start += page
