"""What a chat channel plugs in (see docs/channels.md).

A channel supplies four things; everything else (follows, draft state and lifecycle,
decisions, coalescing, lanes, pacing, fault handling) is shared in `channels/`:

1. its **renderer** — pure, in `render/`: view + settings → `Payload` with its own
   fallbacks (`Renderers`, made per destination by `Channel.renderers`);
2. a **client** — payload → API calls, reply → `Outcome` (`Client`);
3. its **budgets** — per destination, per bot or workspace (`pacing.Budgets`);
4. its **command transport** — what arrives (updates, signed requests) turned into a
   `commands.Invocation`, handed to the one `commands.ChatCommands`, and the reply
   sent back (see `channels/chat/commands.py`).

Per-destination settings (`destinations.py`) and access (`access.py`) are shared too:
the channel hands them its `platform` settings and its `access` policy.
"""

from __future__ import annotations

from typing import Protocol

from ..config.base import PlatformSettings, RenderSettings
from ..render.payload import Payload
from .chat.access import AccessPolicy
from .draft.decide import Renderers
from .draft.outcome import MessageId, Outcome
from .draft.state import Intent
from .pacing import Budgets
from .state.holder import ChannelState
from .state.ids import DraftKey, Id
from .state.prefs import ChatPrefs


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

    @property
    def block_chars(self) -> int:
        """`block` mode: a preview past this many characters rotates to a new message."""
        ...

    @property
    def platform(self) -> PlatformSettings:
        """`[channels.<platform>]`: what `destinations.py` resolves a destination's settings from."""
        ...

    @property
    def access(self) -> AccessPolicy:
        """Who may see which session (grants, pairing, refusals)."""
        ...

    @property
    def no_thread(self) -> Id:
        """The thread id meaning "none" (Telegram 0, Slack "0")."""
        ...

    async def render_settings(self, chat_id: Id, prefs: ChatPrefs | None = None) -> RenderSettings:
        """The destination's settings (`destinations.render_settings`, with what the
        server supports); `prefs`: its overrides when already read."""
        ...

    async def rich_refused(self) -> str | None:
        """Why the server refused rich drafts lately (None: it did not)."""
        ...

    async def load(self) -> None:
        """Read what the channel remembers (a refusal of rich drafts) before the worker starts."""
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
