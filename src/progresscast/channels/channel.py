"""What a chat channel plugs in (see docs/channels.md).

A channel supplies four things; everything else (follows, draft state and lifecycle,
decisions, coalescing, lanes, pacing, fault handling) is shared in `channels/`:

1. its **renderer** — pure, in `render/`: view + settings → `Payload` with its own
   fallbacks (`Renderers`, made per destination by `Channel.renderers`);
2. a **client** — payload → API calls, reply → `Outcome` (`Client`);
3. its **budgets** — per destination, per bot or workspace (`pacing.Budgets`);
4. its **command surface** — follow/unfollow/card/mode/rich/help, calling the worker's
   `followed`, `touch`, `say` and `send_once`.
"""

from __future__ import annotations

from typing import Protocol

from ..render.payload import Payload
from .conduct import Conduct
from .drafts import Intent, Renderers
from .outcome import MessageId, Outcome
from .pacing import Budgets
from .state import ChannelState, ChatPrefs, DraftKey, Id


class Client(Protocol):
    """The channel's API calls; every reply (or exception) becomes an `Outcome`."""

    async def send(
        self, chat_id: Id, thread_id: Id, payload: Payload, *, reply_to: MessageId | None = None, silent: bool = False
    ) -> Outcome:
        """A new message in the destination/thread; `ok` carries its id. `reply_to`: the
        message it answers (a ping replies to the live draft; sent even when that is
        gone); `silent`: without a notification (drafts), where the channel can say so."""
        ...

    async def edit(self, chat_id: Id, message_id: MessageId, payload: Payload) -> Outcome: ...

    async def delete(self, chat_id: Id, message_id: MessageId) -> Outcome: ...

    async def probe(self, chat_id: Id, message_id: int, intent: Intent) -> Outcome:
        """Did the unsure send `intent` land as `message_id`? `found`, `absent`, or
        `foreign` (someone else's message: the next id is tried). A probe that changed
        a message of ours we did not know of answers `foreign` with its `message_id`."""
        ...

    async def say(self, chat_id: Id, thread_id: Id, text: str) -> Outcome:
        """A plain-text one-off message (command replies)."""
        ...

    def said(self, thread_id: Id, text: str) -> Payload:
        """What `say` sends, as a payload: what a probe for an unsure reply re-applies."""
        ...


class Channel(Protocol):
    @property
    def name(self) -> str:
        """Short name, for log lines and task names (`telegram`, `slack`)."""
        ...

    @property
    def state(self) -> ChannelState: ...

    @property
    def client(self) -> Client: ...

    @property
    def budgets(self) -> Budgets: ...

    @property
    def keep_on_complete(self) -> bool: ...

    def conduct(self, chat_id: Id) -> Conduct:
        """The destination's pings, start delay and staying at the bottom (its own
        `notify`, else the channel's), on the time scale."""
        ...

    @property
    def block_chars(self) -> int:
        """`block` mode: a preview past this many characters rotates to a new message."""
        ...

    def allowed(self, chat_id: Id) -> bool:
        """May this destination get drafts and run commands (`allowedChats`)?"""
        ...

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> Renderers:
        """The renderer for this destination's settings (mode, rich, limits); `prefs`:
        its overrides when already read (else they are read)."""
        ...

    async def config_follows(self) -> list[DraftKey]:
        """Follows the config file asks for (subscribed at start-up)."""
        ...

    async def unsupported(self, detail: str) -> None:
        """The server does not offer what a payload used (rich messages): stop using
        it for the bot, logged once."""
        ...


__all__ = ["Channel", "Client"]
