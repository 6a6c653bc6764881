"""The Slack adapter: the draft worker on the change stream, and the command routes
the gateway serves, run together on the caller's event loop.

    adapter = SlackAdapter(settings, redis)
    routes = adapter.routes()          # POST /slack/commands, /slack/events, /slack/interactions
    await adapter.run()                # until cancelled

`auth.test` first (retried while Slack is unreachable; a bad token stops the
adapter), then the worker: `[[channels.slack.channels]]` follows are subscribed, every
follow is looked at once (a restart catches up), and then every change event.
State lives in Redis, so a restarted adapter keeps editing the same messages.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from redis.asyncio import Redis
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient
from starlette.routing import Route

from ..backoff import retrying
from ..channels.api_adapter import ApiOptions, work_until_cancelled
from ..channels.worker import ChannelWorker, WorkerOptions
from ..config.errors import ConfigError
from ..config.settings import Settings
from .channel import SlackChannel, SlackPace
from .client import SlackClient
from .commands import SlackCommands
from .sessions import AgentSessions

log = logging.getLogger("progresscast.slack")

REFUSED_TOKEN = ("invalid_auth", "not_authed", "account_inactive", "token_revoked")
"""auth.test's errors for a token that will not work however often it is tried."""


@dataclass(frozen=True)
class SlackOptions(ApiOptions):
    pace: SlackPace = field(default_factory=SlackPace)
    worker: WorkerOptions = field(default_factory=lambda: WorkerOptions(group="slack"))


class SlackAdapter:
    def __init__(self, settings: Settings, redis: Redis, *, options: SlackOptions | None = None) -> None:
        slack = settings.channels.slack
        if slack is None or not slack.token:
            raise ValueError("channels.slack.token is not set")
        self.options = options or SlackOptions()
        # No retry handlers: slack_sdk would repeat a post whose outcome is unknown.
        self.web = AsyncWebClient(
            token=slack.token, base_url=slack.apiBaseUrl, timeout=int(max(self.options.timeout, 1)), retry_handlers=[]
        )
        self.client = SlackClient(self.web)
        self.channel = SlackChannel(settings, redis, self.client, "", self.options.pace)
        self.worker = ChannelWorker(self.channel, redis, options=self.options.worker, log=log)
        self.sessions = AgentSessions(self.worker, self.channel, self.client) if slack.agentSessions else None
        """Slack's agent session of each follow's thread (`agentSessions`; None: off)."""
        if self.sessions is not None:
            self.worker.watchers.append(self.sessions.saw)
        self.commands = SlackCommands(settings, self.worker, self.client, agent_sessions=slack.agentSessions)
        self.started = asyncio.Event()

    def routes(self) -> list[Route]:
        return self.commands.routes()

    async def _identify(self) -> None:
        """auth.test: the workspace and the app's user; retried while Slack is unreachable."""

        async def attempt() -> None:
            try:
                reply = await self.web.auth_test()
            except SlackApiError as exc:
                if exc.response.get("error") in REFUSED_TOKEN:
                    # A mistake in the configuration: it ends `serve` (one line, exit 2).
                    raise ConfigError(f"channels.slack.token: Slack says {exc.response.get('error')}") from None
                raise
            self.channel.team_id = str(reply.get("team_id") or "")
            self.client.bot_user_id = str(reply.get("user_id") or "") or None
            self.client.bot_id = str(reply.get("bot_id") or "") or None

        await retrying(attempt, "cannot reach Slack", log=log, backoff=self.options.backoff, give_up=(ConfigError,))

    async def run(self) -> None:
        """Run until cancelled."""
        try:
            await work_until_cancelled(
                self.worker, self.started, self._identify,
                lambda: f"Slack adapter running in workspace {self.channel.team_id}", log,
            )
        finally:
            if self.sessions is not None:
                self.sessions.close()


__all__ = ["SlackAdapter", "SlackOptions"]
