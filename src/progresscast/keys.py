"""Every Redis key name in one place.

Keys of one owner share the hash tag `{<agentId>:<sessionKey>}` so they land in one
Redis Cluster slot. Global keys (the event stream, the owner index, channel state)
carry the plain `pc:` prefix.
"""

from __future__ import annotations

from .owners import Owner

PREFIX = "pc"

EVENTS = f"{PREFIX}:events"
"""Stream of change events read by renderer workers (docs/events-and-runs.md)."""
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


def hook_tasks(owner: Owner) -> str:
    """Hash of the Claude Code Task tools' list (hooks/tasks.py): `<taskId>:subject`,
    `<taskId>:status`, `<taskId>:activeForm`, one field each so an update is one HSET."""
    return f"{PREFIX}:{owner.tag}:hook:tasks"


HOOK_TASKS_TTL = 7 * 24 * 3600
"""Seconds a session's task list outlives its last change."""


def owner_keys(owner: Owner) -> list[str]:
    return [card(owner), revision(owner), epoch(owner), run(owner), activity(owner), tools(owner)]


# --- chat channels ---------------------------------------------------------------------
# State of a chat channel's adapter (channels/state.py), under the channel's short name
# (`tg` for Telegram, `slack` for Slack). Per-owner keys carry the owner's hash tag;
# per-destination and per-bot keys are global (`pc:<channel>:…`). A follow is remembered
# from both sides: the owner's followers (which destinations an event concerns) and the
# destination's follows (/unfollow, /card, /help), plus the set of destinations (start-up).


def channel_destinations(channel: str) -> str:
    """Set: ids of the destinations (chats, Slack channels) that follow at least one owner."""
    return f"{PREFIX}:{channel}:chats"


def channel_followers(channel: str, owner: Owner) -> str:
    """Set of "<destination> <thread>" following this owner (thread 0 or empty: none)."""
    return f"{PREFIX}:{owner.tag}:{channel}:followers"


def channel_draft(channel: str, owner: Owner, destination: int | str, thread: int | str) -> str:
    """JSON of the draft this owner has in one destination/thread (channels.drafts.DraftState)."""
    return f"{PREFIX}:{owner.tag}:{channel}:draft:{destination}:{thread}"


def channel_follows(channel: str, destination: int | str) -> str:
    """Set of "<thread> <displayKey>" this destination follows."""
    return f"{PREFIX}:{channel}:chat:{destination}:follows"


def channel_prefs(channel: str, destination: int | str) -> str:
    """Hash of the destination's overrides set by its commands: `mode`, `rich` ("1"/"0")."""
    return f"{PREFIX}:{channel}:chat:{destination}:prefs"


def channel_last_message(channel: str, destination: int | str) -> str:
    """The highest message id known in the destination (from updates and our own sends):
    the mark from which an unsure send is looked for."""
    return f"{PREFIX}:{channel}:chat:{destination}:lastmsg"


def channel_sent(channel: str, destination: int | str) -> str:
    """Sorted set of the ids of recent messages the bot sent there (score = id): probing
    for an unsure send skips them."""
    return f"{PREFIX}:{channel}:chat:{destination}:sent"


def channel_no_rich(channel: str, bot_id: int | str) -> str:
    """Set (with a TTL) when the server rejected rich messages for this bot: why, as text."""
    return f"{PREFIX}:{channel}:bot:{bot_id}:norich"


# --- Telegram ------------------------------------------------------------------------
# The Telegram adapter's keys: the chat-channel keys above under the name `tg`.

TG = "tg"
TG_CHATS = channel_destinations(TG)
"""Set: ids of the chats that follow at least one owner."""


def tg_followers(owner: Owner) -> str:
    return channel_followers(TG, owner)


def tg_draft(owner: Owner, chat_id: int, thread_id: int) -> str:
    return channel_draft(TG, owner, chat_id, thread_id)


def tg_chat_follows(chat_id: int) -> str:
    return channel_follows(TG, chat_id)


def tg_chat_prefs(chat_id: int) -> str:
    return channel_prefs(TG, chat_id)


def tg_chat_last_message(chat_id: int) -> str:
    return channel_last_message(TG, chat_id)


def tg_chat_sent(chat_id: int) -> str:
    return channel_sent(TG, chat_id)


def tg_bot_no_rich(bot_id: int) -> str:
    return channel_no_rich(TG, bot_id)


# --- Slack ---------------------------------------------------------------------------
# The Slack adapter's keys: the chat-channel keys above under the name `slack`
# (destinations are channel ids, threads their `thread_ts`, the "bot" the workspace).

SLACK = "slack"


def slack_recipient(channel_id: str, thread_ts: str) -> str:
    """String `<user id> <team id>`: the person a thread's plan display streams to (the
    one who followed there with the plan display on)."""
    return f"{PREFIX}:{SLACK}:recipient:{channel_id}:{thread_ts}"
