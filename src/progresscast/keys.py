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

from .owners import Owner

PREFIX = "pc"

DEFAULT_SHARDS = 16
EVENTS_MAXLEN = 100_000
"""Entries kept per shard stream (`MAXLEN ~`)."""

SHARDS = f"{PREFIX}:shards"
"""The store's shard count, recorded on first use; a differing config is overruled."""
MIGRATION_LOCK = f"{PREFIX}:migrating"
"""Held (with a TTL) while one process moves a store from the first layout."""


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

    def epoch(self, owner: Owner) -> str:
        """Reset epoch: bumped by every reset; a write admitted under an older one is refused."""
        return self._key(owner, "epoch")

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

    def owner_keys(self, owner: Owner) -> list[str]:
        return [
            self.card(owner),
            self.revision(owner),
            self.epoch(owner),
            self.run(owner),
            self.activity(owner),
            self.tools(owner),
            self.last_event(owner),
        ]


# --- the first layout ------------------------------------------------------------------
# One global stream and index, keys tagged per owner. Read only to migrate a store
# written by it (migrate.py).

LEGACY_EVENTS = f"{PREFIX}:events"
LEGACY_OWNERS = f"{PREFIX}:owners"


def legacy_owner_keys(owner: Owner) -> dict[str, str]:
    """kind → the first layout's key of that kind for `owner`."""
    tag = f"{{{owner.agent_id}:{owner.session_key}}}"
    return {kind: f"{PREFIX}:{tag}:{kind}" for kind in ("card", "rev", "epoch", "run", "activity", "tools")}


# --- Telegram ------------------------------------------------------------------------
# State of the Telegram adapter (telegram/follows.py). Per-owner keys carry the owner's
# hash tag; per-chat and per-bot keys are global (`pc:tg:…`). A follow is remembered
# from both sides: the owner's followers (which chats an event concerns) and the
# chat's follows (/unfollow, /card, /help), plus the set of chats (start-up).
# (Each is used alone, so they keep the owner's own tag.)

TG_CHATS = f"{PREFIX}:tg:chats"
"""Set: ids of the chats that follow at least one owner."""


def _owner_tag(owner: Owner) -> str:
    return f"{{{owner.agent_id}:{owner.session_key}}}"


def tg_followers(owner: Owner) -> str:
    """Set of "<chatId> <threadId>" following this owner (threadId 0: no forum topic)."""
    return f"{PREFIX}:{_owner_tag(owner)}:tg:followers"


def tg_draft(owner: Owner, chat_id: int, thread_id: int) -> str:
    """JSON of the draft this owner has in one chat/topic (drafts.DraftState)."""
    return f"{PREFIX}:{_owner_tag(owner)}:tg:draft:{chat_id}:{thread_id}"
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
