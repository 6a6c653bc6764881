"""Pacing of Bot API calls: per chat and for the whole bot.

Telegram publishes approximations — about one message per second in a chat, 20 per
minute in a group, about 30 per second for a bot, edits counted — and answers 429
past them. We keep *strict* spacing (no bursts) so that a chat is never refused:
a private chat gets one call per `private_interval` (1 s), a group (negative chat
id) one per `group_interval` (3 s = 20 per minute), and the bot one call per
`1 / bot_rate` (30 per second) across all chats.

The worker first waits until a chat may be called (`ready`), then decides what to
send with the newest content, and only then `take`s the slot — so a slot is spent
only on a call that is made, and what goes out is never older than the wait.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Pace:
    private_interval: float = 1.0
    group_interval: float = 3.0
    bot_rate: float = 30.0
    retry_after_cap: float = 60.0
    """A 429's retry_after is honoured up to this many seconds."""


def is_group(chat_id: int) -> bool:
    """Groups, supergroups and channels have negative ids; users positive ones."""
    return chat_id < 0


class Pacer:
    def __init__(self, pace: Pace | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.pace = pace or Pace()
        self.clock = clock
        self._chat_next: dict[int, float] = {}
        self._bot_next = 0.0

    def interval(self, chat_id: int) -> float:
        return self.pace.group_interval if is_group(chat_id) else self.pace.private_interval

    def ready_in(self, chat_id: int) -> float:
        """Seconds until `chat_id` may be called (0 when it may now)."""
        return max(0.0, self._chat_next.get(chat_id, 0.0) - self.clock())

    async def ready(self, chat_id: int) -> None:
        """Wait until the chat may be called (the slot may move while we sleep: a 429)."""
        while (wait := self.ready_in(chat_id)) > 0:
            await asyncio.sleep(wait)

    def reserve(self, chat_id: int) -> float:
        """Spend the chat's next slot and one bot-wide slot; returns how long to sleep
        before calling (the bot slot may be a little later when many chats are busy)."""
        now = self.clock()
        at = max(now, self._chat_next.get(chat_id, 0.0), self._bot_next)
        self._bot_next = at + 1.0 / self.pace.bot_rate
        self._chat_next[chat_id] = at + self.interval(chat_id)
        return at - now

    async def take(self, chat_id: int) -> None:
        wait = self.reserve(chat_id)
        if wait > 0:
            await asyncio.sleep(wait)

    def hold(self, chat_id: int, seconds: float) -> float:
        """Telegram said "retry after `seconds`": no call to this chat before then.
        Returns the seconds actually held (capped)."""
        seconds = min(max(seconds, 0.0), self.pace.retry_after_cap)
        self._chat_next[chat_id] = max(self._chat_next.get(chat_id, 0.0), self.clock() + seconds)
        return seconds

    def forget(self, chat_id: int) -> None:
        self._chat_next.pop(chat_id, None)
