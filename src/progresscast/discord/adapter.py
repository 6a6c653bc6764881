"""The Discord adapter: the draft worker on the change stream, and the interactions
route the gateway serves, run together on the caller's event loop.

    adapter = DiscordAdapter(settings, redis)
    routes = adapter.routes()          # POST /discord/interactions (gateway)
    await adapter.run()                # until cancelled

REST only (`rest.py`; no gateway WebSocket: drafts need none, and commands arrive as
HTTP interactions). `GET /users/@me` first (retried while Discord
is unreachable; a refused token stops the adapter), then the worker:
`[[channels.discord.channels]]` follows are subscribed, every follow is looked at once
(a restart catches up), and then every change event. State lives in Redis, so a
restarted adapter keeps editing the same messages.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from redis.asyncio import Redis
from starlette.routing import Route

from ..backoff import Backoff
from ..channels.worker import ChannelWorker, WorkerOptions
from ..config.errors import ConfigError
from ..config.settings import Settings
from ..stopping import still_wanted
from .breaker import Breaker, BreakerSettings
from .channel import DiscordChannel, DiscordPace
from .client import DiscordClient
from .commands import DiscordCommands
from .interactions import DiscordInteractions
from .rest import DiscordHTTPError, DiscordREST

log = logging.getLogger("progresscast.discord")


@dataclass(frozen=True)
class DiscordOptions:
    pace: DiscordPace = field(default_factory=DiscordPace)
    timeout: float = 10.0
    """Seconds a call may take: past it, a create is unsure and looked for."""
    worker: WorkerOptions = field(default_factory=lambda: WorkerOptions(group="discord"))
    backoff: Backoff = field(default_factory=Backoff)
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
        self.interactions = DiscordInteractions(discord.publicKey, self.commands.answer)
        self.started = asyncio.Event()

    def routes(self) -> list[Route]:
        return self.interactions.routes()

    async def _identify(self, rest: DiscordREST) -> None:
        """`GET /users/@me`: the bot's own id; retried while Discord is unreachable."""
        failures = 0
        while True:
            still_wanted()
            try:
                me = await rest.request("GET", "/users/@me")
                self.client.bot_user_id = str(me["id"])
                return
            except DiscordHTTPError as exc:
                if exc.status == 401:
                    raise ConfigError("channels.discord.token: Discord refused it (401 Unauthorized)") from None
                delay = self.options.backoff.delay(failures)
                log.warning("Discord answered %s; retrying in %.0f s", exc, delay)
            except Exception as exc:  # Discord unreachable
                delay = self.options.backoff.delay(failures)
                log.warning("cannot reach Discord (%s); retrying in %.0f s", exc, delay)
            failures += 1
            await asyncio.sleep(delay)

    async def run(self) -> None:
        """Run until cancelled."""
        # No retries below the client: a create whose outcome is unknown must be looked
        # for, not repeated; a rate limit is the pacer's to wait out (see client.py).
        rest = DiscordREST(
            self.discord.apiBaseUrl, self.token, timeout=self.options.timeout,
            max_connections=self.options.worker.calls_in_flight,
        )
        try:
            self.client.rest = rest
            await self._identify(rest)
            await self.worker.start()  # says what strangers get (`access`)
            self.started.set()
            log.info("Discord adapter running as user %s", self.client.bot_user_id)
            await asyncio.Event().wait()
        finally:
            await self.worker.close()
            self.client.rest = None
            await rest.close()


__all__ = ["DiscordAdapter", "DiscordOptions"]
