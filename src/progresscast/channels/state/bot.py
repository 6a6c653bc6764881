"""The bot's own facts in a chat channel: the server refused its rich messages."""

from __future__ import annotations

from typing import cast

from ...store import keys
from .ids import Id
from .scope import Scope

NO_RICH_TTL = 24 * 3600
"""How long the adapter remembers that the server rejected rich messages: a server
upgraded since is tried again after a day (one refused call)."""


class BotState:
    """What a server told of a bot (a Telegram bot, a Slack workspace), by its id. A fact
    the server told, true whoever holds the lease: written unchecked."""

    def __init__(self, scope: Scope) -> None:
        self.scope = scope

    async def rich_refused(self, bot_id: Id) -> str | None:
        """Why the server refused rich messages lately (None: it did not)."""
        return cast("str | None", await self.scope.redis.get(keys.channel_no_rich(self.scope.channel, bot_id)))

    async def refuse_rich(self, bot_id: Id, reason: str) -> None:
        await self.scope.redis.set(
            keys.channel_no_rich(self.scope.channel, bot_id), reason or "rejected", ex=NO_RICH_TTL
        )


__all__ = ["NO_RICH_TTL", "BotState"]
