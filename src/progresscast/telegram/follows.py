"""The Telegram adapter's state in Redis: who follows what, chat overrides, drafts.

Key names live in `keys.py` (its Telegram section). A follow is stored from both
sides — the owner's followers (which chats an event concerns) and the chat's follows
(for /unfollow, /card, /help) — plus the set of chats, read at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from redis.asyncio import Redis

from .. import keys
from ..config import ChatSettings, Mode, RenderSettings, TelegramSettings
from ..drafts import DraftState
from ..owners import Owner

NO_RICH_TTL = 24 * 3600
"""How long the adapter remembers that the server rejected rich messages: a server
upgraded since is tried again after a day (one refused call)."""

KEEP_SENT_IDS = 200
"""Recent sent message ids remembered per chat (probes look only a few ids ahead)."""

# Set a key to a number only when it is larger (message ids only grow).
_MAX = """
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) > cur then redis.call('SET', KEYS[1], ARGV[1]) return 1 end
return 0
"""


@dataclass(frozen=True, order=True)
class DraftKey:
    """One draft: a chat, a forum topic (0: none) and the owner it shows."""

    chat_id: int
    thread_id: int
    owner: Owner


@dataclass(frozen=True)
class ChatPrefs:
    """Overrides set in the chat with /mode and /rich (None: not set)."""

    mode: Mode | None = None
    rich: bool | None = None


def chat_config(telegram: TelegramSettings, chat_id: int) -> ChatSettings | None:
    return next((c for c in telegram.chats if c.id == chat_id), None)


def effective_mode(telegram: TelegramSettings, chat_id: int, prefs: ChatPrefs) -> Mode:
    """The chat's override, else its `channels.telegram.chats[]` entry, else the bot's."""
    config = chat_config(telegram, chat_id)
    if prefs.mode is not None:
        return prefs.mode
    if config is not None and config.mode is not None:
        return config.mode
    return telegram.streaming.mode


def wants_rich(telegram: TelegramSettings, chat_id: int, prefs: ChatPrefs) -> bool:
    config = chat_config(telegram, chat_id)
    if prefs.rich is not None:
        return prefs.rich
    if config is not None and config.richMessages is not None:
        return config.richMessages
    return telegram.richMessages


def render_settings(
    telegram: TelegramSettings, chat_id: int, prefs: ChatPrefs, *, rich_available: bool = True
) -> RenderSettings:
    progress = telegram.streaming.progress
    return RenderSettings(
        mode=effective_mode(telegram, chat_id, prefs),
        maxLines=progress.maxLines,
        maxLineChars=progress.maxLineChars,
        rich=rich_available and wants_rich(telegram, chat_id, prefs),
    )


def allowed(telegram: TelegramSettings, chat_id: int) -> bool:
    return not telegram.allowedChats or chat_id in telegram.allowedChats


class TelegramState:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._max = redis.register_script(_MAX)

    # --- follows -------------------------------------------------------------------------

    async def follow(self, key: DraftKey) -> bool:
        """Subscribe; False when the chat topic already followed this owner."""
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.sadd(keys.tg_chat_follows(key.chat_id), f"{key.thread_id} {key.owner.display_key}")
            pipe.sadd(keys.tg_followers(key.owner), f"{key.chat_id} {key.thread_id}")
            pipe.sadd(keys.TG_CHATS, key.chat_id)
            added, _, _ = await pipe.execute()
        return bool(added)

    async def unfollow(self, key: DraftKey) -> bool:
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.srem(keys.tg_chat_follows(key.chat_id), f"{key.thread_id} {key.owner.display_key}")
            pipe.srem(keys.tg_followers(key.owner), f"{key.chat_id} {key.thread_id}")
            removed, _ = await pipe.execute()
        if not await self.redis.scard(keys.tg_chat_follows(key.chat_id)):
            await self.redis.srem(keys.TG_CHATS, key.chat_id)
        return bool(removed)

    async def is_following(self, key: DraftKey) -> bool:
        return bool(await self.redis.sismember(keys.tg_followers(key.owner), f"{key.chat_id} {key.thread_id}"))

    async def follows(self, chat_id: int, thread_id: int | None = None) -> list[DraftKey]:
        """What a chat follows (in one topic, or in all when `thread_id` is None), sorted."""
        out = []
        for member in cast("set[str]", await self.redis.smembers(keys.tg_chat_follows(chat_id))):
            thread, _, display = member.partition(" ")
            owner = Owner.from_display_key(display)
            if owner is None or not thread.lstrip("-").isdigit():
                continue
            if thread_id is None or int(thread) == thread_id:
                out.append(DraftKey(chat_id, int(thread), owner))
        return sorted(out)

    async def followers(self, owner: Owner) -> list[DraftKey]:
        out = []
        for member in cast("set[str]", await self.redis.smembers(keys.tg_followers(owner))):
            chat, _, thread = member.partition(" ")
            try:
                out.append(DraftKey(int(chat), int(thread or 0), owner))
            except ValueError:
                continue
        return sorted(out)

    async def chats(self) -> list[int]:
        return sorted(int(c) for c in await self.redis.smembers(keys.TG_CHATS))

    async def all_follows(self) -> list[DraftKey]:
        out: list[DraftKey] = []
        for chat_id in await self.chats():
            out += await self.follows(chat_id)
        return out

    # --- chat overrides ------------------------------------------------------------------

    async def prefs(self, chat_id: int) -> ChatPrefs:
        raw = cast("dict[str, str]", await self.redis.hgetall(keys.tg_chat_prefs(chat_id)))
        mode = raw.get("mode")
        rich = raw.get("rich")
        return ChatPrefs(
            mode=Mode(mode) if mode is not None and mode in Mode.__members__ else None,
            rich=None if rich is None else rich == "1",
        )

    async def set_mode(self, chat_id: int, mode: Mode) -> None:
        await self.redis.hset(keys.tg_chat_prefs(chat_id), "mode", mode.value)

    async def set_rich(self, chat_id: int, rich: bool) -> None:
        await self.redis.hset(keys.tg_chat_prefs(chat_id), "rich", "1" if rich else "0")

    # --- drafts --------------------------------------------------------------------------

    async def draft(self, key: DraftKey) -> DraftState:
        raw = cast("str | None", await self.redis.get(keys.tg_draft(key.owner, key.chat_id, key.thread_id)))
        return DraftState.from_json(raw)

    async def save_draft(self, key: DraftKey, state: DraftState) -> None:
        name = keys.tg_draft(key.owner, key.chat_id, key.thread_id)
        if state == DraftState():
            await self.redis.delete(name)
        else:
            await self.redis.set(name, state.to_json())

    async def forget_draft(self, key: DraftKey) -> None:
        await self.redis.delete(keys.tg_draft(key.owner, key.chat_id, key.thread_id))

    # --- message ids ---------------------------------------------------------------------

    async def saw_message(self, chat_id: int, message_id: int) -> None:
        await self._max(keys=[keys.tg_chat_last_message(chat_id)], args=[int(message_id)])

    async def last_message(self, chat_id: int) -> int:
        return int(await self.redis.get(keys.tg_chat_last_message(chat_id)) or 0)

    async def sent_message(self, chat_id: int, message_id: int) -> None:
        """A message we sent: a mark like any, and never the target of a probe."""
        name = keys.tg_chat_sent(chat_id)
        async with self.redis.pipeline(transaction=False) as pipe:
            pipe.zadd(name, {str(message_id): message_id})
            pipe.zremrangebyrank(name, 0, -(KEEP_SENT_IDS + 1))
            await pipe.execute()
        await self.saw_message(chat_id, message_id)

    async def sent_after(self, chat_id: int, mark: int) -> frozenset[int]:
        """Ids of the messages we sent after `mark`."""
        ids = await self.redis.zrangebyscore(keys.tg_chat_sent(chat_id), f"({mark}", "+inf")
        return frozenset(int(i) for i in cast("list[str]", ids))

    # --- the bot -------------------------------------------------------------------------

    async def rich_refused(self, bot_id: int) -> str | None:
        return cast("str | None", await self.redis.get(keys.tg_bot_no_rich(bot_id)))

    async def refuse_rich(self, bot_id: int, reason: str) -> None:
        await self.redis.set(keys.tg_bot_no_rich(bot_id), reason or "rejected", ex=NO_RICH_TTL)
