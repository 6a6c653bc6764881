"""What names a destination, a thread and one draft in a chat channel's state."""

from __future__ import annotations

from dataclasses import dataclass

from ...model.owners import Owner

Id = int | str
"""A destination or thread id: Telegram's integers, Slack's channel ids and `ts`."""


@dataclass(frozen=True, order=True, slots=True)
class DraftKey:
    """One draft: a destination (chat, Slack channel), a thread in it (forum topic,
    Slack thread; 0 or "": none) and the owner it shows."""

    chat_id: Id
    thread_id: Id
    owner: Owner


__all__ = ["DraftKey", "Id"]
