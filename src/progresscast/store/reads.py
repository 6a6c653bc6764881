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

# KEYS[i] is read by ARGV[i]: 'get', 'hgetall', 'lrange' (the whole list), 'exists', or
# 'sismember:<member>'. Replies in the same order; a hash as a flat list.
READ_MANY = """
local out = {}
for i, key in ipairs(KEYS) do
  local read = ARGV[i]
  if read == 'get' then out[i] = redis.call('GET', key)
  elseif read == 'hgetall' then out[i] = redis.call('HGETALL', key)
  elseif read == 'lrange' then out[i] = redis.call('LRANGE', key, 0, -1)
  elseif read == 'exists' then out[i] = redis.call('EXISTS', key)
  elseif string.sub(read, 1, 10) == 'sismember:' then out[i] = redis.call('SISMEMBER', key, string.sub(read, 11))
  else return redis.error_reply('unknown read ' .. read) end
end
return out
"""

_SISMEMBER = "sismember:"


def _reply(read: str, raw: Any) -> Any:
    """A reply as redis-py gives the same command's."""
    if read == "hgetall":
        return dict(zip(raw[::2], raw[1::2], strict=True))
    if read == "lrange":
        return list(raw)
    return raw  # GET: the value or None; EXISTS, SISMEMBER: an integer


class Reads:
    """Reads queued with a pipeline's method names, made by one `READ_MANY` call (`run`)."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self.how: list[str] = []

    def get(self, key: str) -> None:
        self.keys.append(key)
        self.how.append("get")

    def hgetall(self, key: str) -> None:
        self.keys.append(key)
        self.how.append("hgetall")

    def lrange(self, key: str, start: int, end: int) -> None:
        if (start, end) != (0, -1):
            raise ValueError("Reads.lrange reads a whole list: start 0, end -1")
        self.keys.append(key)
        self.how.append("lrange")

    def exists(self, key: str) -> None:
        self.keys.append(key)
        self.how.append("exists")

    def sismember(self, key: str, member: str) -> None:
        self.keys.append(key)
        self.how.append(_SISMEMBER + member)

    async def run(self, script: Any) -> list[Any]:
        """The replies, in the order queued (`script`: `READ_MANY` registered on a client)."""
        raw = await script(keys=self.keys, args=self.how)
        return [_reply(read, reply) for read, reply in zip(self.how, raw, strict=True)]


__all__ = ["READ_MANY", "Reads"]
