"""The Discord adapter: the draft worker on the change stream, and the interactions
route the gateway serves, run together on the caller's event loop.

    adapter = DiscordAdapter(settings, redis)
    routes = adapter.routes()          # POST /discord/interactions (gateway)
    await adapter.run()                # until cancelled

REST only (`rest.py`; no gateway WebSocket: drafts need none, and commands arrive as
HTTP interactions). `GET /users/@me` first (retried while Discord
is unreachable; a refused token stops the adapter), then the worker:
`[[channels.discord.channels]]` follows are subscribed, every follow is looked at once
(a restart catches up), and then every change event. Buttons pressed on asks and on a
draft's Stop arrive as interactions too (`presses.py`). State lives in Redis, so a
restarted adapter keeps editing the same messages.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from functools import partial

from redis.asyncio import Redis
from starlette.routing import Route

from ..backoff import retrying
from ..channels.api_adapter import ApiOptions, work_until_cancelled
from ..channels.worker import ChannelWorker, WorkerOptions
from ..config.errors import ConfigError
from ..config.settings import Settings
from .breaker import Breaker, BreakerSettings
from .channel import DiscordChannel, DiscordPace
from .client import DiscordClient
from .commands import SURFACE, DiscordCommands
from .interactions import DiscordInteractions
from .presses import DiscordPresses
from .rest import DiscordHTTPError, DiscordREST

log = logging.getLogger("progresscast.discord")


@dataclass(frozen=True)
class DiscordOptions(ApiOptions):
    pace: DiscordPace = field(default_factory=DiscordPace)
    worker: WorkerOptions = field(default_factory=lambda: WorkerOptions(group="discord"))
    breaker: BreakerSettings = field(default_factory=BreakerSettings)


class DiscordAdapter:
    def __init__(self, settings: Settings, redis: Redis, *, options: DiscordOptions | None = None) -> None:
        discord = settings.channels.discord
        if discord is None or not discord.token:
            raise ValueError("channels.discord.token is not set")
        if not discord.publicKey:
            raise ValueError("channels.discord.publicKey is not set")
        self.discord = discord
        self.token: str = discord.token
        self.options = options or DiscordOptions()
        self.client = DiscordClient(breaker=Breaker(self.options.breaker, log=log))
        self.channel = DiscordChannel(settings, redis, self.client, self.options.pace)
        self.worker = ChannelWorker(self.channel, redis, options=self.options.worker, log=log)
        self.commands = DiscordCommands(self.worker)
        self.worker.presses.noun = SURFACE.noun  # "Only this channel's administrators …"
        self.presses = DiscordPresses(self.worker, settings.templates.dir)
        self.interactions = DiscordInteractions(discord.publicKey, self.commands.answer, self.presses.receive)
        self.started = asyncio.Event()

    def routes(self) -> list[Route]:
        return self.interactions.routes()

    async def _identify(self, rest: DiscordREST) -> None:
        """`GET /users/@me`: the bot's own id; retried while Discord is unreachable."""

        async def attempt() -> None:
            try:
                me = await rest.request("GET", "/users/@me")
            except DiscordHTTPError as exc:
                if exc.status == 401:
                    raise ConfigError("channels.discord.token: Discord refused it (401 Unauthorized)") from None
                raise
            self.client.bot_user_id = str(me["id"])

        await retrying(
            attempt, "cannot reach Discord", log=log, backoff=self.options.backoff, give_up=(ConfigError,),
            describe=lambda exc: f"it answered {exc}" if isinstance(exc, DiscordHTTPError) else exc,
        )

    async def run(self) -> None:
        """Run until cancelled."""
        # No retries below the client: a create whose outcome is unknown must be looked
        # for, not repeated; a rate limit is the pacer's to wait out (see client.py).
        rest = DiscordREST(
            self.discord.apiBaseUrl, self.token, timeout=self.options.timeout,
            max_connections=self.options.worker.calls_in_flight,
        )
        self.client.rest = rest
        try:
            await work_until_cancelled(
                self.worker, self.started, partial(self._identify, rest),
                lambda: f"Discord adapter running as user {self.client.bot_user_id}", log,
            )
        finally:
            self.client.rest = None
            await rest.close()


__all__ = ["DiscordAdapter", "DiscordOptions"]
