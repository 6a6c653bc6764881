"""Each draft's stored state (`DraftState`), written under the bot's lease: a write or
delete is conditioned in Redis on the lease's fence number, so one that passed the local
check just before a pause never undoes what a newer holder of the lease stored."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any, cast

from ...store import keys
from ...store.lease import FenceClosed
from ...store.retention import retention_ms
from ..draft.state import DraftState
from .ids import DraftKey
from .scope import Scope

# Was a draft's stored state written by a newer holder of the bot's lease than `fence`?
# Every state written under a lease carries its writer's fence number (none: 0).
_WRITTEN_BY_NEWER = """
local function written_by_newer(stored, fence)
  if not stored then return false end
  local ok, old = pcall(cjson.decode, stored)
  return ok and type(old) == 'table' and (tonumber(old['fence']) or 0) > fence
end
"""

# Store a draft's state unless a newer holder of the bot's lease already wrote it; it
# lives `ttl_ms` (the retention; 0: for ever).
_FENCED_SET = _WRITTEN_BY_NEWER + """
local draft_key = KEYS[1]
local state = ARGV[1]
local fence = tonumber(ARGV[2])
local ttl_ms = tonumber(ARGV[3])
if written_by_newer(redis.call('GET', draft_key), fence) then return 0 end
if ttl_ms > 0 then redis.call('SET', draft_key, state, 'PX', ttl_ms) else redis.call('SET', draft_key, state) end
return 1
"""

# Delete a draft's state unless a newer holder of the bot's lease wrote it (none: done).
_FENCED_DEL = _WRITTEN_BY_NEWER + """
local draft_key = KEYS[1]
local fence = tonumber(ARGV[1])
if written_by_newer(redis.call('GET', draft_key), fence) then return 0 end
redis.call('DEL', draft_key)
return 1
"""


class Drafts:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.redis = scope.redis
        self._fenced_set = self.redis.register_script(_FENCED_SET)
        self._fenced_del = self.redis.register_script(_FENCED_DEL)

    def _key(self, key: DraftKey) -> str:
        return keys.channel_draft(self.scope.channel, key.owner, key.chat_id, key.thread_id)

    async def of(self, key: DraftKey) -> DraftState:
        """The draft's stored state (none: the empty state)."""
        return DraftState.from_json(cast("str | None", await self.redis.get(self._key(key))))

    def queue_of(self, key: DraftKey, pipe: Any) -> None:
        """`of`, queued on a pipeline (`DraftState.from_json` reads its reply)."""
        pipe.get(self._key(key))

    def _stamped(self, state: DraftState) -> str:
        """The state's JSON, carrying the lease's fence number when one is held."""
        raw = state.to_json()
        if self.scope.fence is None:
            return raw
        fence = f'"fence":{self.scope.fence.number}}}'  # DraftState.from_json ignores it
        return f"{{{fence}" if raw == "{}" else f"{raw[:-1]},{fence}"

    @staticmethod
    def _newer(key: DraftKey) -> FenceClosed:
        return FenceClosed(f"a newer holder of the lease wrote draft {key.owner.display_key} in {key.chat_id}")

    async def save(self, key: DraftKey, state: DraftState) -> None:
        """Store a draft's state (the empty state: delete it). Under a lease: only while
        it is held, and never over a state a newer holder stored (raises FenceClosed)."""
        self.scope.check_fence()
        if _empty(state):
            await self._delete(key)
            return
        ms = await retention_ms(self.redis)
        # The draft changed: its follow and its destination are in use, renewed (when
        # due) beside the write, in the same round trip (`CoalescingRedis`).
        followers = keys.channel_followers(self.scope.channel, key.owner)
        renewal = self.scope.renewal(ms, followers, *self.scope.destination(key.chat_id))
        if renewal is None:
            await self._set(key, state, ms)
        else:
            await asyncio.gather(self._set(key, state, ms), renewal)

    async def _set(self, key: DraftKey, state: DraftState, ms: int) -> None:
        fence = self.scope.fence
        if fence is None:
            await self.redis.set(self._key(key), state.to_json(), px=ms or None)
        elif not await self._fenced_set(keys=[self._key(key)], args=[self._stamped(state), fence.number, ms]):
            raise self._newer(key)

    async def start(self, key: DraftKey, state: DraftState) -> bool:
        """Store the first state of a draft that has none yet (never over a lane's)."""
        # A stale holder's NX overwrites nothing, so never a newer holder's state. It
        # can create one where a newer holder deleted it — but only for a follow it
        # stored itself a moment before, past the same local check in the same pause,
        # and the state is that follow's bookkeeping (a run already ended is not
        # announced): it agrees with the follow, and the newer holder's next write or
        # delete of the draft supersedes it (a higher number). So NX needs no script;
        # the state carries its creator's number like every other write, as one without
        # reads as written by no holder (0), which a still older holder could overwrite.
        self.scope.check_fence()
        ms = await retention_ms(self.redis)
        return bool(await self.redis.set(self._key(key), self._stamped(state), nx=True, px=ms or None))

    async def forget(self, key: DraftKey) -> None:
        """Delete a draft's state, fenced as `save` is."""
        self.scope.check_fence()
        await self._delete(key)

    async def _delete(self, key: DraftKey) -> None:
        fence = self.scope.fence
        if fence is None:
            await self.redis.delete(self._key(key))
        elif not await self._fenced_del(keys=[self._key(key)], args=[fence.number]):
            raise self._newer(key)


_EMPTY = DraftState()


def _empty(state: DraftState) -> bool:
    """Nothing to keep: the empty state, but for when a gone draft last moved."""
    if state.message_id is not None or state.intent is not None:
        return False  # most saves, told without a copy
    return replace(state, reposted_at=0.0) == _EMPTY


__all__ = ["Drafts"]
