"""The store's write scripts: the Lua every write shares, written once, and the scripts.

Every input writes through these scripts (store/cards.py calls them): each one is a check
and a write done together, so nothing can come between what was checked and what was
written. The shared part (`PRELUDE`) holds the rules every write follows:

- the Redis server's clock (`clock`): stored times, the reset boundary, A2A clock skew;
- admission: a write that arrived before the owner's last reset is refused
  (`reset_since`); a write that expects a revision finds it or is refused (in `CARD`);
- the card written one way (`write_card`): the revision bumped, the card stored or
  removed, what changed appended to the owner's capped history, the change published;
- runs started and ended one way (`start_run`, `end_run`);
- a change published one way (`publish`, `index_owner`): the event in the owner's
  shard stream, the same event as the owner's newest (`last`), the owner's place in its
  shard's index.

Every script takes the same keys (`owner_keys`, all carrying the owner's shard tag, so a
script is one EVALSHA in one Redis Cluster slot) and the same first arguments
(`common_args`); a script's own arguments follow from ARGV[6] on, and its last argument
is the store's retention in ms (`retention_arg`, store/retention.py): publishing a
change gives every key of the owner that time to live (`retain`; 0: for ever), so an
owner untouched that long is gone with all it has.

The card is kept as hash fields, `plan` (the steps as JSON text, made in Python) and
`markdown`, so a write that keeps the note sets the plan alone; nothing here builds a
card. Beside the plan, `times` holds when each step last became active and was done
(`[[sinceMs, doneMs], …]`, one pair per step, 0 for not known), kept by the same write
that changes a status: a reader learns a step's time with the card, not from the
history. A card written by an earlier version kept both in one JSON `body`: it is read,
and the next write replaces it.
"""

from __future__ import annotations

import functools

from ..model.asks import GONE_KEEP_MS, MAX_GONE
from ..model.owners import Owner
from .keys import Layout

HISTORY_MAX = 200
"""History entries kept per owner (the newest)."""

PRELUDE = """
local events_key, owners_key, last_key = KEYS[1], KEYS[2], KEYS[3]
local card_key, rev_key, reset_at_key, history_key = KEYS[4], KEYS[5], KEYS[6], KEYS[7]
local run_key, activity_key, tools_key, order_key = KEYS[8], KEYS[9], KEYS[10], KEYS[11]
local asks_key = KEYS[12]
local session_key, agent_id, display_key, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local history_max = tonumber(ARGV[5])

-- The Redis server's clock: µs, and ms (what stored times and the index are in).
local function clock()
  local t = redis.call('TIME')
  local s, us = tonumber(t[1]), tonumber(t[2])
  return s * 1000000 + us, s * 1000 + math.floor(us / 1000)
end

-- The owner's entry in its shard's index (listings, newest first) takes the change's time.
local function index_owner(ms)
  redis.call('ZADD', owners_key, ms, display_key)
end

-- Every key of the owner (KEYS[3] on) lives the retention (the last argument, ms) past
-- this write; 0 keeps them for ever.
local function retain()
  local ms = tonumber(ARGV[#ARGV])
  for i = 3, #KEYS do
    if ms > 0 then redis.call('PEXPIRE', KEYS[i], ms) else redis.call('PERSIST', KEYS[i]) end
  end
end

-- Append the event to the shard's stream and record it as the owner's newest. A run's
-- `state` is a field only when given. The owner's keys, all written by now, are retained.
local function publish(kind, revision, state)
  local tail = {'revision', revision}
  if state then tail = {'revision', revision, 'state', state} end
  local id = redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*', 'type', kind,
    'sessionKey', session_key, 'agentId', agent_id, 'displayKey', display_key, unpack(tail))
  redis.call('DEL', last_key)
  redis.call('HSET', last_key, 'id', id, 'type', kind, unpack(tail))
  retain()
  return id
end

-- Admission by arrival: a write that arrived `ago` µs before `now_us` is refused when the
-- owner was reset since. (A reset "in the future" means this server's clock stepped back:
-- it is not counted.)
local function reset_since(ago, now_us)
  local reset_at = tonumber(redis.call('GET', reset_at_key) or '0')
  return reset_at > now_us - ago and reset_at <= now_us
end

-- The stored card: its steps (decoded, or nil), its note (or nil) and its steps' times
-- (decoded, or nil).
local function stored_card()
  local f = redis.call('HMGET', card_key, 'plan', 'markdown', 'body', 'times')
  if f[3] then
    local old = cjson.decode(f[3])
    local steps, note = old['plan'], old['markdown']
    if type(steps) ~= 'table' then steps = nil end
    if type(note) ~= 'string' then note = nil end
    return steps, note, nil
  end
  local steps, times = nil, nil
  if f[1] then steps = cjson.decode(f[1]) end
  if f[4] then times = cjson.decode(f[4]) end
  return steps, f[2] or nil, times
end

-- What changed from one plan to the next, step by step: a step is matched by its text
-- (the n-th step of a text with the n-th of the same text); `from` is nil for a step
-- added, `to` nil for a step removed. (Counted per text in tables, not keyed by joined
-- strings: this runs on every write.) Also each new step's times, `{sinceMs, doneMs}`
-- (0: not known), carried from its match in `old` (`old_times`, in `old`'s order): a
-- step that becomes active starts now; one done straight after being active ends now.
local function step_changes(old, new, old_times, ms)
  local before = {}   -- text -> the indexes of its steps in `old`, in order
  for i, s in ipairs(old or {}) do
    local at = before[s.step]
    if at then at[#at + 1] = i else before[s.step] = {i} end
  end
  local out, seen, times = {}, {}, {}
  for k, s in ipairs(new or {}) do
    local n = (seen[s.step] or 0) + 1
    seen[s.step] = n
    local at = before[s.step]
    local i = at and at[n]
    local was = i and old[i].status
    if was ~= s.status then out[#out + 1] = {s.step, was, s.status} end
    local t = i and old_times and old_times[i]
    local since, done = 0, 0
    if type(t) == 'table' then since, done = tonumber(t[1]) or 0, tonumber(t[2]) or 0 end
    if s.status == 'in_progress' then
      if was ~= 'in_progress' or since == 0 then since = ms end
      done = 0
    elseif s.status == 'completed' then
      if was == 'in_progress' and since > 0 then done = ms
      elseif was ~= 'completed' then since, done = 0, 0 end
    else
      since, done = 0, 0
    end
    times[k] = '[' .. string.format('%d', since) .. ',' .. string.format('%d', done) .. ']'
  end
  local again = {}
  for _, s in ipairs(old or {}) do
    local n = (again[s.step] or 0) + 1
    again[s.step] = n
    if n > (seen[s.step] or 0) then out[#out + 1] = {s.step, s.status, nil} end
  end
  return out, '[' .. table.concat(times, ',') .. ']'
end

local function json_or_null(v)
  if v == nil then return 'null' end
  return cjson.encode(v)
end

-- One history entry (JSON; `at` in ms on the server's clock).
local function history_entry(rev, ms, changes, note, cleared, reset)
  local parts = {}
  for i, c in ipairs(changes) do
    parts[i] = '{"step":' .. cjson.encode(c[1]) .. ',"from":' .. json_or_null(c[2])
      .. ',"to":' .. json_or_null(c[3]) .. '}'
  end
  return '{"revision":' .. string.format('%d', rev) .. ',"at":' .. string.format('%d', ms)
    .. ',"changes":[' .. table.concat(parts, ',') .. '],"note":"' .. note
    .. '","cleared":' .. tostring(cleared) .. ',"reset":' .. tostring(reset) .. '}'
end

-- Write the card: `plan` is the steps' JSON text ('' for none); `markdown` the note ('' for
-- none, nil keeps the stored one). The revision is bumped, the card stored (or removed
-- when nothing is left), what changed pushed onto the history (newest first, capped),
-- and the change published. Returns the revision and whether the card is now empty.
local function write_card(plan, markdown, is_reset, now_us, ms)
  local old_steps, old_note, old_times = stored_card()
  if markdown == nil then markdown = old_note or '' end
  local rev = redis.call('INCR', rev_key)
  if is_reset then redis.call('SET', reset_at_key, string.format('%d', now_us)) end
  redis.call('DEL', card_key)
  local cleared = plan == '' and markdown == ''
  local changes = {}
  if not cleared then
    local fields = {'revision', rev, 'updatedAt', ms}
    if plan ~= '' then
      local times
      changes, times = step_changes(old_steps, cjson.decode(plan), old_times, ms)
      fields[#fields + 1] = 'plan'; fields[#fields + 1] = plan
      fields[#fields + 1] = 'times'; fields[#fields + 1] = times
    else
      changes = step_changes(old_steps, nil, nil, ms)
    end
    if markdown ~= '' then fields[#fields + 1] = 'markdown'; fields[#fields + 1] = markdown end
    redis.call('HSET', card_key, unpack(fields))
  end
  local note = 'changed'
  if markdown == (old_note or '') then note = 'same' elseif markdown == '' then note = 'removed' end
  redis.call('LPUSH', history_key, history_entry(rev, ms, changes, note, cleared, is_reset))
  redis.call('LTRIM', history_key, 0, history_max - 1)
  index_owner(ms)
  local shown = ''
  if not cleared then shown = tostring(rev) end
  publish('progressCard.changed', shown)
  return rev, cleared
end

-- Start run `run_id`: the run before it, if it ended, is remembered with its final answer
-- (a channel that did not look in between still ends it); its activity is dropped.
local function start_run(run_id, ms)
  local rev = redis.call('GET', rev_key) or '0'
  local prev = redis.call('HMGET', run_key, 'runId', 'state')
  local prev_answer = redis.call('HGET', activity_key, 'answer') or ''
  redis.call('DEL', run_key, activity_key, tools_key)
  redis.call('HSET', run_key, 'runId', run_id, 'state', 'active', 'startedAt', ms, 'startRevision', rev)
  if prev[1] and prev[2] and prev[2] ~= 'active' then
    redis.call('HSET', run_key, 'prevRunId', prev[1], 'prevState', prev[2], 'prevAnswer', prev_answer)
  end
  publish('run.started', '', 'active')
end

-- End the current run as `state`; `usage` is what it used (JSON text, '' for not known).
local function end_run(state, ms, usage)
  redis.call('HSET', run_key, 'state', state, 'endedAt', ms, 'endRevision', redis.call('GET', rev_key) or '0')
  if usage and usage ~= '' then redis.call('HSET', run_key, 'usage', usage) end
  publish('run.ended', '', state)
end
"""

CARD = PRELUDE + """
-- put, clear, reset, and a plan that keeps the note (update_plan, the hooks)
local ago, expected, is_reset = tonumber(ARGV[6]), ARGV[7], ARGV[8] == '1'
local plan, markdown, keep_note = ARGV[9], ARGV[10], ARGV[11] == '1'

local now_us, ms = clock()
if reset_since(ago, now_us) then return {'reset', 0, 0} end
local rev = tonumber(redis.call('GET', rev_key) or '0')
if expected ~= '' and tonumber(expected) ~= rev then return {'revision', rev, 0} end
if keep_note then markdown = nil end
-- Clearing a card never written changes nothing, so nothing is written: no owner, no
-- index entry, no event (a mistyped session must not appear in listings).
if not is_reset and plan == '' and (markdown or '') == '' and rev == 0 then return {'ok', 0, 1} end
local cleared
rev, cleared = write_card(plan, markdown, is_reset, now_us, ms)
-- A Stop pressed on the active run rides on every later receipt: the writer learns it.
local run = redis.call('HMGET', run_key, 'state', 'stop')
local stop = ''
if run[1] == 'active' and run[2] then stop = run[2] end
return {'ok', rev, cleared and 1 or 0, stop}
"""

ACTIVITY = PRELUDE + """
-- headline / answer: '' keeps, '\\0' clears; a tool line with `replaces` takes the
-- place of the newest line equal to it (appended when that one is gone)
local headline, tool, answer, max_tools, replace = ARGV[6], ARGV[7], ARGV[8], tonumber(ARGV[9]), ARGV[10]
local replaces = ARGV[11] or ''

if replace == '1' then redis.call('DEL', activity_key, tools_key) end
for field, v in pairs({headline = headline, answer = answer}) do
  if v == '\\0' then redis.call('HDEL', activity_key, field)
  elseif v ~= '' then redis.call('HSET', activity_key, field, v) end
end
local at = false
if tool ~= '' and replaces ~= '' then at = redis.call('LPOS', tools_key, replaces, 'RANK', -1) end
if at then
  redis.call('LSET', tools_key, at, tool)
elseif tool ~= '' then
  redis.call('RPUSH', tools_key, tool)
  redis.call('LTRIM', tools_key, -max_tools, -1)
end
local _, ms = clock()
index_owner(ms)
publish('activity.changed', '')
return 1
"""

RUN = PRELUDE + """
-- state 'active' starts a run; anything else ends run_id if it is the current one
-- (with what it used: `usage`, JSON text or '')
local run_id, state, stoppable, usage = ARGV[6], ARGV[7], ARGV[8], ARGV[9]

local _, ms = clock()
if state == 'active' then
  start_run(run_id, ms)
  -- the agent's side acts on a Stop pressed in chat (a hook, a wrapper, a follower)
  if stoppable == '1' then redis.call('HSET', run_key, 'stoppable', '1') end
else
  if redis.call('HGET', run_key, 'runId') ~= run_id then return 0 end
  end_run(state, ms, usage)
end
-- (No index_owner: starting or ending a run leaves the owner's place in listings.)
return 1
"""

A2A_STATUS = PRELUDE + """
-- An A2A status update or task snapshot. The order is kept twice: the plan by the
-- timestamps of the updates that carried a valid plan (`planTs`), the status (state,
-- message, attention, run) by every update's (`ts`). Timestamps are zero-padded µs,
-- compared as strings; '' = untimed (the caller allows it).
local ago, ts, latest, task_id = tonumber(ARGV[6]), ARGV[7], ARGV[8], ARGV[9]
local has_plan, plan = ARGV[10] == '1', ARGV[11]
local headline, attention, ended, stoppable = ARGV[12], ARGV[13], ARGV[14], ARGV[15]

local now_us, ms = clock()
-- `latest`: the newest timestamp allowed, the server's clock plus the allowed skew
if ts ~= '' and ts > string.format('%020d', now_us + tonumber(latest)) then return {'future'} end
if reset_since(ago, now_us) then return {'reset'} end

local order = redis.call('HMGET', order_key, 'ts', 'planTs')
local last_status, last_plan = order[1], order[2]
-- A store ordered by an earlier version kept one timestamp for both.
if not last_plan then last_plan = last_status end
local do_plan, do_status, repeated = has_plan, true, false
if ts ~= '' then
  if do_plan and last_plan and ts <= last_plan then do_plan = false; repeated = repeated or ts == last_plan end
  if last_status and ts <= last_status then do_status = false; repeated = repeated or ts == last_status end
end
if not do_plan and not do_status then
  if repeated then return {'duplicate'} end
  return {'stale'}
end

local run_state = nil
if do_status then
  if ts ~= '' then redis.call('HSET', order_key, 'ts', ts) end
  redis.call('HSETNX', order_key, 'planTs', '')
  -- Each task is its own run: a new task, or a task working again after it ended.
  local run = redis.call('HMGET', run_key, 'runId', 'state')
  run_state = run[2]
  if run[1] ~= task_id or (run_state ~= 'active' and ended == '') then
    start_run(task_id, ms)
    -- the follower cancels the task when Stop is pressed in chat
    if stoppable == '1' then redis.call('HSET', run_key, 'stoppable', '1') end
    redis.call('HDEL', order_key, 'artifact', 'artifactDone')
    run_state = 'active'
  end
end
if do_plan then
  if ts ~= '' then redis.call('HSET', order_key, 'planTs', ts) end
  write_card(plan, nil, false, now_us, ms)
end
if do_status then
  -- the status is the update's whole status: without a message it has no headline
  for field, v in pairs({headline = headline, attention = attention}) do
    if v ~= '' then redis.call('HSET', activity_key, field, v) else redis.call('HDEL', activity_key, field) end
  end
  publish('activity.changed', '')
  if ended ~= '' and run_state == 'active' then end_run(ended, ms) end
end
index_owner(ms)
return {'applied'}
"""

A2A_ANSWER = PRELUDE + """
-- A2A artifact text: the streamed answer of the task whose run is current.
local task_id, artifact_id, text = ARGV[6], ARGV[7], ARGV[8]
local append, last_chunk, max_bytes = ARGV[9] == '1', ARGV[10] == '1', tonumber(ARGV[11])

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
"""


ASK_PRELUDE = PRELUDE + f"local gone_keep_ms, max_gone = {GONE_KEEP_MS}, {MAX_GONE}\n" + """
-- Asks (model/asks.py): one JSON object per ask in the owner's `asks` hash. Their
-- changes are lines in the history (an entry with `event`, at the card's revision),
-- and published as `ask.changed`, so every chat that follows the owner looks again.
local function history_event(ms, event)
  local rev = tonumber(redis.call('GET', rev_key) or '0')
  redis.call('LPUSH', history_key, '{"revision":' .. string.format('%d', rev) .. ',"at":' .. string.format('%d', ms)
    .. ',"changes":[],"note":"same","cleared":false,"reset":false,"event":' .. cjson.encode(event) .. '}')
  redis.call('LTRIM', history_key, 0, history_max - 1)
end

-- Open asks past their expiry (the Redis clock) become `expired`; asks that ended more
-- than `keep_ms` ago are forgotten, and withdraws that found no ask `gone_keep_ms` after
-- they came. Returns how many expired now.
local function settle_asks(ms, keep_ms)
  local n = 0
  local all = redis.call('HGETALL', asks_key)
  for i = 1, #all, 2 do
    local ask = cjson.decode(all[i + 1])
    if ask.gone then
      if tonumber(ask.closedAt) + gone_keep_ms < ms then redis.call('HDEL', asks_key, all[i]) end
    elseif ask.state == 'open' and tonumber(ask.expiresAt) <= ms then
      ask.state = 'expired'
      ask.closedAt = ms
      redis.call('HSET', asks_key, all[i], cjson.encode(ask))
      history_event(ms, {kind = 'expired', askId = ask.askId, prompt = ask.prompt})
      n = n + 1
    elseif ask.state ~= 'open' and tonumber(ask.closedAt or 0) + keep_ms < ms then
      redis.call('HDEL', asks_key, all[i])
    end
  end
  return n
end

-- A withdraw that found no ask: the ask's open may still be on its way (sent on another
-- connection, or stopped after it was sent). Remembered beside the asks (`gone:<id>`,
-- the newest `max_gone`), so that open offers nothing when it lands. It changes nothing
-- anyone sees: no event, and the owner's keys keep their time to live — a key it makes
-- lives `gone_keep_ms` (an owner that has none: a withdraw names any session).
local function gone_field(ask_id) return 'gone:' .. ask_id end
local function remember_gone(ask_id, seq, ms)
  local made = redis.call('EXISTS', asks_key) == 0
  local all = redis.call('HGETALL', asks_key)
  local gone = {}
  for i = 1, #all, 2 do
    local entry = cjson.decode(all[i + 1])
    if entry.gone and all[i] ~= gone_field(ask_id) then gone[#gone + 1] = {all[i], tonumber(entry.seq)} end
  end
  table.sort(gone, function(a, b) return a[2] < b[2] end)
  for i = 1, #gone - max_gone + 1 do redis.call('HDEL', asks_key, gone[i][1]) end
  redis.call('HSET', asks_key, gone_field(ask_id), cjson.encode({gone = true, closedAt = ms, seq = seq}))
  if made then redis.call('PEXPIRE', asks_key, gone_keep_ms) end
end
"""

ASK_OPEN = ASK_PRELUDE + """
-- A new ask: refused when the owner has `max_open` open already.
local ask_json, timeout_ms, max_open, keep_ms = ARGV[6], tonumber(ARGV[7]), tonumber(ARGV[8]), tonumber(ARGV[9])

local now_us, ms = clock()
settle_asks(ms, keep_ms)
local ask = cjson.decode(ask_json)
if redis.call('HEXISTS', asks_key, gone_field(ask.askId)) == 1 then return {'withdrawn', ''} end
if redis.call('HEXISTS', asks_key, ask.askId) == 1 then return {'taken', ''} end
local open = 0
for _, raw in ipairs(redis.call('HVALS', asks_key)) do
  if cjson.decode(raw).state == 'open' then open = open + 1 end
end
if open >= max_open then return {'full', open} end
ask.createdAt = ms
ask.seq = now_us  -- asks opened within one ms keep their order (one script at a time)
ask.expiresAt = ms + timeout_ms
ask.state = 'open'
local run = redis.call('HMGET', run_key, 'runId', 'state')
if run[1] and run[2] == 'active' then ask.runId = run[1] end
local stored = cjson.encode(ask)
redis.call('HSET', asks_key, ask.askId, stored)
history_event(ms, {kind = 'ask', askId = ask.askId, prompt = ask.prompt, source = ask.source})
index_owner(ms)
publish('ask.changed', '')
return {'ok', stored}
"""

ASK_CLOSE = ASK_PRELUDE + """
-- The first answer wins: an ask still open is answered (or withdrawn) once; an ask that
-- ended is returned as it is, so the late comer is told who answered it.
local ask_id, state, answer_json, keep_ms = ARGV[6], ARGV[7], ARGV[8], tonumber(ARGV[9])

local now_us, ms = clock()
local expired = settle_asks(ms, keep_ms)
local raw = redis.call('HGET', asks_key, ask_id)
if not raw then
  if state == 'withdrawn' then remember_gone(ask_id, now_us, ms) end
  if expired > 0 then publish('ask.changed', '') end
  return {'missing', ''}
end
local ask = cjson.decode(raw)
if ask.state ~= 'open' then
  if expired > 0 then publish('ask.changed', '') end
  return {'closed', raw}
end
ask.state = state
ask.closedAt = ms
local event = {kind = state, askId = ask.askId, prompt = ask.prompt}
if state == 'answered' then
  local answer = cjson.decode(answer_json)
  answer.at = ms
  ask.answer = answer
  event.kind = 'answer'
  event.by = answer.by
  event.options = answer.options
  event.text = answer.text
end
local stored = cjson.encode(ask)
redis.call('HSET', asks_key, ask_id, stored)
history_event(ms, event)
publish('ask.changed', '')
return {'ok', stored}
"""

ASK_SETTLE = ASK_PRELUDE + """
-- Open asks past their expiry become `expired` (a chat's timer, a waiting agent).
local keep_ms = tonumber(ARGV[6])
local _, ms = clock()
local expired = settle_asks(ms, keep_ms)
if expired > 0 then publish('ask.changed', '') end
return expired
"""

RUN_STOP = ASK_PRELUDE + """
-- Stop pressed on the owner's active run: recorded once (`stop` on the run), a line
-- in the history; the agent's side sees it and acts.
local by_json = ARGV[6]
local _, ms = clock()
-- '' only tells every chat to look again (Stop armed or disarmed: the button's words)
if by_json == '' then publish('run.stop', ''); return {'shown', ''} end
local run = redis.call('HMGET', run_key, 'runId', 'state', 'stop')
if not run[1] or run[2] ~= 'active' then return {'norun', ''} end
if run[3] then return {'already', run[3]} end
local stop = '{"by":' .. by_json .. ',"at":' .. string.format('%d', ms) .. '}'
redis.call('HSET', run_key, 'stop', stop)
history_event(ms, {kind = 'stop', runId = run[1], by = cjson.decode(by_json)})
publish('run.stop', '')
return {'ok', stop}
"""


@functools.lru_cache(maxsize=4096)
def owner_keys(lay: Layout, owner: Owner) -> tuple[str, ...]:
    """KEYS of every write script: the shard's stream and index, then the owner's keys.
    (Cached: eleven names and hashes per write cost more than the rest of the call.)"""
    return (
        lay.events_of(owner),
        lay.owners_of(owner),
        lay.last_event(owner),
        lay.card(owner),
        lay.revision(owner),
        lay.reset_at(owner),
        lay.history(owner),
        lay.run(owner),
        lay.activity(owner),
        lay.tools(owner),
        lay.a2a_order(owner),
        lay.asks(owner),
    )


def common_args(owner: Owner, maxlen: int) -> list[str | int]:
    """ARGV[1..5] of every write script: who the change is about, the stream's `MAXLEN ~`,
    and how many history entries are kept."""
    return [owner.session_key, owner.agent_id, owner.display_key, maxlen, HISTORY_MAX]


def retention_arg(ms: int) -> int:
    """The last argument of every write script: the store's retention in ms (0: for ever)."""
    return max(0, int(ms))
