"""What every part of a channel worker shares (`ChannelWorker`: intake, lanes, drafts,
one-off messages, the effects of replies): one destination's pace and pause, the calls
in flight, the clock and the log all parts agree on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

from ...failure_log import FailureLog
from ..channel import Channel
from ..chat.pause import Pauses
from ..pacing import Pacer
from ..state.holder import ChannelState
from ..worker_options import WorkerOptions


@dataclass(frozen=True)
class WorkerContext:
    channel: Channel
    options: WorkerOptions
    pacer: Pacer
    pauses: Pauses
    """Destinations that refused the bot for good (`channels.pause`)."""
    calls: asyncio.Semaphore
    """Held from the read at a slot until the call returns (`WorkerOptions.calls_in_flight`)."""
    clock: Callable[[], float]
    log: logging.Logger
    failures: FailureLog

    @property
    def state(self) -> ChannelState:
        return self.channel.state


__all__ = ["WorkerContext"]
