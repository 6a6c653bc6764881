"""Webhook mode: Telegram posts each update to a gateway, the gateway hands it to the
adapter that runs the bot through Redis, and the adapter feeds it to its Application.

    gateway:  bot_of_path(path) → UpdateInbox(redis, bot_id).hand_over(update)
    adapter:  UpdateInbox.register(path), setWebhook, then inbox.consume(handle)

Any number of gateways may receive a bot's webhook; only the adapter reads the bot's
stream, from a cursor it keeps in Redis, so a restarted (or standby) adapter goes on
where the last one stopped. Telegram retries an update whose answer it did not get:
the update id is remembered, and a retry is dropped before it reaches the stream.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

from redis.exceptions import RedisError

from ..backoff import Backoff, Retrying
from ..store import keys
from ..store.connections import READ_BLOCK_MS
from ..supervise import spawn

log = logging.getLogger("progresscast.telegram")

# Remember the update id; only a new one goes to the stream. Arrival time is the score,
# so trimming forgets the oldest arrivals whatever their ids (Telegram picks a random
# next id after a quiet week).
_HAND_OVER = """
local stream_key = KEYS[1]
local seen_key = KEYS[2]
local update_id = ARGV[1]
local update_json = ARGV[2]
local now_ms = ARGV[3]
local stream_maxlen = ARGV[4]
local seen_keep = tonumber(ARGV[5])
if redis.call('ZADD', seen_key, 'NX', now_ms, update_id) == 0 then
  return 0
end
redis.call('ZREMRANGEBYRANK', seen_key, 0, -seen_keep - 1)
redis.call('XADD', stream_key, 'MAXLEN', '~', stream_maxlen, '*', 'update', update_json)
return 1
"""

# The cursor only moves forward: an adapter that paused past its lease and wakes up
# must not move it back over updates the next holder has handled (they would be
# handled again). Stream ids are "<ms>-<seq>".
_ADVANCE = """
local cursor_key = KEYS[1]
local new_id = ARGV[1]
local old_id = redis.call('GET', cursor_key)
if old_id then
  local old_ms, old_seq = string.match(old_id, '^(%d+)-(%d+)$')
  local new_ms, new_seq = string.match(new_id, '^(%d+)-(%d+)$')
  old_ms, old_seq, new_ms, new_seq = tonumber(old_ms), tonumber(old_seq), tonumber(new_ms), tonumber(new_seq)
  if old_ms and (old_ms > new_ms or (old_ms == new_ms and old_seq >= new_seq)) then
    return 0
  end
end
redis.call('SET', cursor_key, new_id)
return 1
"""

Handle = Callable[[dict[str, Any]], Awaitable[None]]


class UpdateInbox:
    """One bot's hand-off stream in Redis."""

    def __init__(self, redis: Any, bot_id: int) -> None:
        self.redis = redis
        self.bot_id = bot_id
        self._hand_over = redis.register_script(_HAND_OVER)
        self._advance = redis.register_script(_ADVANCE)
        self.closed = False
        self._task: asyncio.Task[None] | None = None
        self._cursor: str | None = None
        """The id of the last update handed over (None: read it from Redis)."""

    async def register(self, path: str) -> None:
        """Tell every gateway that `path` is this bot's webhook (before setWebhook)."""
        await self.redis.set(keys.tg_webhook_bot(path), self.bot_id)

    async def hand_over(self, update: dict[str, Any]) -> bool:
        """Queue an update (with an integer `update_id`); False: that id came before."""
        added = await self._hand_over(
            keys=[keys.tg_updates(self.bot_id), keys.tg_updates_seen(self.bot_id)],
            args=[
                update["update_id"],
                json.dumps(update, ensure_ascii=False, separators=(",", ":")),
                int(time.time() * 1000),
                keys.TG_UPDATES_MAXLEN,
                keys.TG_UPDATES_SEEN,
            ],
        )
        return bool(added)

    def start(self, handle: Handle, *, backoff: Backoff | None = None) -> None:
        """Consume in a supervised task of its own until `close`."""
        self.closed = False
        self._task = spawn(
            partial(self.consume, handle, backoff=backoff), "reading the Telegram webhook updates",
            name=f"telegram-updates-{self.bot_id}", backoff=backoff or Backoff(),
        )

    async def close(self) -> None:
        # The flag as well as the cancel: a library call inside `handle` may swallow a
        # CancelledError (Python 3.11's wait_for race), and the loop must still end.
        self.closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.wait([self._task], timeout=READ_BLOCK_MS / 1000 + 1)
            self._task = None

    async def consume(self, handle: Handle, *, backoff: Backoff | None = None) -> None:
        """Feed every update after the cursor to `handle`, in order, until cancelled or
        closed. The cursor moves past an update once `handle` returned or failed (a
        failed update is logged and not tried again; only a Redis error retries it)."""
        retry = Retrying("webhook updates: reading Redis failed", log=log, backoff=backoff)
        self._cursor = None
        while not self.closed:
            await retry.run(partial(self._consume_once, handle), retry_on=(RedisError,))

    async def _consume_once(self, handle: Handle) -> None:
        """One read of the stream after the cursor (nothing once closed), handed to `handle`."""
        if self.closed:
            return
        stream, cursor_key = keys.tg_updates(self.bot_id), keys.tg_updates_cursor(self.bot_id)
        if self._cursor is None:
            self._cursor = await self.redis.get(cursor_key) or "0"
        # Not cancelled half-way (a blocking read cancelled mid-reply can hang the
        # client): when the adapter stops, the read ends by itself within its block
        # time, and what it got is read again from the cursor next time.
        read = asyncio.create_task(self.redis.xread({stream: self._cursor}, block=READ_BLOCK_MS, count=100))
        read.add_done_callback(_retrieve)
        reply = await asyncio.shield(read)
        for _, entries in reply or []:
            for entry_id, fields in entries:
                if self.closed:
                    break
                update = _parse(fields.get("update"))
                if update is not None:
                    await _handle_one(handle, update)
                self._cursor = entry_id
            if not await self._advance(keys=[cursor_key], args=[self._cursor]):
                self._cursor = None  # another adapter went further: read on from its cursor


async def _handle_one(handle: Handle, update: dict[str, Any]) -> None:
    """One update; one that is not what it claims (a `message` that is not a message)
    is logged, escaped, and skipped, and the next one is read. A Redis error is the
    reader's to retry."""
    try:
        await handle(update)
    except RedisError:
        raise
    except Exception as exc:
        log.warning(
            "webhook updates: skipped update %r, which could not be read as a Telegram update (%r): %r",
            update.get("update_id"), f"{type(exc).__name__}: {exc}"[:200], str(update)[:200],
        )  # fmt: skip


def _retrieve(task: asyncio.Task[Any]) -> None:
    """A read left to finish after its reader stopped: nobody waits for its outcome."""
    if not task.cancelled():
        task.exception()


def _parse(raw: str | None) -> dict[str, Any] | None:
    try:
        update = json.loads(raw or "")
    except ValueError:
        update = None
    if not isinstance(update, dict):
        log.warning("webhook updates: skipped an entry that is not an update")
        return None
    return update


async def bot_of_path(redis: Any, path: str) -> int | None:
    """The bot whose adapter registered `path` as its webhook (None: none yet)."""
    raw = await redis.get(keys.tg_webhook_bot(path))
    return int(raw) if raw and raw.lstrip("-").isdigit() else None


__all__ = ["UpdateInbox", "bot_of_path"]
