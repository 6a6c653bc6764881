"""The Slack channel on the shared worker: its renderer, client, budgets and settings
plugged into `channels.ChannelWorker` (which does everything else).

A destination is a Slack channel (`C…`); a thread in it (`thread_ts`) is like a
Telegram forum topic, and "0" stands for none. The plan display applies in a thread
whose follower it streams to (Slack requires a recipient in channels): a follow made
with the plan display on opens such a thread (see `commands.py`); the workspace's
refusal of it is remembered for a day, and its drafts are Block Kit meanwhile. A channel's settings: its
`/progresscast mode` and `/progresscast rich` override, else its
`[[channels.slack.channels]]` entry, else the app-wide settings.

Budgets: about one call a second per channel (`chat.postMessage` is paced per
channel, and a channel's updates come from one lane), and 50 calls a minute for the
workspace — `chat.update` and `chat.delete` are Tier 3, 50+ a minute per workspace.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass

from redis.asyncio import Redis

from ..channels.access import AccessPolicy, AccessStore
from ..channels.destinations import RenderSettingsCache, config_follows
from ..channels.pacing import Budgets
from ..channels.state import ChannelState, ChatPrefs, DraftKey, Id
from ..config.settings import RenderSettings, Settings, SlackSettings
from ..render.slack_payload import Recipient, SlackRenderers
from ..store import keys
from ..store.retention import retention_ms
from .client import SlackClient

log = logging.getLogger("progresscast.slack")

NO_THREAD = "0"
PLATFORM = "slack"


@dataclass(frozen=True)
class SlackPace:
    channel_interval: float = 1.0
    """Seconds between two calls to one channel (≈ 1 post a second per channel)."""
    workspace_rate: float = 50 / 60
    """Calls a second for the whole workspace (Tier 3: 50 a minute)."""
    retry_after_cap: float = 60.0

    def budgets(self) -> Budgets:
        def interval(_: Hashable) -> float:
            return self.channel_interval

        return Budgets(interval=interval, bot_rate=self.workspace_rate, retry_after_cap=self.retry_after_cap)


class SlackState(ChannelState):
    def __init__(self, redis: Redis) -> None:
        super().__init__(redis, keys.SLACK, str)

    async def set_recipient(self, channel_id: str, thread_ts: str, recipient: Recipient) -> None:
        await self.redis.set(
            keys.slack_recipient(channel_id, thread_ts), f"{recipient.user_id} {recipient.team_id}",
            px=await retention_ms(self.redis) or None,  # made by a follow: it lives as long
        )

    async def forget_recipient(self, channel_id: str, thread_ts: str) -> None:
        await self.redis.delete(keys.slack_recipient(channel_id, thread_ts))

    async def recipient(self, channel_id: str, thread_ts: str) -> Recipient | None:
        raw = await self.redis.get(keys.slack_recipient(channel_id, thread_ts))
        user, _, team = str(raw or "").partition(" ")
        return Recipient(user, team) if user and team else None


class SlackChannel:
    """`channels.Channel` for one Slack app in one workspace."""

    name = PLATFORM
    no_thread: Id = NO_THREAD

    def __init__(self, settings: Settings, redis: Redis, client: SlackClient, team_id: str, pace: SlackPace) -> None:
        slack = settings.channels.slack
        if slack is None:
            raise ValueError("channels.slack is not configured")
        self.settings = settings
        self.slack: SlackSettings = slack
        self.platform: SlackSettings = slack
        self._render_settings = RenderSettingsCache(slack)
        self.access = AccessPolicy(PLATFORM, slack, settings.agents, AccessStore(redis, PLATFORM))
        self.team_id = team_id
        self.state = SlackState(redis)
        self.client = client
        self.budgets = pace.budgets()
        self.keep_on_complete = slack.keepOnComplete
        self.block_chars = slack.streaming.blockChars

    async def load(self) -> None:
        pass  # the plan display's refusal is read when needed (it expires after a day)

    async def rich_refused(self) -> str | None:
        """Why this workspace refused the plan display (None: it did not), remembered a day."""
        return await self.state.rich_refused(self.team_id or "workspace")

    async def render_settings(self, channel_id: Id, prefs: ChatPrefs | None = None) -> RenderSettings:
        if prefs is None:
            prefs = await self.state.prefs(channel_id)
        return self._render_settings.get(channel_id, prefs, rich_available=not await self.rich_refused())

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> SlackRenderers:
        """The plan display applies in a thread whose follower it streams to; elsewhere
        (and where the workspace refused it) the draft is Block Kit."""
        thread = str(key.thread_id) if str(key.thread_id) not in ("", NO_THREAD) else None
        settings = await self.render_settings(str(key.chat_id), prefs)
        recipient = await self.state.recipient(str(key.chat_id), thread) if thread and settings.rich else None
        return SlackRenderers(settings, thread, self.settings.templates.dir, recipient)

    async def config_follows(self) -> list[DraftKey]:
        """`channels.slack.channels[].follow`: subscribed at start-up (idempotent)."""
        return config_follows(self.slack, self.settings.agents, no_thread=NO_THREAD, log=log)

    async def unsupported(self, detail: str) -> None:
        log.warning("Slack refused the plan display (%s): Block Kit for this workspace", detail)
        await self.state.refuse_rich(self.team_id or "workspace", detail or "rejected")


__all__ = ["NO_THREAD", "PLATFORM", "SlackChannel", "SlackPace", "SlackState"]
