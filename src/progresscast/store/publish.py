"""Publishing a change: the Lua every write script shares, written once.

A script that changes an owner (its card, activity or run) makes the change known the
same way: the event is appended to the owner's shard stream, the owner's `last` hash is
replaced by it — so a reconnecting viewer learns what it missed with one read, however
long the stream is — and, for what a listing orders by, the owner's entry in its shard's
index takes the change's time. The scripts (cards.py, agents/a2a/apply.py) are this prelude
followed by their own body (`script`): the prelude takes KEYS[1..3] (`change_keys`) and
ARGV[1..4] (`change_args`), a body reads its own inputs from KEYS[4] and ARGV[5] on.
Every key carries the owner's shard tag (keys.py), so a script stays one EVALSHA in one
Redis Cluster slot.
"""

from __future__ import annotations

from ..model.owners import Owner
from .keys import Layout

PRELUDE = """
local events_key, owners_key, last_key = KEYS[1], KEYS[2], KEYS[3]
local session_key, agent_id, display_key, maxlen = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

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

-- Append the event to the shard's stream and record it as the owner's newest. A run's
-- `state` is a field only when given (nil leaves it out).
local function publish(kind, revision, state)
  local tail = {'revision', revision}
  if state then tail = {'revision', revision, 'state', state} end
  local id = redis.call('XADD', events_key, 'MAXLEN', '~', maxlen, '*', 'type', kind,
    'sessionKey', session_key, 'agentId', agent_id, 'displayKey', display_key, unpack(tail))
  redis.call('DEL', last_key)
  redis.call('HSET', last_key, 'id', id, 'type', kind, unpack(tail))
  return id
end
"""


def script(body: str) -> str:
    """A write script: the prelude, then `body` (its inputs from KEYS[4] and ARGV[5] on)."""
    return PRELUDE + body


def change_keys(lay: Layout, owner: Owner) -> list[str]:
    """KEYS[1..3] of a write script: the shard's stream and index, the owner's `last`."""
    return [lay.events_of(owner), lay.owners_of(owner), lay.last_event(owner)]


def change_args(owner: Owner, maxlen: int) -> list[str | int]:
    """ARGV[1..4] of a write script: who the event is about, and the stream's `MAXLEN ~`."""
    return [owner.session_key, owner.agent_id, owner.display_key, maxlen]
