"""Telegram's budgets for the shared pacer (`channels.pacing`).

Telegram publishes approximations — about one message per second in a chat, 20 per
minute in a group, about 30 per second for a bot, edits counted — and answers 429
past them. The pace is the even one of the other platforms (`channels.base.EvenPace`),
but for groups: a private chat gets one call per `destination_interval` (1 s), a group
(negative chat id) one per `group_interval` (3 s = 20 per minute), and the bot
`bot_rate` (30) calls per second across all chats.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass, replace

from ..channels.base import EvenPace
from ..channels.pacing import Budgets


@dataclass(frozen=True)
class Pace(EvenPace):
    bot_rate: float = 30.0
    group_interval: float = 3.0
    """Seconds between two calls to one group; `destination_interval` is a private chat's."""

    def budgets(self) -> Budgets:
        def interval(chat_id: Hashable) -> float:
            return self.group_interval if is_group(chat_id) else self.destination_interval

        return replace(super().budgets(), interval=interval)


def is_group(chat_id: Hashable) -> bool:
    """Groups, supergroups and channels have negative ids; users positive ones."""
    return isinstance(chat_id, int) and chat_id < 0


__all__ = ["Pace", "is_group"]
