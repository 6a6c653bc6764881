"""Every Redis key name in one place.

Keys of one owner share the hash tag `{<agentId>:<sessionKey>}` so they land in one
Redis Cluster slot. Global keys (the event stream, the owner index, channel state)
carry the plain `pc:` prefix.
"""

from __future__ import annotations

from .owners import Owner

PREFIX = "pc"

EVENTS = f"{PREFIX}:events"
"""Stream of change events read by renderer workers (DESIGN §3)."""
EVENTS_MAXLEN = 100_000

OWNERS = f"{PREFIX}:owners"
"""Sorted set: display key → last change time (ms), for listings."""


def card(owner: Owner) -> str:
    return f"{PREFIX}:{owner.tag}:card"


def revision(owner: Owner) -> str:
    return f"{PREFIX}:{owner.tag}:rev"


def epoch(owner: Owner) -> str:
    """Reset epoch: bumped by every reset; a write admitted under an older one is refused."""
    return f"{PREFIX}:{owner.tag}:epoch"


def run(owner: Owner) -> str:
    return f"{PREFIX}:{owner.tag}:run"


def activity(owner: Owner) -> str:
    return f"{PREFIX}:{owner.tag}:activity"


def tools(owner: Owner) -> str:
    return f"{PREFIX}:{owner.tag}:tools"


def owner_keys(owner: Owner) -> list[str]:
    return [card(owner), revision(owner), epoch(owner), run(owner), activity(owner), tools(owner)]
