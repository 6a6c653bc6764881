"""Reads of several keys in one script call: queued as on a pipeline (`get`, `hgetall` …),
made atomically as a transaction would, but as one command on the wire.

A draft's read — its state, its follow, its destination's overrides and the view it
shows, eleven keys — cost redis-py about twice as much CPU as a transaction of eleven
commands (each queued, each acknowledged, each reply read under its own timeout) as one
script returning all of them, and a single command can share a pipeline with other
lanes' (`CoalescingRedis`). All keys must lie in one slot on a Cluster.
"""

from __future__ import annotations

from typing import Any

# KEYS[i] is read as the i-th letter of ARGV[1] says: 'g' GET, 'h' HGETALL, 'l' LRANGE
# (the whole list), 'e' EXISTS, 's' SISMEMBER of the next member in ARGV[2], ARGV[3] ….
# Replies in the same order; a hash as a flat list. (One argument for all the letters:
# redis-py encodes every argument in Python.)
READ_MANY = """
local reads = ARGV[1]
local member = 1
local out = {}
for i, key in ipairs(KEYS) do
  local read = string.sub(reads, i, i)
  if read == 'g' then out[i] = redis.call('GET', key)
  elseif read == 'h' then out[i] = redis.call('HGETALL', key)
  elseif read == 'l' then out[i] = redis.call('LRANGE', key, 0, -1)
  elseif read == 'e' then out[i] = redis.call('EXISTS', key)
  elseif read == 's' then member = member + 1; out[i] = redis.call('SISMEMBER', key, ARGV[member])
  else return redis.error_reply('unknown read ' .. read) end
end
return out
"""


def _reply(read: str, raw: Any) -> Any:
    """A reply as redis-py gives the same command's."""
    if read == "h":
        return dict(zip(raw[::2], raw[1::2], strict=True))
    if read == "l":
        return list(raw)
    return raw  # GET: the value or None; EXISTS, SISMEMBER: an integer


class Reads:
    """Reads queued with a pipeline's method names, made by one `READ_MANY` call (`run`)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.reads: list[str] = []
        self.members: list[str] = []

    def get(self, key: str) -> None:
        self.keys.append(key)
        self.reads.append("g")

    def hgetall(self, key: str) -> None:
        self.keys.append(key)
        self.reads.append("h")

    def lrange(self, key: str, start: int, end: int) -> None:
        if (start, end) != (0, -1):
            raise ValueError("Reads.lrange reads a whole list: start 0, end -1")
        self.keys.append(key)
        self.reads.append("l")

    def exists(self, key: str) -> None:
        self.keys.append(key)
        self.reads.append("e")

    def sismember(self, key: str, member: str) -> None:
        self.keys.append(key)
        self.reads.append("s")
        self.members.append(member)

    async def run(self, script: Any) -> list[Any]:
        """The replies, in the order queued (`script`: `READ_MANY` registered on a client)."""
        raw = await script(keys=self.keys, args=["".join(self.reads), *self.members])
        return [_reply(read, reply) for read, reply in zip(self.reads, raw, strict=True)]


__all__ = ["READ_MANY", "Reads"]
