"""Applying A2A updates to the store: one Lua script per update, check and write together.

A status update or task snapshot is applied only when its `status.timestamp` is newer
than the last one applied to its owner (microseconds; an equal one is a duplicate).
The check, the card, the run, the activity and the change events are written by one
script, so two followers racing (or a follower and a push) can never apply an older
plan last. The last timestamp survives resets and runs: an old update never comes back.

Without a timestamp an update applies in arrival order when it comes from a live
stream and is ignored from anywhere else (a snapshot, a push, a file). Artifact text
applies in stream order to the answer of the task whose run is current.
"""

from __future__ import annotations

import json
import logging
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

from redis.asyncio import Redis

from .. import keys, publish
from ..card import CardInput
from ..owners import Owner, resolve_owner
from ..retention import retention_ms
from ..sharding import layout_of
from .mapping import AnswerChunk, Kind, StatusChange, Update

log = logging.getLogger("progresscast.a2a")

MAX_ANSWER_BYTES = 65_536
"""What Redis keeps of the streamed answer (the activity shows its last 16,384 characters)."""

TS_WIDTH = 20
"""Timestamps are compared as zero-padded strings: exact at any size, in any Lua."""


class Source(StrEnum):
    stream = "stream"      # SendStreamingMessage / SubscribeToTask, in arrival order
    poll = "poll"          # GetTask / ListTasks
    push = "push"          # POST /v1/a2a/push
    file = "file"          # a2a ingest


class Outcome(StrEnum):
    applied = "applied"
    stale = "stale"            # older than what was applied, or for a task that is not current
    duplicate = "duplicate"    # the same timestamp as the last one applied
    untimed = "untimed"        # no timestamp, and not from a live stream


@dataclass(frozen=True)
class Applied:
    outcome: Outcome
    owner: Owner
    plan_problem: str | None = None


# Both scripts touch one owner's keys and publish their changes as the store's scripts
# do (publish.py: the shard's stream and index, the owner's `last`): one Cluster slot.

_STATUS = publish.script("""
local card_key, rev_key, run_key, activity_key = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local tools_key, order_key = KEYS[8], KEYS[9]
local ts = ARGV[5]            -- zero-padded µs, '' = untimed (the caller allows it)
local task_id = ARGV[6]
local plan = ARGV[7]          -- JSON array of steps, '' keeps the card's plan
local headline = ARGV[8]      -- '' keeps the headline
local attention = ARGV[9]     -- '' removes the attention line
local ended = ARGV[10]        -- '' or completed|failed|canceled

if ts ~= '' then
  local last = redis.call('HGET', order_key, 'ts')
  if last then
    if ts == last then return {'duplicate'} end
    if ts < last then return {'stale'} end
  end
  redis.call('HSET', order_key, 'ts', ts)
end
redis.call('HSET', order_key, 'task', task_id)

local _, ms = clock()
-- Every event of this script carries `state` ('' but for a run's).

-- Each task is its own run: a new task, or a task working again after it ended.
local run_id = redis.call('HGET', run_key, 'runId')
local run_state = redis.call('HGET', run_key, 'state')
if run_id ~= task_id or (run_state ~= 'active' and ended == '') then
  -- as CardStore.start_run: remember the run that ended before, with its answer
  local rev = redis.call('GET', rev_key) or '0'
  local prev_answer = redis.call('HGET', activity_key, 'answer') or ''
  redis.call('DEL', run_key, activity_key, tools_key)
  redis.call('HSET', run_key, 'runId', task_id, 'state', 'active', 'startedAt', ms, 'startRevision', rev)
  if run_id and run_state and run_state ~= 'active' then
    redis.call('HSET', run_key, 'prevRunId', run_id, 'prevState', run_state, 'prevAnswer', prev_answer)
  end
  redis.call('HDEL', order_key, 'artifact', 'artifactDone')
  publish('run.started', '', 'active')
  run_state = 'active'
end

if plan ~= '' then
  local markdown = nil
  local body = redis.call('HGET', card_key, 'body')
  if body then markdown = cjson.decode(body)['markdown'] end
  if markdown == cjson.null then markdown = nil end
  local rev = redis.call('INCR', rev_key)
  local shown = ''
  if plan == '[]' and not markdown then
    redis.call('DEL', card_key)
  else
    local md = 'null'
    if markdown then md = cjson.encode(markdown) end
    local steps = plan
    if plan == '[]' then steps = 'null' end
    redis.call('HSET', card_key, 'body', '{"plan":' .. steps .. ',"markdown":' .. md .. '}',
      'revision', rev, 'updatedAt', ms)
    shown = tostring(rev)
  end
  publish('progressCard.changed', shown, '')
end

if headline ~= '' then redis.call('HSET', activity_key, 'headline', headline) end
if attention ~= '' then
  redis.call('HSET', activity_key, 'attention', attention)
else
  redis.call('HDEL', activity_key, 'attention')
end
publish('activity.changed', '', '')

if ended ~= '' and run_state == 'active' then
  redis.call('HSET', run_key, 'state', ended, 'endedAt', ms, 'endRevision', redis.call('GET', rev_key) or '0')
  publish('run.ended', '', ended)
end
index_owner(ms)
return {'applied'}
""")

_ANSWER = publish.script("""
local run_key, activity_key, order_key = KEYS[4], KEYS[5], KEYS[6]
local task_id, artifact_id, text = ARGV[5], ARGV[6], ARGV[7]
local append, last_chunk, max_bytes = ARGV[8] == '1', ARGV[9] == '1', tonumber(ARGV[10])

-- The answer belongs to the task whose run is current; another task's text is stale.
if redis.call('HGET', run_key, 'runId') ~= task_id then return {'stale'} end
local current = redis.call('HGET', order_key, 'artifact')
local done = redis.call('HGET', order_key, 'artifactDone') == '1'
local answer = text
if append and current == artifact_id then
  if done then return {'stale'} end   -- nothing may follow the last chunk
  answer = (redis.call('HGET', activity_key, 'answer') or '') .. text
end
if #answer > max_bytes then
  -- keep the tail, starting on a UTF-8 character boundary
  local start = #answer - max_bytes + 1
  while start <= #answer do
    local b = string.byte(answer, start)
    if b < 128 or b >= 192 then break end
    start = start + 1
  end
  answer = string.sub(answer, start)
end
redis.call('HSET', order_key, 'artifact', artifact_id, 'artifactDone', last_chunk and '1' or '0')
if answer == '' then
  redis.call('HDEL', activity_key, 'answer')
else
  redis.call('HSET', activity_key, 'answer', answer)
end
local _, ms = clock()
index_owner(ms)
publish('activity.changed', '')
return {'applied'}
""")


class _Once:
    """Remembers recent task ids, so a repeated problem of one task is logged once."""

    def __init__(self, size: int = 1024) -> None:
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._size = size

    def first(self, what: str, task_id: str) -> bool:
        key = (what, task_id)
        if key in self._seen:
            return False
        self._seen[key] = None
        if len(self._seen) > self._size:
            self._seen.popitem(last=False)
        return True


class UpdateApplier:
    """Applies mapped A2A updates for one agent id (or each update's own owner)."""

    def __init__(
        self,
        redis: Redis,
        *,
        agent_id: str | None,
        known_agents: frozenset[str],
        default_agent: str,
        events_maxlen: int = keys.EVENTS_MAXLEN,
    ) -> None:
        self.redis = redis
        self.agent_id = agent_id
        self.known_agents = known_agents
        self.default_agent = default_agent
        self.events_maxlen = events_maxlen
        self._status = redis.register_script(_STATUS)
        self._answer = redis.register_script(_ANSWER)
        self._once = _Once()

    def owner_of(self, update: Update) -> Owner:
        """The card an update belongs to: its context (else its task) for our agent id."""
        return resolve_owner(
            update.session_key,
            self.agent_id,
            known_agents=self.known_agents,
            default_agent=self.default_agent,
        )

    async def apply(self, update: Update, source: Source) -> Applied:
        owner = self.owner_of(update)
        if isinstance(update, AnswerChunk):
            return Applied(await self._apply_answer(owner, update), owner)
        return await self._apply_status(owner, update, source)

    async def _apply_status(self, owner: Owner, change: StatusChange, source: Source) -> Applied:
        # `a2a ingest` names each line's problem itself: the log is for the other sources.
        if change.plan_problem and source is not Source.file and self._once.first("plan", change.task_id):
            log.warning("A2A task %s: plan not applied: %s", change.task_id, change.plan_problem)
        if change.demoted and self._once.first("demoted", change.task_id):
            log.info("A2A task %s: %d more active steps shown as pending", change.task_id, change.demoted)
        if change.timestamp_us is None and (source is not Source.stream or change.kind is Kind.snapshot):
            return Applied(Outcome.untimed, owner, change.plan_problem)
        plan = ""
        if change.plan is not None:
            checked = CardInput(plan=list(change.plan)) if change.plan else None
            steps = checked.to_json()["plan"] if checked else []
            plan = json.dumps(steps, ensure_ascii=False)
        ts = "" if change.timestamp_us is None else str(change.timestamp_us).zfill(TS_WIDTH)
        ended = change.run_end
        lay = await layout_of(self.redis)
        (outcome,) = await self._status(
            keys=[
                *publish.change_keys(lay, owner),
                lay.card(owner),
                lay.revision(owner),
                lay.run(owner),
                lay.activity(owner),
                lay.tools(owner),
                lay.a2a_order(owner),
                *publish.retained_keys(lay, owner),
            ],
            args=[
                *publish.change_args(owner, self.events_maxlen),
                ts,
                change.task_id,
                plan,
                change.headline or "",
                change.attention or "",
                ended.value if ended else "",
                publish.retention_arg(await retention_ms(self.redis)),
            ],
        )
        return Applied(Outcome(outcome), owner, change.plan_problem)

    async def _apply_answer(self, owner: Owner, chunk: AnswerChunk) -> Outcome:
        lay = await layout_of(self.redis)
        (outcome,) = await self._answer(
            keys=[
                *publish.change_keys(lay, owner), lay.run(owner), lay.activity(owner), lay.a2a_order(owner),
                *publish.retained_keys(lay, owner),
            ],
            args=[
                *publish.change_args(owner, self.events_maxlen),
                chunk.task_id,
                chunk.artifact_id,
                chunk.text,
                "1" if chunk.append else "0",
                "1" if chunk.last_chunk else "0",
                MAX_ANSWER_BYTES,
                publish.retention_arg(await retention_ms(self.redis)),
            ],
        )
        return Outcome(outcome)
