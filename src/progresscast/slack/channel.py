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
from dataclasses import dataclass

from redis.asyncio import Redis

from ..channels.base import EvenPace, PlatformChannel
from ..channels.state.holder import ChannelState
from ..channels.state.ids import DraftKey
from ..channels.state.prefs import ChatPrefs
from ..config.settings import Settings
from ..config.slack import SlackSettings
from ..render.slack_payload import Recipient, SlackRenderers
from ..store import keys
from ..store.retention import retention_ms
from .client import SlackClient

log = logging.getLogger("progresscast.slack")

NO_THREAD = "0"
PLATFORM = "slack"


@dataclass(frozen=True)
class SlackPace(EvenPace):
    """About one call a second per channel; 50 calls a minute for the whole workspace
    (Tier 3)."""

    bot_rate: float = 50 / 60


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


class SlackChannel(PlatformChannel[SlackSettings]):
    """`channels.Channel` for one Slack app in one workspace."""

    name = PLATFORM
    no_thread = NO_THREAD
    log = log
    state: SlackState

    def __init__(self, settings: Settings, redis: Redis, client: SlackClient, team_id: str, pace: SlackPace) -> None:
        super().__init__(settings, redis, settings.channels.slack, SlackState(redis), pace.budgets())
        self.team_id = team_id
        self.client = client

    async def load(self) -> None:
        pass  # the plan display's refusal is read when needed (it expires after a day)

    async def rich_refused(self) -> str | None:
        """Why this workspace refused the plan display (None: it did not), remembered a day."""
        return await self.state.bot.rich_refused(self.team_id or "workspace")

    async def renderers(self, key: DraftKey, prefs: ChatPrefs | None = None) -> SlackRenderers:
        """The plan display applies in a thread whose follower it streams to; elsewhere
        (and where the workspace refused it) the draft is Block Kit."""
        thread = self.thread_of(key)
        settings = await self.render_settings(str(key.chat_id), prefs)
        recipient = await self.state.recipient(str(key.chat_id), thread) if thread and settings.rich else None
        return SlackRenderers(settings, thread, self.settings.templates.dir, recipient)

    async def unsupported(self, detail: str) -> None:
        log.warning("Slack refused the plan display (%s): Block Kit for this workspace", detail)
        await self.state.bot.refuse_rich(self.team_id or "workspace", detail or "rejected")


__all__ = ["NO_THREAD", "PLATFORM", "SlackChannel", "SlackPace", "SlackState"]
