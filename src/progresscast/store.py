"""CardStore: put / get / clear / reset, runs and activity, on redis-py asyncio.

Every write is one Lua script: it checks that no reset came since the write arrived and
the expected revision, bumps the owner's revision, stores or deletes the card, and
publishes the change to the owner's shard stream (publish.py) — all or nothing, and all
in one hash slot.
Validation happens before the script runs, so a rejected write never touches Redis.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import cast

from redis.asyncio import Redis
from redis.exceptions import RedisError

from . import keys, publish
from .activity import Activity
from .card import Card, CardError, CardInput, StepCounts, WriteResult
from .keys import Layout
from .owners import Owner
from .retention import retention_ms
from .sharding import layout_of
from .view import TERMINAL, EndedRun, RunState, View


class StoreError(CardError):
    """A well-formed write the store refuses (stale revision, reset in between)."""

    def __init__(self, field: str, rule: str, *, revision: int | None = None) -> None:
        super().__init__(field, rule)
        self.revision = revision
        """For a stale `expectedRevision`: the revision the card is at, to retry against."""


# Each script is publish.py's prelude (the change's stream, index and `last`) and a body.

_WRITE = publish.script("""
local card_key, rev_key, reset_at_key = KEYS[4], KEYS[5], KEYS[6]
local body, expected, is_reset, arrived_us_ago = ARGV[5], ARGV[6], ARGV[7], ARGV[8]

local now_us, ms = clock()
if arrived_us_ago ~= '' then
  -- Admitted when the request arrived, that long ago: a reset since then wins. (A
  -- reset "in the future" means this server's clock stepped back: it is not counted.)
  local reset_at = tonumber(redis.call('GET', reset_at_key) or '0')
  if reset_at > now_us - tonumber(arrived_us_ago) and reset_at <= now_us then
    return {'reset', reset_at}
  end
end
local rev = tonumber(redis.call('GET', rev_key) or '0')
if expected ~= '' and tonumber(expected) ~= rev then
  return {'revision', rev}
end
rev = redis.call('INCR', rev_key)
if is_reset == '1' then
  redis.call('SET', reset_at_key, string.format('%d', now_us))
end
local shown = ''
if body == '' then
  redis.call('DEL', card_key)
else
  redis.call('HSET', card_key, 'body', body, 'revision', rev, 'updatedAt', ms)
  shown = tostring(rev)
end
index_owner(ms)
publish('progressCard.changed', shown)
return {'ok', rev}
""")

_ACTIVITY = publish.script("""
local activity_key, tools_key = KEYS[4], KEYS[5]
-- headline / answer: '' keeps, '\\0' clears
local headline, tool, answer, max_tools, replace = ARGV[5], ARGV[6], ARGV[7], tonumber(ARGV[8]), ARGV[9]

if replace == '1' then redis.call('DEL', activity_key, tools_key) end
for field, v in pairs({headline = headline, answer = answer}) do
  if v == '\\0' then redis.call('HDEL', activity_key, field)
  elseif v ~= '' then redis.call('HSET', activity_key, field, v) end
end
if tool ~= '' then
  redis.call('RPUSH', tools_key, tool)
  redis.call('LTRIM', tools_key, -max_tools, -1)
end
local _, ms = clock()
index_owner(ms)
publish('activity.changed', '')
return 1
""")

_RUN = publish.script("""
local run_key, rev_key, activity_key, tools_key = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
-- state 'active' starts a run; anything else ends run_id if it is the current one
local run_id, state = ARGV[5], ARGV[6]

local _, ms = clock()
local kind
if state == 'active' then
  local rev = redis.call('GET', rev_key) or '0'
  -- The run that ended before this one, with its final answer: a channel that did not
  -- look in between still ends it (the activity, answer included, is cleared here).
  local prev_id = redis.call('HGET', run_key, 'runId')
  local prev_state = redis.call('HGET', run_key, 'state')
  local prev_answer = redis.call('HGET', activity_key, 'answer') or ''
  redis.call('DEL', run_key, activity_key, tools_key)
  redis.call('HSET', run_key, 'runId', run_id, 'state', 'active', 'startedAt', ms, 'startRevision', rev)
  if prev_id and prev_state and prev_state ~= 'active' then
    redis.call('HSET', run_key, 'prevRunId', prev_id, 'prevState', prev_state, 'prevAnswer', prev_answer)
  end
  kind = 'run.started'
else
  local current = redis.call('HGET', run_key, 'runId')
  if current ~= run_id then return 0 end
  redis.call('HSET', run_key, 'state', state, 'endedAt', ms, 'endRevision', redis.call('GET', rev_key) or '0')
  kind = 'run.ended'
end
-- (No index_owner: starting or ending a run leaves the owner's place in listings.)
publish(kind, '', state)
return 1
""")


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


class CardStore:
    def __init__(self, redis: Redis, *, events_maxlen: int = keys.EVENTS_MAXLEN, metrics: bool = True) -> None:
        """`metrics=False` for a short-lived process nobody scrapes (an agent hook): its
        writes are not counted, and it never imports prometheus_client (~10 ms)."""
        self.redis = redis
        self.events_maxlen = events_maxlen
        self.metrics = metrics
        self._write = redis.register_script(_WRITE)
        self._activity = redis.register_script(_ACTIVITY)
        self._run = redis.register_script(_RUN)

    async def layout(self) -> Layout:
        """The store's key layout (its recorded shard count), learnt on first use."""
        return await layout_of(self.redis)

    # -- cards ---------------------------------------------------------------

    async def put(
        self,
        owner: Owner,
        card: CardInput,
        *,
        expected_revision: int | None = None,
        arrived: float | None = None,
    ) -> WriteResult:
        """Store the card. `arrived` (a `time.monotonic()` reading taken when the write
        arrived) refuses it when a reset came in between."""
        body = "" if card.clears else json.dumps(card.to_json(), ensure_ascii=False)
        rev = await self._apply(owner, body, expected_revision, reset=False, arrived=arrived)
        if card.clears:
            return WriteResult(revision=rev, cleared=True)
        plan = card.plan or []
        steps = StepCounts(completed=sum(s.done for s in plan), total=len(plan)) if plan else None
        return WriteResult(revision=rev, steps=steps)

    async def clear(self, owner: Owner, *, expected_revision: int | None = None) -> WriteResult:
        return await self.put(owner, CardInput(), expected_revision=expected_revision)

    async def reset(self, owner: Owner) -> WriteResult:
        """Clear at a boundary: writes that arrived before it are refused afterwards."""
        rev = await self._apply(owner, "", None, reset=True)
        return WriteResult(revision=rev, cleared=True)

    async def _apply(
        self,
        owner: Owner,
        body: str,
        expected_revision: int | None,
        *,
        reset: bool,
        arrived: float | None = None,
    ) -> int:
        try:
            status, value = await self._write_script(owner, body, expected_revision, reset=reset, arrived=arrived)
        except RedisError:
            self._count("error")
            raise
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
        return int(value)

    def _count(self, outcome: str) -> None:
        if self.metrics:
            from . import metrics

            metrics.WRITES.labels(outcome).inc()

    async def _write_script(
        self,
        owner: Owner,
        body: str,
        expected_revision: int | None,
        *,
        reset: bool,
        arrived: float | None = None,
    ) -> tuple[str, int]:
        lay = await self.layout()
        # How long ago the write arrived, taken last: a duration needs no clock shared
        # with Redis, which compares it with the last reset on its own clock.
        ago = "" if arrived is None else max(0, int((time.monotonic() - arrived) * 1_000_000))
        status, value = await self._write(
            keys=[
                *publish.change_keys(lay, owner),
                lay.card(owner),
                lay.revision(owner),
                lay.reset_at(owner),
                *publish.retained_keys(lay, owner),
            ],
            args=[
                *publish.change_args(owner, self.events_maxlen),
                body,
                "" if expected_revision is None else int(expected_revision),
                "1" if reset else "0",
                ago,
                publish.retention_arg(await retention_ms(self.redis)),
            ],
        )
        return str(status), int(value)

    async def get(self, owner: Owner) -> Card | None:
        lay = await self.layout()
        raw = cast("dict[str, str]", await self.redis.hgetall(lay.card(owner)))
        return self._card(owner, raw) if raw else None

    async def revision(self, owner: Owner) -> int:
        lay = await self.layout()
        return int(await self.redis.get(lay.revision(owner)) or 0)

    @staticmethod
    def _card(owner: Owner, raw: dict[str, str]) -> Card:
        body = json.loads(raw["body"])
        return Card(
            sessionKey=owner.session_key,
            agentId=owner.agent_id,
            displayKey=owner.display_key,
            revision=int(raw["revision"]),
            plan=body.get("plan"),
            markdown=body.get("markdown"),
            updatedAt=_iso(int(raw["updatedAt"])),
        )

    # -- runs and activity ---------------------------------------------------

    async def start_run(self, owner: Owner, run_id: str) -> None:
        """A new agent turn: earlier activity is dropped, the card stays (and may show paused)."""
        await self._run_script(owner, run_id, RunState.active)

    async def end_run(self, owner: Owner, run_id: str, state: RunState) -> bool:
        """End the active run; False when `run_id` is not the current run."""
        if state not in TERMINAL:
            raise CardError("state", "must be one of completed, failed, canceled")
        return bool(await self._run_script(owner, run_id, state))

    async def _run_script(self, owner: Owner, run_id: str, state: RunState) -> int:
        if not isinstance(run_id, str) or not run_id.strip() or len(run_id) > 200:
            raise CardError("runId", "must be a non-empty string of at most 200 characters")
        lay = await self.layout()
        result = await self._run(
            keys=[
                *publish.change_keys(lay, owner),
                lay.run(owner),
                lay.revision(owner),
                lay.activity(owner),
                lay.tools(owner),
                *publish.retained_keys(lay, owner),
            ],
            args=[
                *publish.change_args(owner, self.events_maxlen), run_id, state.value,
                publish.retention_arg(await retention_ms(self.redis)),
            ],
        )
        return int(result)

    async def update_activity(
        self,
        owner: Owner,
        *,
        headline: str | None = None,
        tool: str | None = None,
        answer: str | None = None,
        replace: bool = False,
    ) -> Activity:
        """Merge into the owner's activity: a given headline or answer replaces the old one
        (an empty string removes it), a tool line is appended to the recent ones."""
        from .activity import MAX_TOOL_LINES

        # Validate through the model first so nothing half-written reaches Redis.
        checked = Activity.parse(
            {"headline": headline, "tools": [tool] if tool is not None else [], "answer": answer}
        )

        def arg(given: str | None, clean: str | None) -> str:
            if given is None:
                return ""
            return clean if clean else "\0"

        lay = await self.layout()
        await self._activity(
            keys=[
                *publish.change_keys(lay, owner), lay.activity(owner), lay.tools(owner),
                *publish.retained_keys(lay, owner),
            ],
            args=[
                *publish.change_args(owner, self.events_maxlen),
                arg(headline, checked.headline),
                checked.tools[0] if checked.tools else "",
                arg(answer, checked.answer),
                MAX_TOOL_LINES,
                "1" if replace else "0",
                publish.retention_arg(await retention_ms(self.redis)),
            ],
        )
        return await self.activity(owner)

    async def activity(self, owner: Owner) -> Activity:
        lay = await self.layout()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(lay.activity(owner))
            pipe.lrange(lay.tools(owner), 0, -1)
            fields, tools = await pipe.execute()
        return Activity(
            headline=fields.get("headline"), tools=tuple(tools), answer=fields.get("answer"),
            attention=fields.get("attention"),
        )

    async def view(self, owner: Owner) -> View:
        """Card, activity and run state read in one transaction, so they agree."""
        lay = await self.layout()
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(lay.card(owner))
            pipe.hgetall(lay.activity(owner))
            pipe.lrange(lay.tools(owner), 0, -1)
            pipe.hgetall(lay.run(owner))
            raw_card, fields, tools, run = await pipe.execute()
        card = self._card(owner, raw_card) if raw_card else None
        state = RunState(run["state"]) if run else RunState.none
        paused = state in TERMINAL or (
            state is RunState.active
            and card is not None
            and card.revision <= int(run.get("startRevision", 0))
        )
        after_end = (
            state in TERMINAL and card is not None and "endRevision" in run and card.revision > int(run["endRevision"])
        )
        # The tool lines belong to the finished run, not to a card written after it.
        shown_tools = () if after_end else tuple(tools)
        activity = Activity(headline=fields.get("headline"), tools=shown_tools, answer=fields.get("answer"),
            attention=fields.get("attention"),
        )
        previous = None
        if run.get("prevRunId") and run.get("prevState") in RunState.__members__:
            previous = EndedRun(run["prevRunId"], RunState(run["prevState"]), run.get("prevAnswer") or None)
        return View(
            owner=owner,
            card=card,
            activity=activity,
            run=state,
            run_id=run.get("runId"),
            paused=paused,
            after_end=after_end,
            previous=previous,
        )

    async def last_event(self, owner: Owner) -> dict[str, str]:
        """The owner's newest event as stored beside it ({} when it never had one)."""
        lay = await self.layout()
        return cast("dict[str, str]", await self.redis.hgetall(lay.last_event(owner)))

    async def owners(self, *, page: int = 500) -> AsyncIterator[tuple[str, int]]:
        """Every display key with its last change (ms), newest first, across all shards.

        Each shard's index is read `page` entries at a time and merged, so a caller
        that stops early (a listing that filled its page) reads little more than it shows.
        """
        lay = await self.layout()
        heads = [self._index(name, page) for name in lay.indexes]
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

    async def _index(self, name: str, page: int) -> AsyncIterator[tuple[str, int]]:
        start = 0
        while True:
            reply = await self.redis.zrevrange(name, start, start + page - 1, withscores=True)
            rows = cast("list[tuple[str, float]]", reply)
            for key, score in rows:
                yield key, int(score)
            if len(rows) < page:
                return
            start += page
