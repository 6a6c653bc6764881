"""Every Redis key name in one place.

An owner's keys carry the hash tag of its **shard**, `{pc:<shard>}` with
`shard = crc32(displayKey) mod shards`, and each shard has its own change stream
and owner index under the same tag. So one write (card, revision, event, index)
stays one atomic script whose keys share one Redis Cluster slot, and nothing runs
a multi-key command across shards. The shard count is a property of the store,
recorded in it when first used (`SHARDS`); `Layout` names the keys for one count.

Per-owner keys read `pc:{pc:<shard>}:<kind>:<displayKey>`: the kind comes before
the display key, which always starts with `agent:`, so no two owners' keys meet.
Global keys (the recorded layout, per-chat channel state) carry the plain `pc:` prefix.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

from ..model.owners import Owner

PREFIX = "pc"

DEFAULT_SHARDS = 16
EVENTS_MAXLEN = 100_000
"""Entries kept per shard stream (`MAXLEN ~`)."""

SHARDS = f"{PREFIX}:shards"
"""The store's shard count, recorded on first use; a differing config is overruled."""
RETENTION = f"{PREFIX}:retention"
"""The store's retention in ms (retention.py), recorded by a process whose config sets it."""
MIGRATION_LOCK = f"{PREFIX}:migrating"
"""Held (a lease, renewed) while one process moves a store from the first layout."""
MIGRATION_FENCE = f"{PREFIX}:migrating:fence"
"""The migration lock's fence counter (lease.py); the first layout never ran on a Cluster,
so the two need not share a slot."""


def shard_tag(shard: int) -> str:
    return f"{{{PREFIX}:{shard}}}"


def events(shard: int) -> str:
    """The shard's change stream `pc:events:{pc:<shard>}`."""
    return f"{PREFIX}:events:{shard_tag(shard)}"


def owners(shard: int) -> str:
    """Sorted set: display key → last change time (ms), for listings, per shard."""
    return f"{PREFIX}:owners:{shard_tag(shard)}"


@dataclass(frozen=True)
class Layout:
    """Key names for a store of `shards` shards."""

    shards: int = DEFAULT_SHARDS

    def shard(self, owner: Owner) -> int:
        return zlib.crc32(owner.display_key.encode()) % self.shards

    def tag(self, owner: Owner) -> str:
        return shard_tag(self.shard(owner))

    def _key(self, owner: Owner, kind: str) -> str:
        return f"{PREFIX}:{self.tag(owner)}:{kind}:{owner.display_key}"

    def events_of(self, owner: Owner) -> str:
        return events(self.shard(owner))

    def owners_of(self, owner: Owner) -> str:
        return owners(self.shard(owner))

    @property
    def streams(self) -> list[str]:
        return [events(s) for s in range(self.shards)]

    @property
    def indexes(self) -> list[str]:
        return [owners(s) for s in range(self.shards)]

    def card(self, owner: Owner) -> str:
        return self._key(owner, "card")

    def revision(self, owner: Owner) -> str:
        return self._key(owner, "rev")

    def reset_at(self, owner: Owner) -> str:
        """When the last reset happened (µs, the Redis server's clock): a write that
        arrived before it is refused."""
        return self._key(owner, "resetAt")

    def history(self, owner: Owner) -> str:
        """List of what each accepted write changed (JSON entries, newest first, capped;
        scripts.py writes them)."""
        return self._key(owner, "history")

    def run(self, owner: Owner) -> str:
        return self._key(owner, "run")

    def activity(self, owner: Owner) -> str:
        return self._key(owner, "activity")

    def tools(self, owner: Owner) -> str:
        return self._key(owner, "tools")

    def last_event(self, owner: Owner) -> str:
        """Hash of the owner's newest event (id, type, revision, state): what a
        reconnecting live viewer needs, read in one command whatever the stream holds."""
        return self._key(owner, "last")

    def a2a_order(self, owner: Owner) -> str:
        """Hash of what the A2A ingestion applied last for this owner (scripts.py):
        `ts` (the newest status timestamp applied, µs, zero-padded), `planTs` (the newest
        timestamp of an update whose plan was applied), `artifact`, `artifactDone`.
        A reset leaves it alone: an older update must never come back after one."""
        return self._key(owner, "a2a")

    def asks(self, owner: Owner) -> str:
        """Hash askId → the ask as JSON (model/asks.py): its question, state and answer.
        Open asks, and those that ended within a day (a late press is told who answered);
        beside them `gone:<askId>`, a withdraw that found no ask (`GONE_KEEP_MS`)."""
        return self._key(owner, "asks")

    def stop_armed(self, owner: Owner) -> str:
        """Stop pressed once on the owner's run, waiting for its confirming second press:
        who pressed (JSON), living the confirmation window (`SET … PX`). Not retained
        with the owner's other keys: its own short life is the point."""
        return self._key(owner, "stopArmed")

    def owner_keys(self, owner: Owner) -> list[str]:
        return [
            self.card(owner),
            self.revision(owner),
            self.reset_at(owner),
            self.history(owner),
            self.run(owner),
            self.activity(owner),
            self.tools(owner),
            self.last_event(owner),
            self.asks(owner),
        ]


# --- the first layout ------------------------------------------------------------------
# One global stream and index, keys tagged per owner. Read only to migrate a store
# written by it (migrate.py).

LEGACY_EVENTS = f"{PREFIX}:events"
LEGACY_OWNERS = f"{PREFIX}:owners"


LEGACY_OWNER_KEYS = f"{PREFIX}:{{*}}:*"
"""SCAN pattern covering the first layout's owner keys (and the keys used alone, below)."""
LEGACY_KINDS = ("card", "rev", "epoch", "run", "activity", "tools")


def legacy_owner_key(owner: Owner, kind: str) -> str:
    return f"{PREFIX}:{owner_tag(owner)}:{kind}"


def parse_legacy_owner_key(key: str) -> tuple[Owner, str] | None:
    """(owner, kind) of a first-layout owner key `pc:{<agentId>:<sessionKey>}:<kind>`;
    None for anything else (shard keys, keys used alone)."""
    if not key.startswith(f"{PREFIX}:{{") or key.startswith(f"{PREFIX}:{{{PREFIX}:"):
        return None
    tag, _, kind = key[len(PREFIX) + 2 :].partition("}:")
    agent, _, session = tag.partition(":")
    if kind not in LEGACY_KINDS or not agent or not session:
        return None
    return Owner(agent_id=agent, session_key=session), kind


# --- keys used alone ---------------------------------------------------------------------
# Per-owner keys that no script combines with the card's keys (each command touches one
# key) carry the owner's own tag `{<agentId>:<sessionKey>}`: fine on a Cluster, and
# unchanged from the first layout, so nothing of theirs needs migrating.


def owner_tag(owner: Owner) -> str:
    return f"{{{owner.agent_id}:{owner.session_key}}}"


def hook_tasks(owner: Owner) -> str:
    """Hash of the Claude Code Task tools' list (hooks/tasks.py): `<taskId>:subject`,
    `<taskId>:status`, `<taskId>:activeForm`, one field each so an update is one HSET."""
    return f"{PREFIX}:{owner_tag(owner)}:hook:tasks"


HOOK_TASKS_TTL = 7 * 24 * 3600
"""Seconds a session's task list outlives its last change."""


# --- chat channels ---------------------------------------------------------------------
# State of a chat channel's adapter (channels/state/), under the channel's short name
# (`tg` for Telegram, `slack` for Slack). Per-owner keys carry the owner's own tag (above);
# per-destination and per-bot keys are global (`pc:<channel>:…`). A follow is remembered
# from both sides: the owner's followers (which destinations an event concerns) and the
# destination's follows (/unfollow, /card, /help), plus the set of destinations (start-up).


def channel_destinations(channel: str) -> str:
    """Set: ids of the destinations (chats, Slack channels) that follow at least one owner."""
    return f"{PREFIX}:{channel}:chats"


def channel_followers(channel: str, owner: Owner) -> str:
    """Set of "<destination> <thread>" following this owner (thread 0 or empty: none)."""
    return f"{PREFIX}:{owner_tag(owner)}:{channel}:followers"


def channel_draft(channel: str, owner: Owner, destination: int | str, thread: int | str) -> str:
    """JSON of the draft this owner has in one destination/thread (channels.drafts.DraftState)."""
    return f"{PREFIX}:{owner_tag(owner)}:{channel}:draft:{destination}:{thread}"


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


def channel_heard(channel: str, destination: int | str, thread: int | str) -> str:
    """The newest message someone else (a person, another bot) posted in the destination's
    thread (0 or "0": none): a draft above it moves down with its next update."""
    return f"{PREFIX}:{channel}:chat:{destination}:heard:{thread}"


def channel_sent(channel: str, destination: int | str) -> str:
    """Sorted set of the ids of recent messages the bot sent there (score = id): probing
    for an unsure send skips them."""
    return f"{PREFIX}:{channel}:chat:{destination}:sent"


def channel_no_rich(channel: str, bot_id: int | str) -> str:
    """Set (with a TTL) when the server rejected rich messages for this bot: why, as text."""
    return f"{PREFIX}:{channel}:bot:{bot_id}:norich"


def channel_paused(channel: str) -> str:
    """Hash: destination → "<next probe at, epoch s> <refusals in a row>" for each
    destination that refused the bot for good (blocked, kicked, archived): no calls to it
    until it speaks again or its probe is due. Its size is what `/metrics` counts."""
    return f"{PREFIX}:{channel}:paused"


def channel_asks(channel: str, destination: int | str) -> str:
    """Hash of the ask messages sent to the destination (channels/asks.py): askId → JSON
    {owner's display key, message id, thread, the state it shows}, and `m:<message id>` →
    askId (a typed reply finds its ask). A press is taken only for an ask found here, from
    the message it was sent as: a control copied from another chat changes nothing."""
    return f"{PREFIX}:{channel}:chat:{destination}:asks"


ASK_MESSAGES_TTL = 2 * 24 * 3600
"""Seconds a destination's ask messages are remembered after the last one was sent or edited
(an ask is kept a day after it ends)."""


def channel_ended(channel: str) -> str:
    """Set of "<destination> <thread> <displayKey>": follows ended from outside the
    adapter (`progresscast pairing revoke`), whose drafts the adapter's lanes delete."""
    return f"{PREFIX}:{channel}:ended"


# --- chat access ------------------------------------------------------------------------
# Who may see which session in chat (channels/chat/access.py), per platform (`telegram`,
# `slack`, …): one bot or several, a grant is the destination's. The pending codes and
# the grants share the platform's tag, so approving (code out, grant in) is one script.
# Strangers add nothing here but their pending code (at most `MAX_PENDING` at a time)
# and its issue time (at most `NEW_PER_HOUR`).


def access_tag(platform: str) -> str:
    return f"{{{PREFIX}:access:{platform}}}"


def access_pending(platform: str) -> str:
    """Hash: pairing code → "<destination> <issued at, Redis clock ms>"; expired ones are
    dropped whenever a code is issued, approved or listed."""
    return f"{PREFIX}:access:{access_tag(platform)}:pending"


def access_issued(platform: str) -> str:
    """Sorted set: pairing code → issued at (Redis clock ms), the codes issued in the last
    hour, which the hourly cap on new codes counts (at most `NEW_PER_HOUR` members)."""
    return f"{PREFIX}:access:{access_tag(platform)}:issued"


def access_grants(platform: str) -> str:
    """Hash: destination → JSON `{"sessions": [globs], "at": ms, "code": "…"}` — approved
    pairings (`progresscast pairing approve`)."""
    return f"{PREFIX}:access:{access_tag(platform)}:grants"


# --- Telegram ------------------------------------------------------------------------
# The Telegram adapter's keys are the chat-channel keys above under the name `tg`.

TG = "tg"
# Webhook mode (telegram/webhook.py): any gateway appends the updates Telegram posts to
# the bot's stream; the adapter that runs the bot reads them from its cursor. The
# stream and the set of seen update ids share the bot's tag, so one script does both.

TG_UPDATES_MAXLEN = 10_000
"""Updates kept in a bot's hand-off stream (`MAXLEN ~`)."""
TG_UPDATES_SEEN = 10_000
"""Update ids remembered per bot, so that Telegram's retries of one are dropped."""


def tg_bot_tag(bot_id: int | str) -> str:
    return f"{{{PREFIX}:{TG}:{bot_id}}}"


def _tg_bot_key(bot_id: int | str, name: str) -> str:
    """One of the bot's own keys: they share its tag (one slot), so one script may touch several."""
    return f"{PREFIX}:{TG}:bot:{tg_bot_tag(bot_id)}:{name}"


def tg_updates(bot_id: int) -> str:
    """Stream of the updates posted to the bot's webhook (field `update`: the JSON)."""
    return _tg_bot_key(bot_id, "updates")


def tg_updates_seen(bot_id: int) -> str:
    """Sorted set: update id → when it arrived (ms); the newest TG_UPDATES_SEEN are kept."""
    return _tg_bot_key(bot_id, "seen")


def tg_updates_cursor(bot_id: int) -> str:
    """The id of the last stream entry the adapter handled."""
    return _tg_bot_key(bot_id, "cursor")


def tg_webhook_bot(path: str) -> str:
    """String: the id of the bot whose webhook is this gateway path (set by its adapter
    before setWebhook), so that a gateway without the bot token knows where to hand over."""
    return f"{PREFIX}:{TG}:webhook:{path}"


def tg_namespace(bot_id: int | str, *, first: bool) -> str:
    """The channel name of one bot's state: the first bot (`[channels.telegram]`) keeps
    `tg`, so stores written before several bots existed keep working; each bot of
    `[[channels.telegram.bots]]` gets its own, by bot id (`tg-123456`)."""
    return TG if first else f"{TG}-{bot_id}"


def tg_lease(bot_id: int | str) -> str:
    """String with a TTL: which process holds the bot's lease (polls and edits for it).
    It carries the bot's tag, so the lease and its fence counter share a slot."""
    return _tg_bot_key(bot_id, "lease")


def tg_fence(bot_id: int | str) -> str:
    """Counter: bumped by every taking of the bot's lease; the holder's fence token."""
    return _tg_bot_key(bot_id, "fence")


# --- A2A followers ----------------------------------------------------------------------
# What `serve` remembers about each configured agent it follows (a2a/watch.py), so that
# a restart asks only for what changed since.


def a2a_agent_cursor(agent_key: str) -> str:
    """String: the newest `status.timestamp` (RFC 3339) seen from one followed agent;
    `agent_key` is the agent id and a digest of its URL."""
    return f"{PREFIX}:a2a:agent:{agent_key}:cursor"


# --- Slack ---------------------------------------------------------------------------
# The Slack adapter's keys: the chat-channel keys above under the name `slack`
# (destinations are channel ids, threads their `thread_ts`, the "bot" the workspace).

SLACK = "slack"


def slack_recipient(channel_id: str, thread_ts: str) -> str:
    """String `<user id> <team id>`: the person a thread's plan display streams to (the
    one who followed there with the plan display on)."""
    return f"{PREFIX}:{SLACK}:recipient:{channel_id}:{thread_ts}"


# --- Matrix --------------------------------------------------------------------------
# The Matrix adapter's keys: the chat-channel keys above under the name `matrix`
# (destinations are room ids, threads the event id of their root, the bot its user id).

MATRIX = "matrix"


def mx_bot_tag(user_id: str) -> str:
    return f"{{{PREFIX}:{MATRIX}:{user_id}}}"


def mx_since(user_id: str) -> str:
    """String: the `next_batch` token of the last /sync whose events were handled: a
    restarted reader goes on from there, neither replaying nor losing commands."""
    return f"{PREFIX}:{MATRIX}:bot:{mx_bot_tag(user_id)}:since"


def mx_lease(user_id: str) -> str:
    """String with a TTL: which process holds the bot account's lease (syncs and sends)."""
    return f"{PREFIX}:{MATRIX}:bot:{mx_bot_tag(user_id)}:lease"


def mx_fence(user_id: str) -> str:
    """Counter: bumped by every taking of the account's lease; the holder's fence token."""
    return f"{PREFIX}:{MATRIX}:bot:{mx_bot_tag(user_id)}:fence"


def mx_txn(user_id: str, room_id: str, content_digest: str) -> str:
    """String with a TTL: the transaction id of the last send of this content to this
    room. An unsure send is repeated with it, and the homeserver answers a repeated
    transaction with the event it made the first time instead of a second one."""
    return f"{PREFIX}:{MATRIX}:bot:{mx_bot_tag(user_id)}:txn:{room_id}:{content_digest}"


# --- Discord -------------------------------------------------------------------------
# The Discord adapter's keys: the chat-channel keys above under the name `discord`
# (destinations are channel and thread ids; the thread part of a key is always "0").

DISCORD = "discord"

CHAT_CHANNELS = (TG, SLACK, DISCORD, MATRIX)
"""The chat channels' names in keys: each keeps an owner's followers (`channel_followers`)."""
