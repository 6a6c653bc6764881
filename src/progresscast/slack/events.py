"""Slack's Events API `message` events: where someone else's message landed.

A message posted by a person or another app in a channel (or one of its threads) is
noted for the channel's drafts (`ChannelWorker.heard`): a draft above it moves to the
bottom with its next update. The app's own messages (its drafts, pings, answers and
replies) come back as events too and are not counted, nor are edits, deletions and
other subtypes that post nothing new.
"""

from __future__ import annotations

from typing import Any

from ..channels.state.ids import Id
from .channel import NO_THREAD

POSTED = frozenset({"", "bot_message", "thread_broadcast", "file_share", "me_message"})
"""Subtypes of a `message` event that are a new message (no subtype: a person's)."""


def landed(event: Any, *, own_user: str | None, own_bot: str | None) -> list[tuple[Id, Id, str]]:
    """Where a `message` event's new message landed — (channel, thread, ts) — for each
    place it shows: its thread, and the channel too for a reply also sent there."""
    if not isinstance(event, dict) or event.get("type") != "message" or (own_user is None and own_bot is None):
        return []  # (before the app knows who it is, its own messages cannot be told apart)
    subtype = str(event.get("subtype") or "")
    channel, ts = event.get("channel"), event.get("ts")
    if subtype not in POSTED or not isinstance(channel, str) or not isinstance(ts, str) or not _is_ts(ts):
        return []
    user, bot = event.get("user"), event.get("bot_id")
    if (own_user is not None and user == own_user) or (own_bot is not None and bot == own_bot):
        return []
    thread = event.get("thread_ts")
    if isinstance(thread, str) and thread != ts and _is_ts(thread):
        out: list[tuple[Id, Id, str]] = [(channel, thread, ts)]
        if subtype == "thread_broadcast":
            out.append((channel, NO_THREAD, ts))
        return out
    return [(channel, NO_THREAD, ts)]


def _is_ts(value: str) -> bool:
    head, dot, tail = value.partition(".")
    return head.isdigit() and (not dot or tail.isdigit()) and len(value) <= 32


__all__ = ["POSTED", "landed"]
