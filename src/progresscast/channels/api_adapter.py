"""What an adapter on a platform's HTTP API (Discord, Slack) is tuned by, and how it
runs: it learns who the bot is (retried while the API is unreachable), then the
worker runs until the adapter is cancelled."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

from ..backoff import Backoff
from .worker import ChannelWorker


@dataclass(frozen=True)
class ApiOptions:
    timeout: float = 10.0
    """Seconds a call may take: past it, a send is unsure and looked for."""
    backoff: Backoff = field(default_factory=Backoff)
    """How the first call (who the bot is) is retried while the API is unreachable."""


async def work_until_cancelled(
    worker: ChannelWorker, started: asyncio.Event, identify: Callable[[], Awaitable[None]],
    running: Callable[[], str], log: logging.Logger,
) -> None:
    """`identify()` (who the bot is), then the worker until cancelled: `started` is set
    and `running()` logged once it runs; the worker is closed on the way out."""
    try:
        await identify()
        await worker.start()  # says what strangers get (`access`)
        started.set()
        log.info("%s", running())
        await asyncio.Event().wait()
    finally:
        await worker.close()


__all__ = ["ApiOptions", "work_until_cancelled"]
