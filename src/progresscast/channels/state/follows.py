"""Who follows what in a chat channel. A follow is stored from both sides — the owner's
followers (which destinations an event concerns) and the destination's follows (for
/unfollow, /card, /help) — plus the set of destinations, read at start-up."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from ...model.owners import Owner
from ...store import keys
from ...store.retention import retention_ms
from .ids import DraftKey, Id
from .scope import Scope

# Add a member to a set that lives `ttl_ms` from now (0: for ever); 1 when it is new.
_ADD_KEPT = """
local set_key = KEYS[1]
local member = ARGV[1]
local ttl_ms = tonumber(ARGV[2])
local added = redis.call('SADD', set_key, member)
if ttl_ms > 0 then redis.call('PEXPIRE', set_key, ttl_ms) end
return added
"""


class Follows:
    def __init__(self, scope: Scope) -> None:
        self.scope = scope
        self.redis = scope.redis
        self.channel = scope.channel
        self._add_kept = self.redis.register_script(_ADD_KEPT)

    async def add(self, key: DraftKey) -> bool:
        """Subscribe; False when the destination/thread already followed this owner."""
        self.scope.check_fence()
        ms = await retention_ms(self.redis)
        (follows, in_follows), (followers, in_followers) = self._sets(key)
        # Each set gains its member and lives the retention from now, in one command (a
        # set is made by its first member, with no time to live of its own); side by
        # side, in one round trip.
        added, _, _ = await asyncio.gather(
            self._add_kept(keys=[follows], args=[in_follows, ms]),
            self._add_kept(keys=[followers], args=[in_followers, ms]),
            self.redis.sadd(keys.channel_destinations(self.channel), key.chat_id),
        )
        self.scope.kept(follows, followers)
        return bool(added)

    async def remove(self, key: DraftKey) -> bool:
        self.scope.check_fence()
        removed = await self._remove(key)
        (follows, _), _ = self._sets(key)
        if not await self.redis.scard(follows):
            await self.redis.srem(keys.channel_destinations(self.channel), key.chat_id)
        return removed

    async def _remove(self, key: DraftKey) -> bool:
        """Remove a follow's members in one round trip; True when the destination's
        follows changed."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for name, member in self._sets(key):
                pipe.srem(name, member)
            changed = (await pipe.execute())[0]
        return bool(changed)

    def _sets(self, key: DraftKey) -> tuple[tuple[str, str], tuple[str, str]]:
        """A follow as it is stored: (set, member) in the destination's follows, then in
        the owner's followers."""
        c = self.channel
        return (
            (keys.channel_follows(c, key.chat_id), f"{key.thread_id} {key.owner.display_key}"),
            (keys.channel_followers(c, key.owner), f"{key.chat_id} {key.thread_id}"),
        )

    async def end(self, chat_id: Id) -> list[DraftKey]:
        """End every follow of a destination from outside its adapter (a revoked grant):
        each is unfollowed and noted as ended, so the adapter's lane deletes its draft
        (`ended`, `ended_done`)."""
        keys_ = await self.of(chat_id)
        for key in keys_:
            await self.redis.sadd(keys.channel_ended(self.channel), self._ended_member(key))
            await self.remove(key)
        return keys_

    @staticmethod
    def _ended_member(key: DraftKey) -> str:
        return f"{key.chat_id} {key.thread_id} {key.owner.display_key}"

    async def ended(self) -> list[DraftKey]:
        """Follows ended from outside whose drafts are still to be deleted."""
        out = []
        for member in cast("set[str]", await self.redis.smembers(keys.channel_ended(self.channel))):
            raw_chat, _, rest = member.partition(" ")
            raw_thread, _, display = rest.partition(" ")
            owner = Owner.from_display_key(display)
            chat, thread = self.scope.id(raw_chat), self.scope.id(raw_thread)
            if owner is not None and chat is not None and thread is not None:
                out.append(DraftKey(chat, thread, owner))
        return sorted(out)

    async def ended_done(self, key: DraftKey) -> None:
        """The draft of an ended follow is deleted (or there was none)."""
        await self.redis.srem(keys.channel_ended(self.channel), self._ended_member(key))

    async def has(self, key: DraftKey) -> bool:
        """Does the destination/thread follow the owner?"""
        _, (followers, member) = self._sets(key)
        return bool(await self.redis.sismember(followers, member))

    def queue_has(self, key: DraftKey, pipe: Any) -> None:
        """`has`, queued on a pipeline (its reply: 1 or 0)."""
        _, (followers, member) = self._sets(key)
        pipe.sismember(followers, member)

    async def of(self, chat_id: Id, thread_id: Id | None = None) -> list[DraftKey]:
        """What a destination follows (in one thread, or in all when `thread_id` is None), sorted."""
        out = []
        for member in cast("set[str]", await self.redis.smembers(keys.channel_follows(self.channel, chat_id))):
            raw_thread, _, display = member.partition(" ")
            owner = Owner.from_display_key(display)
            thread = self.scope.id(raw_thread)
            if owner is None or thread is None:
                continue
            if thread_id is None or thread == thread_id:
                out.append(DraftKey(chat_id, thread, owner))
        return sorted(out)

    def queue_followers(self, pipe: Any, owners: list[Owner]) -> None:
        """Queue the reads of who follows each owner on a pipeline (a batch of change
        events, with its acknowledgement); `followers_from` their replies."""
        for owner in owners:
            pipe.smembers(keys.channel_followers(self.channel, owner))

    def followers_from(self, owners: list[Owner], replies: list[Any]) -> list[DraftKey]:
        out: list[DraftKey] = []
        for owner, members in zip(owners, replies, strict=True):
            out += self._followers(owner, members)
        return out

    def _followers(self, owner: Owner, members: set[str]) -> list[DraftKey]:
        out = []
        for member in members:
            raw_chat, _, raw_thread = member.partition(" ")
            chat, thread = self.scope.id(raw_chat), self.scope.id(raw_thread or "0")
            if chat is not None and thread is not None:
                out.append(DraftKey(chat, thread, owner))
        return sorted(out)

    async def destinations(self) -> list[Id]:
        """The destinations that follow something (or did, until pruned), sorted."""
        raw = cast("set[str]", await self.redis.smembers(keys.channel_destinations(self.channel)))
        ids = [i for i in (self.scope.id(c) for c in raw) if i is not None]
        return sorted(ids, key=lambda i: (isinstance(i, str), i))

    async def all(self) -> list[DraftKey]:
        """Every follow of every destination."""
        out: list[DraftKey] = []
        for chat_id in await self.destinations():
            out += await self.of(chat_id)
        return out

    async def prune_destinations(self) -> int:
        """Forget the destinations whose follows are gone (expired, or all ended); how
        many. (A follow made meanwhile adds its destination again at its next follow.)"""
        name = keys.channel_destinations(self.channel)
        chats = list(cast("set[str]", await self.redis.smembers(name)))
        if not chats:
            return 0
        async with self.redis.pipeline(transaction=False) as pipe:
            for chat in chats:
                pipe.exists(keys.channel_follows(self.channel, chat))
            found = await pipe.execute()
        gone = [chat for chat, exists in zip(chats, found, strict=True) if not exists]
        return int(await self.redis.srem(name, *gone)) if gone else 0


__all__ = ["Follows"]
