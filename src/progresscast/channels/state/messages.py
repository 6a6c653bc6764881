"""Message ids in a chat channel's destinations: the newest one seen (a first send's
mark), the ones we sent (never a probe's target), and the newest one someone else posted
in a thread (a draft above it moves down). Facts the server told, true whoever holds the
lease: written unchecked, so a call that went out just before a pause is still remembered."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from ...store import keys
from ...store.retention import retention_ms
from .ids import Id
from .scope import Scope

HEARD_TTL = 7 * 86_400
"""Seconds a destination's newest message of someone else is remembered without a new one."""

KEEP_SENT_IDS = 200
"""Recent sent message ids remembered per destination (probes look only a few ids ahead)."""

# Set a key to a number only when it is larger (message ids, and Slack's decimal `ts`,
# only grow), and keep it the store's retention from now (`ttl` ms; 0: for ever): the
# key's renewal goes with the write, not as a command of its own.
_MAX = """
local last_message_key = KEYS[1]
local message_id, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local cur = tonumber(redis.call('GET', last_message_key) or '0')
local newer = message_id > cur
if newer then redis.call('SET', last_message_key, ARGV[1], 'KEEPTTL') end
if ttl > 0 then redis.call('PEXPIRE', last_message_key, ttl) end
return newer and 1 or 0
"""

# A message we sent: remembered among the newest `keep`, all kept `ttl` ms from now.
_SENT = """
local sent_key = KEYS[1]
local message_id, keep, ttl = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
redis.call('ZADD', sent_key, message_id, message_id)
redis.call('ZREMRANGEBYRANK', sent_key, 0, -(keep + 1))
if ttl > 0 then redis.call('PEXPIRE', sent_key, ttl) end
return 1
"""

# The newest message someone else posted in a destination's thread: kept when newer,
# and for `ttl` milliseconds after the last one.
_HEARD = """
local heard_key = KEYS[1]
local message_id, ttl = tonumber(ARGV[1]), tonumber(ARGV[2])
local cur = tonumber(redis.call('GET', heard_key) or '0')
if message_id > cur then redis.call('SET', heard_key, ARGV[1], 'PX', ttl) return 1 end
redis.call('PEXPIRE', heard_key, ttl)
return 0
"""


class MessageIds:
    def __init__(self, scope: Scope, *, ordered_ids: bool = True) -> None:
        self.scope = scope
        self.redis = scope.redis
        self.channel = scope.channel
        self.ordered_ids = ordered_ids
        """The channel's message ids grow with time. Where they do not (Matrix), what
        `heard` notes of a message is when it was posted, in ms (`conduct.under`)."""
        self._max = self.redis.register_script(_MAX)
        self._sent = self.redis.register_script(_SENT)
        self._heard = self.redis.register_script(_HEARD)

    async def saw(self, chat_id: Id, message_id: int) -> None:
        """A message exists in the destination: the newest id seen there, if newer."""
        name = keys.channel_last_message(self.channel, chat_id)
        await self._max(keys=[name], args=[int(message_id), await retention_ms(self.redis)])
        self.scope.kept(name)

    async def last(self, chat_id: Id) -> int:
        """The newest message id seen in the destination (0: none)."""
        return int(cast("str | None", await self.redis.get(keys.channel_last_message(self.channel, chat_id))) or 0)

    def queue_last(self, chat_id: Id, pipe: Any) -> None:
        """`last`, queued on a pipeline (its reply: the stored id or None)."""
        pipe.get(keys.channel_last_message(self.channel, chat_id))

    def queue_sent_exists(self, chat_id: Id, pipe: Any) -> None:
        """Whether the destination has sent ids kept, queued on a pipeline (its reply: 1 or 0)."""
        pipe.exists(keys.channel_sent(self.channel, chat_id))

    async def sent(self, chat_id: Id, message_id: int) -> None:
        """A message we sent: a mark like any, and never the target of a probe."""
        # Independent writes, side by side: they leave in one round trip (`CoalescingRedis`).
        await asyncio.gather(self._remember_sent(chat_id, message_id), self.saw(chat_id, message_id))

    async def _remember_sent(self, chat_id: Id, message_id: int) -> None:
        name = keys.channel_sent(self.channel, chat_id)
        await self._sent(keys=[name], args=[int(message_id), KEEP_SENT_IDS, await retention_ms(self.redis)])
        self.scope.kept(name)

    async def sent_after(self, chat_id: Id, mark: int) -> frozenset[int]:
        """Ids of the messages we sent after `mark`."""
        ids = await self.redis.zrangebyscore(keys.channel_sent(self.channel, chat_id), f"({mark}", "+inf")
        return frozenset(int(i) for i in cast("list[str]", ids))

    async def heard(self, chat_id: Id, thread_id: Id, message_id: Id) -> None:
        """Someone else posted `message_id` in the destination's thread (kept when newer:
        Telegram's ids grow, Slack's `ts` are decimal seconds; without `ordered_ids`,
        when it was posted, in ms) — noted only for a destination that follows
        something, and forgotten after `HEARD_TTL` of silence."""
        # Two commands, not one script: the set of destinations and the destination's
        # keys are in different slots of a Cluster.
        if not await self.redis.sismember(keys.channel_destinations(self.channel), str(chat_id)):
            return  # a stranger's chat, or one that follows nothing: nothing to move
        heard = keys.channel_heard(self.channel, chat_id, thread_id)
        ms = await retention_ms(self.redis)  # never kept past the store's retention either
        ttl = min(HEARD_TTL * 1000, ms) if ms > 0 else HEARD_TTL * 1000
        await self._heard(keys=[heard], args=[str(message_id), ttl])

    def queue_heard(self, chat_id: Id, thread_id: Id, pipe: Any) -> None:
        """What `heard` noted in a thread, queued on a pipeline (`heard_mark` reads its reply)."""
        pipe.get(keys.channel_heard(self.channel, chat_id, thread_id))

    def heard_mark(self, raw: str) -> Id | None:
        """What `heard` noted: a message id, or when the message was posted (`ordered_ids`)."""
        if self.ordered_ids:
            return self.scope.id(raw)
        try:
            return int(raw)
        except ValueError:
            return None


__all__ = ["HEARD_TTL", "KEEP_SENT_IDS", "MessageIds"]
