"""Telegram's budgets for the shared pacer (`channels.pacing`).

Telegram publishes approximations — about one message per second in a chat, 20 per
minute in a group, about 30 per second for a bot, edits counted — and answers 429
past them. A private chat gets one call per `private_interval` (1 s), a group
(negative chat id) one per `group_interval` (3 s = 20 per minute), and the bot
`bot_rate` (30) calls per second across all chats.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

from ..channels.pacing import Budgets


@dataclass(frozen=True)
class Pace:
    private_interval: float = 1.0
    group_interval: float = 3.0
    bot_rate: float = 30.0
    retry_after_cap: float = 60.0
    """A 429's retry_after is honoured up to this many seconds."""

    def budgets(self) -> Budgets:
        def interval(chat_id: Hashable) -> float:
            return self.group_interval if is_group(chat_id) else self.private_interval

        return Budgets(interval=interval, bot_rate=self.bot_rate, retry_after_cap=self.retry_after_cap)


def is_group(chat_id: Hashable) -> bool:
    """Groups, supergroups and channels have negative ids; users positive ones."""
    return isinstance(chat_id, int) and chat_id < 0


__all__ = ["Pace", "is_group"]
