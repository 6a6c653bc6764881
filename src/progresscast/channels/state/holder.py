"""`ChannelState`: a chat channel's state in Redis, one part per concept, made once per
adapter; and `DraftFollowing`, the one read that crosses the parts."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis

from ...store import keys
from ...store.lease import Fence
from ..draft.state import DraftState
from .bot import BotState
from .drafts import Drafts
from .follows import Follows
from .ids import DraftKey, Id
from .messages import MessageIds
from .prefs import ChatPrefs, Prefs, prefs_of
from .scope import Scope


@dataclass(frozen=True)
class DraftFollowing:
    """What a decision about a draft reads here, in one round trip with its view."""

    state: DraftState
    following: bool
    """Whether the draft's destination/thread follows the owner."""
    prefs: ChatPrefs
    """The destination's overrides."""
    below: Id | None
    """The newest message someone else posted below the draft (`MessageIds.heard`)."""
    mark: int
    """The destination's newest message id (`MessageIds.last`): a first send's mark."""


class ChannelState:
    """Every part of one channel's state, sharing one `Scope` (its key prefix, lease and
    renewals)."""

    def __init__(
        self, redis: Redis, channel: str, parse_id: Callable[[str], Id] = int, *, fence: Fence | None = None,
        ordered_ids: bool = True,
    ) -> None:
        self.redis = redis
        self.channel = channel
        self.parse_id = parse_id
        self.ordered_ids = ordered_ids
        """The channel's message ids grow with time (`MessageIds.ordered_ids`)."""
        self.fence = fence
        """The bot's lease (None: no lease): what each part's writes check (`Scope.fence`)."""
        self.scope = scope = Scope(redis, channel, parse_id, fence)
        self.follows = Follows(scope)
        self.prefs = Prefs(scope)
        self.drafts = Drafts(scope)
        self.messages = MessageIds(scope, ordered_ids=ordered_ids)
        self.bot = BotState(scope)

    def queue_draft_following(self, key: DraftKey, pipe: Any) -> None:
        """Queue the reads of `DraftFollowing` on a pipeline, for one round trip with
        the view the draft shows (`CardStore.view_with`; on a Cluster, one per node)."""
        self.drafts.queue_of(key, pipe)
        self.follows.queue_has(key, pipe)
        self.prefs.queue_of(key.chat_id, pipe)
        self.messages.queue_heard(key.chat_id, key.thread_id, pipe)
        self.messages.queue_last(key.chat_id, pipe)
        self.messages.queue_sent_exists(key.chat_id, pipe)

    def draft_following_of(self, key: DraftKey, replies: list[Any]) -> DraftFollowing:
        """`DraftFollowing` made of the replies to `queue_draft_following`."""
        raw, following, prefs, heard, last, sent = replies
        # The destination's keys this read found not made yet: the draft's next write
        # does not renew them (a new destination's first draft, one round trip less).
        c, chat = self.channel, key.chat_id
        found = (
            (keys.channel_prefs(c, chat), prefs), (keys.channel_last_message(c, chat), last),
            (keys.channel_sent(c, chat), sent),
        )
        missing = [name for name, reply in found if not reply]
        if missing:
            self.scope.missing(*missing)
        return DraftFollowing(
            state=self.drafts.current(key, raw),
            following=bool(following),
            prefs=prefs_of(prefs),
            below=self.messages.heard_mark(heard) if heard else None,
            mark=int(last or 0),
        )


__all__ = ["ChannelState", "DraftFollowing"]
