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


def a2a_order(owner: Owner) -> str:
    """Hash of what the A2A ingestion applied last for this owner (a2a/apply.py):
    `ts` (status timestamp, µs, zero-padded), `task`, `artifact`, `artifactDone`.
    A reset leaves it alone: an older update must never come back after one."""
    return f"{PREFIX}:{owner.tag}:a2a"


def owner_keys(owner: Owner) -> list[str]:
    return [card(owner), revision(owner), epoch(owner), run(owner), activity(owner), tools(owner), a2a_order(owner)]


# --- Telegram ------------------------------------------------------------------------
# State of the Telegram adapter (telegram/follows.py). Per-owner keys carry the owner's
# hash tag; per-chat and per-bot keys are global (`pc:tg:…`). A follow is remembered
# from both sides: the owner's followers (which chats an event concerns) and the
# chat's follows (/unfollow, /card, /help), plus the set of chats (start-up).

TG_CHATS = f"{PREFIX}:tg:chats"
"""Set: ids of the chats that follow at least one owner."""


def tg_followers(owner: Owner) -> str:
    """Set of "<chatId> <threadId>" following this owner (threadId 0: no forum topic)."""
    return f"{PREFIX}:{owner.tag}:tg:followers"


def tg_draft(owner: Owner, chat_id: int, thread_id: int) -> str:
    """JSON of the draft this owner has in one chat/topic (drafts.DraftState)."""
    return f"{PREFIX}:{owner.tag}:tg:draft:{chat_id}:{thread_id}"


def tg_chat_follows(chat_id: int) -> str:
    """Set of "<threadId> <displayKey>" this chat follows."""
    return f"{PREFIX}:tg:chat:{chat_id}:follows"


def tg_chat_prefs(chat_id: int) -> str:
    """Hash of the chat's overrides set by /mode and /rich: `mode`, `rich` ("1"/"0")."""
    return f"{PREFIX}:tg:chat:{chat_id}:prefs"


def tg_chat_last_message(chat_id: int) -> str:
    """The highest message id known in the chat (from updates and our own sends): the
    mark from which an unsure send is looked for."""
    return f"{PREFIX}:tg:chat:{chat_id}:lastmsg"


def tg_chat_sent(chat_id: int) -> str:
    """Sorted set of the ids of recent messages the bot sent in the chat (score = id):
    probing for an unsure send skips them."""
    return f"{PREFIX}:tg:chat:{chat_id}:sent"


def tg_bot_no_rich(bot_id: int) -> str:
    """Set (with a TTL) when the Bot API server rejected rich messages: why, as text."""
    return f"{PREFIX}:tg:bot:{bot_id}:norich"


# --- A2A followers ----------------------------------------------------------------------
# What `serve` remembers about each configured agent it follows (a2a/watch.py), so that
# a restart asks only for what changed since.


def a2a_agent_cursor(agent_key: str) -> str:
    """String: the newest `status.timestamp` (RFC 3339) seen from one followed agent;
    `agent_key` is the agent id and a digest of its URL."""
    return f"{PREFIX}:a2a:agent:{agent_key}:cursor"
