"""A chat channel's state in Redis: who follows what, destination overrides, drafts,
message ids, the bot's refusals. Shared by every channel; key names live in `keys.py`
(its chat-channel section), under the channel's short name.

A follow is stored from both sides — the owner's followers (which destinations an
event concerns) and the destination's follows (for /unfollow, /card, /help) — plus the
set of destinations, read at start-up.

What a destination makes lives the store's retention (retention.py) past its last use:
a follow when it is made and whenever its draft changes, overrides when set, message ids
when seen, drafts when stored. A destination that stopped following (its follows
expired) leaves the set of destinations when the worker prunes it (`prune_destinations`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, cast

from redis.asyncio import Redis

from ..config.base import Mode
from ..model.owners import Owner
from ..store import keys
from ..store.lease import Fence, FenceClosed
from ..store.retention import retention_ms
from .draft.state import DraftState

NO_RICH_TTL = 24 * 3600
"""How long the adapter remembers that the server rejected rich messages: a server
upgraded since is tried again after a day (one refused call)."""

KEPT_REMEMBERED = 100_000
"""Keys whose last renewal a process remembers (past it, all are forgotten at once)."""

HEARD_TTL = 7 * 86_400
"""Seconds a destination's newest message of someone else is remembered without a new one."""

KEEP_SENT_IDS = 200
"""Recent sent message ids remembered per destination (probes look only a few ids ahead)."""

# Set a key to a number only when it is larger (message ids, and Slack's decimal `ts`, only grow).
_MAX = """
local last_message_key = KEYS[1]
local message_id = tonumber(ARGV[1])
local cur = tonumber(redis.call('GET', last_message_key) or '0')
if message_id > cur then redis.call('SET', last_message_key, ARGV[1], 'KEEPTTL') return 1 end
return 0
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

Id = int | str
"""A destination or thread id: Telegram's integers, Slack's channel ids and `ts`."""


@dataclass(frozen=True, order=True)
class DraftKey:
    """One draft: a destination (chat, Slack channel), a thread in it (forum topic,
    Slack thread; 0 or "": none) and the owner it shows."""

    chat_id: Id
    thread_id: Id
    owner: Owner


@dataclass(frozen=True)
class ChatPrefs:
    """Overrides set in the destination with its mode/rich commands (None: not set)."""

    mode: Mode | None = None
    rich: bool | None = None


DraftFollowing = tuple[DraftState, bool, ChatPrefs, "Id | None", int]
"""What a decision about a draft reads here: its state, whether its destination follows
the owner, the destination's overrides, the newest message someone else posted below it,
and the destination's newest message id (`last_message`: a first send's mark)."""


def _prefs(raw: dict[str, str]) -> ChatPrefs:
    mode = raw.get("mode")
    rich = raw.get("rich")
    return ChatPrefs(
        mode=Mode(mode) if mode is not None and mode in Mode.__members__ else None,
        rich=None if rich is None else rich == "1",
    )


class ChannelState:
    def __init__(
        self, redis: Redis, channel: str, parse_id: Callable[[str], Id] = int, *, fence: Fence | None = None,
        ordered_ids: bool = True,
    ) -> None:
        self.redis = redis
        self.channel = channel
        self.parse_id = parse_id
        self.ordered_ids = ordered_ids
        """The channel's message ids grow with time. Where they do not (Matrix), what
        `heard` notes of a message is when it was posted, in ms (`conduct.under`)."""
        self.fence = fence
        """The bot's lease (None: no lease). Draft writes and deletes check it and are
        conditioned on its number in Redis; follows and overrides (a command's writes)
        check it. Message ids and the rich refusal are facts the server told (a message
        exists, rich messages were rejected), true whoever holds the lease: written
        unchecked, so a call that went out just before a pause is still remembered."""
        self._max = redis.register_script(_MAX)
        self._heard = redis.register_script(_HEARD)
        self._fenced_set = redis.register_script(_FENCED_SET)
        self._fenced_del = redis.register_script(_FENCED_DEL)
        self._kept: dict[str, float] = {}
        """When (monotonic) each key's time to live was last renewed here (`_keep`)."""
        self._absent: dict[str, float] = {}
        """When (monotonic) `_keep` last found a key not made yet: a destination without
        overrides has no prefs key, and asking again on every draft write is a round trip."""

    async def _keep(self, *names: str) -> None:
        """These keys were used: they live the retention from now. Renewed at most once
        per tenth of it per key and process, so a busy draft costs no extra round trip."""
        ms = await retention_ms(self.redis)
        if ms <= 0:
            return
        now = time.monotonic()
        due = [n for n in names if now - max(self._kept.get(n, -1e18), self._absent.get(n, -1e18)) > ms / 10_000]
        if not due:
            return
        if len(self._kept) + len(self._absent) > KEPT_REMEMBERED:
            self._kept.clear()
            self._absent.clear()
        async with self.redis.pipeline(transaction=False) as pipe:
            for name in due:
                pipe.pexpire(name, ms)
            renewed = await pipe.execute()
        for name, done in zip(due, renewed, strict=True):
            if done:
                self._kept[name] = now
                self._absent.pop(name, None)
            else:  # not made yet: not asked again until it is (`_made`), or for a while
                self._absent[name] = now

    def _made(self, *names: str) -> None:
        """These keys may have just been made: the next `_keep` renews them."""
        for name in names:
            self._absent.pop(name, None)

    def _draft_key(self, key: DraftKey) -> str:
        return keys.channel_draft(self.channel, key.owner, key.chat_id, key.thread_id)

    # --- follows -------------------------------------------------------------------------

    async def follow(self, key: DraftKey) -> bool:
        """Subscribe; False when the destination/thread already followed this owner."""
        self._check_fence()
        added = await self._write_follow(key, add=True)
        names = [name for name, _ in self._follow_sets(key)]
        for name in names:
            self._kept.pop(name, None)  # a new member: renewed now
        self._made(*names)
        await self._keep(*names)
        return added

    async def unfollow(self, key: DraftKey) -> bool:
        self._check_fence()
        removed = await self._write_follow(key, add=False)
        (follows, _), _ = self._follow_sets(key)
        if not await self.redis.scard(follows):
            await self.redis.srem(keys.channel_destinations(self.channel), key.chat_id)
        return removed

    async def _write_follow(self, key: DraftKey, *, add: bool) -> bool:
        """Add or remove a follow's members in one round trip (an added one makes its
        destination known); True when the destination's follows changed."""
        async with self.redis.pipeline(transaction=False) as pipe:
            for name, member in self._follow_sets(key):
                if add:
                    pipe.sadd(name, member)
                else:
                    pipe.srem(name, member)
            if add:
                pipe.sadd(keys.channel_destinations(self.channel), key.chat_id)
            changed = (await pipe.execute())[0]
        return bool(changed)

    def _follow_sets(self, key: DraftKey) -> tuple[tuple[str, str], tuple[str, str]]:
        """A follow as it is stored: (set, member) in the destination's follows, then in
        the owner's followers."""
        c = self.channel
        return (
            (keys.channel_follows(c, key.chat_id), f"{key.thread_id} {key.owner.display_key}"),
            (keys.channel_followers(c, key.owner), f"{key.chat_id} {key.thread_id}"),
        )

    async def end_follows(self, chat_id: Id) -> list[DraftKey]:
        """End every follow of a destination from outside its adapter (a revoked grant):
        each is unfollowed and noted as ended, so the adapter's lane deletes its draft
        (`ended`, `ended_done`)."""
        keys_ = await self.follows(chat_id)
        for key in keys_:
            await self.redis.sadd(keys.channel_ended(self.channel), self._ended_member(key))
            await self.unfollow(key)
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
            chat, thread = self._id(raw_chat), self._id(raw_thread)
            if owner is not None and chat is not None and thread is not None:
                out.append(DraftKey(chat, thread, owner))
        return sorted(out)

    async def ended_done(self, key: DraftKey) -> None:
        """The draft of an ended follow is deleted (or there was none)."""
        await self.redis.srem(keys.channel_ended(self.channel), self._ended_member(key))

    async def is_following(self, key: DraftKey) -> bool:
        _, (followers, member) = self._follow_sets(key)
        return bool(await self.redis.sismember(followers, member))

    def _id(self, raw: str) -> Id | None:
        try:
            return self.parse_id(raw)
        except ValueError:
            return None

    def _heard_mark(self, raw: str) -> Id | None:
        """What `heard` noted: a message id, or when the message was posted (`ordered_ids`)."""
        if self.ordered_ids:
            return self._id(raw)
        try:
            return int(raw)
        except ValueError:
            return None

    async def follows(self, chat_id: Id, thread_id: Id | None = None) -> list[DraftKey]:
        """What a destination follows (in one thread, or in all when `thread_id` is None), sorted."""
        out = []
        for member in cast("set[str]", await self.redis.smembers(keys.channel_follows(self.channel, chat_id))):
            raw_thread, _, display = member.partition(" ")
            owner = Owner.from_display_key(display)
            thread = self._id(raw_thread)
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
            chat, thread = self._id(raw_chat), self._id(raw_thread or "0")
            if chat is not None and thread is not None:
                out.append(DraftKey(chat, thread, owner))
        return sorted(out)

    async def chats(self) -> list[Id]:
        raw = cast("set[str]", await self.redis.smembers(keys.channel_destinations(self.channel)))
        ids = [i for i in (self._id(c) for c in raw) if i is not None]
        return sorted(ids, key=lambda i: (isinstance(i, str), i))

    async def all_follows(self) -> list[DraftKey]:
        out: list[DraftKey] = []
        for chat_id in await self.chats():
            out += await self.follows(chat_id)
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

    # --- overrides -----------------------------------------------------------------------

    async def prefs(self, chat_id: Id) -> ChatPrefs:
        return _prefs(cast("dict[str, str]", await self.redis.hgetall(keys.channel_prefs(self.channel, chat_id))))

    async def set_mode(self, chat_id: Id, mode: Mode) -> None:
        self._check_fence()
        await self.redis.hset(keys.channel_prefs(self.channel, chat_id), "mode", mode.value)
        self._made(keys.channel_prefs(self.channel, chat_id))
        await self._keep_chat(chat_id)

    async def set_rich(self, chat_id: Id, rich: bool) -> None:
        self._check_fence()
        await self.redis.hset(keys.channel_prefs(self.channel, chat_id), "rich", "1" if rich else "0")
        self._made(keys.channel_prefs(self.channel, chat_id))
        await self._keep_chat(chat_id)

    async def _keep_chat(self, chat_id: Id) -> None:
        c = self.channel
        await self._keep(
            keys.channel_follows(c, chat_id), keys.channel_prefs(c, chat_id), keys.channel_last_message(c, chat_id),
            keys.channel_sent(c, chat_id),
        )

    # --- drafts --------------------------------------------------------------------------

    async def draft(self, key: DraftKey) -> DraftState:
        return DraftState.from_json(cast("str | None", await self.redis.get(self._draft_key(key))))

    def queue_draft_following(self, key: DraftKey, pipe: Any) -> None:
        """Queue the reads of `DraftFollowing` on a pipeline, for one round trip with
        the view the draft shows (`CardStore.view_with`; on a Cluster, one per node)."""
        _, (followers, member) = self._follow_sets(key)
        pipe.get(self._draft_key(key))
        pipe.sismember(followers, member)
        pipe.hgetall(keys.channel_prefs(self.channel, key.chat_id))
        pipe.get(keys.channel_heard(self.channel, key.chat_id, key.thread_id))
        pipe.get(keys.channel_last_message(self.channel, key.chat_id))

    def draft_following_of(self, replies: list[Any]) -> DraftFollowing:
        """`DraftFollowing` made of the replies to `queue_draft_following`."""
        raw, following, prefs, heard, last = replies
        below = self._heard_mark(heard) if heard else None
        return DraftState.from_json(raw), bool(following), _prefs(prefs), below, int(last or 0)

    def _check_fence(self) -> None:
        if self.fence is not None:
            self.fence.check()

    def _stamped(self, state: DraftState) -> str:
        """The state's JSON, carrying the lease's fence number when one is held."""
        raw = state.to_json()
        if self.fence is None:
            return raw
        return f'{raw[:-1]},"fence":{self.fence.number}}}'  # DraftState.from_json ignores it

    def _newer(self, key: DraftKey) -> FenceClosed:
        return FenceClosed(f"a newer holder of the lease wrote draft {key.owner.display_key} in {key.chat_id}")

    async def save_draft(self, key: DraftKey, state: DraftState) -> None:
        """Store a draft's state (the empty state: delete it). Under a lease: only while
        it is held, and never over a state a newer holder stored (raises FenceClosed)."""
        self._check_fence()
        if replace(state, reposted_at=0.0) == DraftState():  # when a gone draft last moved: nothing to keep
            await self._delete_draft(key)
            return
        ms = await retention_ms(self.redis)
        if self.fence is None:
            await self.redis.set(self._draft_key(key), state.to_json(), px=ms or None)
        elif not await self._fenced_set(
            keys=[self._draft_key(key)], args=[self._stamped(state), self.fence.number, ms]
        ):
            raise self._newer(key)
        # The draft changed: its follow is in use.
        await self._keep(keys.channel_followers(self.channel, key.owner))
        await self._keep_chat(key.chat_id)

    async def start_draft(self, key: DraftKey, state: DraftState) -> bool:
        """Store the first state of a draft that has none yet (never over a lane's)."""
        # A stale holder's NX overwrites nothing, so never a newer holder's state. It
        # can create one where a newer holder deleted it — but only for a follow it
        # stored itself a moment before, past the same local check in the same pause,
        # and the state is that follow's bookkeeping (a run already ended is not
        # announced): it agrees with the follow, and the newer holder's next write or
        # delete of the draft supersedes it (a higher number). So NX needs no script;
        # the state carries its creator's number like every other write, as one without
        # reads as written by no holder (0), which a still older holder could overwrite.
        self._check_fence()
        ms = await retention_ms(self.redis)
        return bool(await self.redis.set(self._draft_key(key), self._stamped(state), nx=True, px=ms or None))

    async def forget_draft(self, key: DraftKey) -> None:
        """Delete a draft's state, fenced as `save_draft` is."""
        self._check_fence()
        await self._delete_draft(key)

    async def _delete_draft(self, key: DraftKey) -> None:
        if self.fence is None:
            await self.redis.delete(self._draft_key(key))
        elif not await self._fenced_del(keys=[self._draft_key(key)], args=[self.fence.number]):
            raise self._newer(key)

    # --- message ids ---------------------------------------------------------------------

    async def saw_message(self, chat_id: Id, message_id: int) -> None:
        name = keys.channel_last_message(self.channel, chat_id)
        await self._max(keys=[name], args=[int(message_id)])
        self._made(name)
        await self._keep(name)

    async def heard(self, chat_id: Id, thread_id: Id, message_id: Id) -> None:
        """Someone else posted `message_id` in the destination's thread (kept when newer:
        Telegram's ids grow, Slack's `ts` are decimal seconds; without `ordered_ids`,
        when it was posted, in ms) — noted only for a destination that follows
        something, and forgotten after `HEARD_TTL` of silence.
        A fact the server told: written unchecked by the lease, like message ids."""
        # Two commands, not one script: the set of destinations and the destination's
        # keys are in different slots of a Cluster.
        if not await self.redis.sismember(keys.channel_destinations(self.channel), str(chat_id)):
            return  # a stranger's chat, or one that follows nothing: nothing to move
        heard = keys.channel_heard(self.channel, chat_id, thread_id)
        ms = await retention_ms(self.redis)  # never kept past the store's retention either
        ttl = min(HEARD_TTL * 1000, ms) if ms > 0 else HEARD_TTL * 1000
        await self._heard(keys=[heard], args=[str(message_id), ttl])

    async def last_message(self, chat_id: Id) -> int:
        return int(cast("str | None", await self.redis.get(keys.channel_last_message(self.channel, chat_id))) or 0)

    async def sent_message(self, chat_id: Id, message_id: int) -> None:
        """A message we sent: a mark like any, and never the target of a probe."""
        name = keys.channel_sent(self.channel, chat_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(name, {str(message_id): message_id})
            pipe.zremrangebyrank(name, 0, -(KEEP_SENT_IDS + 1))
            await pipe.execute()
        self._made(name)
        await self._keep(name)
        await self.saw_message(chat_id, message_id)

    async def sent_after(self, chat_id: Id, mark: int) -> frozenset[int]:
        """Ids of the messages we sent after `mark`."""
        ids = await self.redis.zrangebyscore(keys.channel_sent(self.channel, chat_id), f"({mark}", "+inf")
        return frozenset(int(i) for i in cast("list[str]", ids))

    # --- the bot -------------------------------------------------------------------------

    async def rich_refused(self, bot_id: Id) -> str | None:
        return cast("str | None", await self.redis.get(keys.channel_no_rich(self.channel, bot_id)))

    async def refuse_rich(self, bot_id: Id, reason: str) -> None:
        await self.redis.set(keys.channel_no_rich(self.channel, bot_id), reason or "rejected", ex=NO_RICH_TTL)


__all__ = ["KEEP_SENT_IDS", "NO_RICH_TTL", "ChannelState", "ChatPrefs", "DraftKey", "Id"]
