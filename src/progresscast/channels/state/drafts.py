"""Each draft's stored state (`DraftState`), written under the bot's lease: a write or
delete is conditioned in Redis on the lease's fence number, so one that passed the local
check just before a pause never undoes what a newer holder of the lease stored.

An edit's bookkeeping is written behind (`defer`): what the message shows after an edit
(its digest, kind and card revision) is kept in this process's memory and stored with
the draft's next write, or `save_within` seconds after the first change not stored,
or when the worker stops. Storing it after every edit (a fenced script call and its
round trip) was about a tenth of an edit's CPU (bench/LIMITS.md). Every read of the
draft here sees the newest state (`current`); a crash loses at most those seconds of
it, and the next holder then makes one edit to content the message already shows ("not
modified", taken as delivered). Everything else — a first send's write-ahead, a new
message id, an answer's progress, a deletion, a decision's own bookkeeping — is stored
before the lane goes on, as before.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, replace
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


SAVE_WITHIN = 10.0
"""Seconds an edit's bookkeeping may stay unstored (see the module doc)."""
FLUSHED_AT_ONCE = 64
"""Unstored states written together by one flush (its round trips are shared)."""

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Unsaved:
    """A draft's state held here and not stored yet."""

    base: DraftState
    """What Redis holds for the draft (as read or written here)."""
    state: DraftState
    """What the draft is now."""
    fence: int
    """The lease's fence number when it was held back (0: no lease): another holding's
    memory is not this one's."""
    since: float
    """`time.monotonic()` of the first change not stored."""
    writing: DraftState | None = None
    """The state a flush is storing now: Redis may hold it already."""


class Drafts:
    def __init__(self, scope: Scope, *, save_within: float = SAVE_WITHIN) -> None:
        self.scope = scope
        self.redis = scope.redis
        self.save_within = save_within
        self._fenced_set = self.redis.register_script(_FENCED_SET)
        self._fenced_del = self.redis.register_script(_FENCED_DEL)
        self._unsaved: dict[DraftKey, _Unsaved] = {}
        self._flushing: dict[DraftKey, asyncio.Future[None]] = {}
        """Drafts a flush is writing: a later write of the same draft waits for it, so
        the two reach Redis in order."""
        self._timer: asyncio.TimerHandle | None = None
        self._flush_task: asyncio.Task[None] | None = None

    def _key(self, key: DraftKey) -> str:
        return keys.channel_draft(self.scope.channel, key.owner, key.chat_id, key.thread_id)

    def _fence_number(self) -> int:
        return self.scope.fence.number if self.scope.fence is not None else 0

    async def of(self, key: DraftKey) -> DraftState:
        """The draft's state (none: the empty state)."""
        return self.current(key, cast("str | None", await self.redis.get(self._key(key))))

    def queue_of(self, key: DraftKey, pipe: Any) -> None:
        """`of`, queued on a pipeline (`current` reads its reply)."""
        pipe.get(self._key(key))

    def current(self, key: DraftKey, raw: str | None) -> DraftState:
        """The draft's state from its stored JSON `raw` — or the newer one held here,
        while Redis still holds what it was made from."""
        stored = DraftState.from_json(raw)
        held = self._unsaved.get(key)
        if held is None:
            return stored
        if held.fence == self._fence_number() and (stored == held.base or stored == held.writing):
            return held.state
        del self._unsaved[key]  # written since by someone else, or under another holding: theirs counts
        return stored

    async def defer(self, key: DraftKey, stored: DraftState, state: DraftState) -> None:
        """After a delivered edit: `state` (from `stored`, this draft's `current` state)
        is kept here, and stored later (see the module doc)."""
        held = self._unsaved.get(key)
        now = time.monotonic()
        if self.save_within <= 0 or (held is not None and now - held.since >= self.save_within):
            await self.save(key, state)
            return
        self.scope.check_fence()
        if held is None:
            self._unsaved[key] = _Unsaved(stored, state, self._fence_number(), now)
            self._arm(self.save_within)
        else:
            held.state = state

    def _arm(self, delay: float) -> None:
        if self._timer is None and (self._flush_task is None or self._flush_task.done()):
            self._timer = asyncio.get_running_loop().call_later(delay, self._flush_due)

    def _flush_due(self) -> None:
        self._timer = None
        self._flush_task = asyncio.ensure_future(self._flush_older(self.save_within))

    async def _flush_older(self, age: float) -> None:
        """Store the held states at least `age` seconds old; then wait for the next."""
        failed = False
        try:
            await self.flush(age)
        except Exception as exc:  # Redis down: kept, and tried again one period later
            log.warning("drafts' bookkeeping not stored yet: %s: %s", type(exc).__name__, exc)
            failed = True
        finally:
            self._flush_task = None
        if self._unsaved:
            oldest = min(held.since for held in self._unsaved.values())
            self._arm(self.save_within if failed else max(0.05, oldest + self.save_within - time.monotonic()))

    async def flush(self, age: float = 0.0) -> None:
        """Store the states held here for `age` seconds or more (0: all of them)."""
        now = time.monotonic()
        due = [key for key, held in self._unsaved.items() if now - held.since >= age]
        for start in range(0, len(due), FLUSHED_AT_ONCE):
            await asyncio.gather(*(self._flush_one(key) for key in due[start : start + FLUSHED_AT_ONCE]))

    async def _flush_one(self, key: DraftKey) -> None:
        held = self._unsaved.get(key)
        if held is None:
            return
        if held.fence != self._fence_number():
            del self._unsaved[key]  # another holding's: not ours to write
            return
        written = held.writing = held.state
        done = asyncio.get_running_loop().create_future()
        self._flushing[key] = done
        try:
            await self._write(key, written)
        except FenceClosed:
            self._unsaved.pop(key, None)
            raise
        finally:
            held.writing = None
            del self._flushing[key]
            done.set_result(None)
        if self._unsaved.get(key) is held:
            if held.state is written:
                del self._unsaved[key]
            else:  # an edit came meanwhile: what Redis holds is what was written
                held.base = written
                held.since = time.monotonic()

    async def close(self) -> None:
        """Store every state held here (a stop; the lease still held)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._flush_task is not None:
            self._flush_task.cancel()
            await asyncio.gather(self._flush_task, return_exceptions=True)
            self._flush_task = None
        if self._unsaved:
            await self.flush()

    async def _in_order(self, key: DraftKey) -> None:
        """Before writing a draft: what held it back is stored no more, and a flush of
        it under way has reached Redis first."""
        self._unsaved.pop(key, None)
        flushing = self._flushing.get(key)
        if flushing is not None:
            await asyncio.wait([flushing])

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
        await self._in_order(key)
        await self._write(key, state)

    async def _write(self, key: DraftKey, state: DraftState) -> None:
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
        await self._in_order(key)
        ms = await retention_ms(self.redis)
        return bool(await self.redis.set(self._key(key), self._stamped(state), nx=True, px=ms or None))

    async def forget(self, key: DraftKey) -> None:
        """Delete a draft's state, fenced as `save` is."""
        self.scope.check_fence()
        await self._in_order(key)
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
