"""CardStore: put / get / clear / reset, runs and activity, on redis-py asyncio.

Every write is one Lua script: it checks the reset epoch and the expected revision,
bumps the owner's revision, stores or deletes the card, and appends the change
event — all or nothing. Validation happens before the script runs, so a rejected
write never touches Redis.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import cast

from redis.asyncio import Redis

from . import keys
from .activity import Activity
from .card import Card, CardError, CardInput, StepCounts, WriteResult
from .owners import Owner
from .view import TERMINAL, EndedRun, RunState, View


class StoreError(CardError):
    """A well-formed write the store refuses (stale revision, reset in between)."""

    def __init__(self, field: str, rule: str, *, revision: int | None = None) -> None:
        super().__init__(field, rule)
        self.revision = revision
        """For a stale `expectedRevision`: the revision the card is at, to retry against."""


# KEYS: card, rev, epoch, events, owners
# ARGV: body ('' clears), expectedRevision ('' = any), admittedEpoch ('' = now),
#       sessionKey, agentId, displayKey, event type, reset ('1' bumps the epoch), maxlen
_WRITE = """
local epoch = tonumber(redis.call('GET', KEYS[3]) or '0')
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= epoch then
  return {'reset', epoch}
end
local rev = tonumber(redis.call('GET', KEYS[2]) or '0')
if ARGV[2] ~= '' and tonumber(ARGV[2]) ~= rev then
  return {'revision', rev}
end
rev = redis.call('INCR', KEYS[2])
if ARGV[8] == '1' then redis.call('INCR', KEYS[3]) end
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local shown = ''
if ARGV[1] == '' then
  redis.call('DEL', KEYS[1])
else
  redis.call('HSET', KEYS[1], 'body', ARGV[1], 'revision', rev, 'updatedAt', ms)
  shown = tostring(rev)
end
redis.call('ZADD', KEYS[5], ms, ARGV[6])
redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[9], '*', 'type', ARGV[7],
  'sessionKey', ARGV[4], 'agentId', ARGV[5], 'displayKey', ARGV[6], 'revision', shown)
return {'ok', rev}
"""

# KEYS: activity, tools, events, owners
# ARGV: headline ('' keeps, '\\0' clears), tool line ('' none), answer (as headline),
#       maxTools, sessionKey, agentId, displayKey, maxlen, replace ('1' drops all first)
_ACTIVITY = """
if ARGV[9] == '1' then redis.call('DEL', KEYS[1], KEYS[2]) end
for i, field in ipairs({'headline', 'answer'}) do
  local v = ARGV[i * 2 - 1]
  if v == '\\0' then redis.call('HDEL', KEYS[1], field)
  elseif v ~= '' then redis.call('HSET', KEYS[1], field, v) end
end
if ARGV[2] ~= '' then
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('LTRIM', KEYS[2], -tonumber(ARGV[4]), -1)
end
local t = redis.call('TIME')
redis.call('ZADD', KEYS[4], tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000), ARGV[7])
redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[8], '*', 'type', 'activity.changed',
  'sessionKey', ARGV[5], 'agentId', ARGV[6], 'displayKey', ARGV[7], 'revision', '')
return 1
"""

# KEYS: run, rev, activity, tools, events
# ARGV: runId, state ('active' starts a run), sessionKey, agentId, displayKey, maxlen
_RUN = """
local t = redis.call('TIME')
local ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local kind
if ARGV[2] == 'active' then
  local rev = redis.call('GET', KEYS[2]) or '0'
  -- The run that ended before this one, with its final answer: a channel that did not
  -- look in between still ends it (the activity, answer included, is cleared here).
  local prev_id = redis.call('HGET', KEYS[1], 'runId')
  local prev_state = redis.call('HGET', KEYS[1], 'state')
  local prev_answer = redis.call('HGET', KEYS[3], 'answer') or ''
  redis.call('DEL', KEYS[1], KEYS[3], KEYS[4])
  redis.call('HSET', KEYS[1], 'runId', ARGV[1], 'state', 'active', 'startedAt', ms, 'startRevision', rev)
  if prev_id and prev_state and prev_state ~= 'active' then
    redis.call('HSET', KEYS[1], 'prevRunId', prev_id, 'prevState', prev_state, 'prevAnswer', prev_answer)
  end
  kind = 'run.started'
else
  local current = redis.call('HGET', KEYS[1], 'runId')
  if current ~= ARGV[1] then return 0 end
  redis.call('HSET', KEYS[1], 'state', ARGV[2], 'endedAt', ms, 'endRevision', redis.call('GET', KEYS[2]) or '0')
  kind = 'run.ended'
end
redis.call('XADD', KEYS[5], 'MAXLEN', '~', ARGV[6], '*', 'type', kind,
  'sessionKey', ARGV[3], 'agentId', ARGV[4], 'displayKey', ARGV[5], 'revision', '', 'state', ARGV[2])
return 1
"""


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace(
        "+00:00", "Z"
    )


class CardStore:
    def __init__(self, redis: Redis, *, events_maxlen: int = keys.EVENTS_MAXLEN) -> None:
        self.redis = redis
        self.events_maxlen = events_maxlen
        self._write = redis.register_script(_WRITE)
        self._activity = redis.register_script(_ACTIVITY)
        self._run = redis.register_script(_RUN)

    # -- cards ---------------------------------------------------------------

    async def admit(self, owner: Owner) -> int:
        """The reset epoch now: pass it to `put` to refuse the write if a reset comes first."""
        return int(await self.redis.get(keys.epoch(owner)) or 0)

    async def put(
        self,
        owner: Owner,
        card: CardInput,
        *,
        expected_revision: int | None = None,
        admitted_epoch: int | None = None,
    ) -> WriteResult:
        body = "" if card.clears else json.dumps(card.to_json(), ensure_ascii=False)
        rev = await self._apply(owner, body, expected_revision, admitted_epoch, reset=False)
        if card.clears:
            return WriteResult(revision=rev, cleared=True)
        plan = card.plan or []
        steps = StepCounts(completed=sum(s.done for s in plan), total=len(plan)) if plan else None
        return WriteResult(revision=rev, steps=steps)

    async def clear(self, owner: Owner, *, expected_revision: int | None = None) -> WriteResult:
        return await self.put(owner, CardInput(), expected_revision=expected_revision)

    async def reset(self, owner: Owner) -> WriteResult:
        """Clear at a boundary: writes admitted before it are refused afterwards."""
        rev = await self._apply(owner, "", None, None, reset=True)
        return WriteResult(revision=rev, cleared=True)

    async def _apply(
        self,
        owner: Owner,
        body: str,
        expected_revision: int | None,
        admitted_epoch: int | None,
        *,
        reset: bool,
    ) -> int:
        status, value = await self._write(
            keys=[keys.card(owner), keys.revision(owner), keys.epoch(owner), keys.EVENTS, keys.OWNERS],
            args=[
                body,
                "" if expected_revision is None else int(expected_revision),
                "" if admitted_epoch is None else int(admitted_epoch),
                owner.session_key,
                owner.agent_id,
                owner.display_key,
                "progressCard.changed",
                "1" if reset else "0",
                self.events_maxlen,
            ],
        )
        if status == "revision":
            raise StoreError(
                "expectedRevision",
                f"is {expected_revision} but the card is at revision {value}",
                revision=int(value),
            )
        if status == "reset":
            raise StoreError("sessionKey", "the card was reset after this write was admitted")
        return int(value)

    async def get(self, owner: Owner) -> Card | None:
        raw = cast("dict[str, str]", await self.redis.hgetall(keys.card(owner)))
        return self._card(owner, raw) if raw else None

    async def revision(self, owner: Owner) -> int:
        return int(await self.redis.get(keys.revision(owner)) or 0)

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
        result = await self._run(
            keys=[keys.run(owner), keys.revision(owner), keys.activity(owner), keys.tools(owner), keys.EVENTS],
            args=[run_id, state.value, owner.session_key, owner.agent_id, owner.display_key, self.events_maxlen],
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

        await self._activity(
            keys=[keys.activity(owner), keys.tools(owner), keys.EVENTS, keys.OWNERS],
            args=[
                arg(headline, checked.headline),
                checked.tools[0] if checked.tools else "",
                arg(answer, checked.answer),
                MAX_TOOL_LINES,
                owner.session_key,
                owner.agent_id,
                owner.display_key,
                self.events_maxlen,
                "1" if replace else "0",
            ],
        )
        return await self.activity(owner)

    async def activity(self, owner: Owner) -> Activity:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(keys.activity(owner))
            pipe.lrange(keys.tools(owner), 0, -1)
            fields, tools = await pipe.execute()
        return Activity(
            headline=fields.get("headline"), tools=tuple(tools), answer=fields.get("answer"),
            attention=fields.get("attention"),
        )

    async def view(self, owner: Owner) -> View:
        """Card, activity and run state read in one transaction, so they agree."""
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hgetall(keys.card(owner))
            pipe.hgetall(keys.activity(owner))
            pipe.lrange(keys.tools(owner), 0, -1)
            pipe.hgetall(keys.run(owner))
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

    async def owners(self, limit: int = 200) -> list[tuple[str, int]]:
        """Display keys with their last change (ms), newest first."""
        rows = cast(
            "list[tuple[str, float]]", await self.redis.zrevrange(keys.OWNERS, 0, limit - 1, withscores=True)
        )
        return [(key, int(score)) for key, score in rows]

