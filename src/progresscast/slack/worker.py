"""The Slack adapter's draft worker: the shared channel worker on a Slack channel."""

from __future__ import annotations

import logging

from redis.asyncio import Redis

from ..channels.worker import ChannelWorker, WorkerOptions
from .channel import SlackChannel, SlackState

log = logging.getLogger("progresscast.slack")


class SlackWorker(ChannelWorker):
    """The Slack adapter's draft worker."""

    def __init__(self, channel: SlackChannel, redis: Redis, options: WorkerOptions) -> None:
        super().__init__(channel, redis, options=options, log=log)
        self.slack_channel = channel
        self.state: SlackState = channel.state
