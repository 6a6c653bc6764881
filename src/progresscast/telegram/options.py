"""What can be tuned in the Telegram adapter besides the config file.

The defaults are the production values (Telegram's limits, python-telegram-bot's
timeouts); tests shorten only the timeouts they provoke, and scale pacing with
`PROGRESSCAST_TIME_SCALE`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from ..backoff import Backoff
from ..channels.worker import WorkerOptions
from ..config.telegram import TelegramSettings
from ..store import keys
from ..store.lease import Fence
from .pacing import Pace

MIN_POOL = 16
"""The fewest connections to the Bot API (python-telegram-bot's own pool, before it was
sized from the budget)."""


@dataclass(frozen=True)
class AdapterOptions:
    pace: Pace = field(default_factory=Pace)
    read_timeout: float = 5.0
    """Seconds to wait for a Bot API answer (python-telegram-bot's default)."""
    write_timeout: float = 5.0
    connect_timeout: float = 5.0
    pool_timeout: float = 3.0
    connection_pool_size: int | None = None
    """Concurrent Bot API requests besides long polling (one per busy chat). None: enough
    for the bot-wide budget at `round_trip` (`pool_size`), at least `MIN_POOL`."""
    round_trip: float = 0.3
    """Seconds a call holds its connection (from the read at its slot to its answer)
    that still let the calls in flight carry the whole bot-wide budget: each holds one
    for a round trip, so 30 calls a second at 0.15 s keep ≈ 5 open, 1,000 ≈ 150. Real
    round trips to the Bot API are 0.02–0.3 s."""
    poll_timeout: int = 10
    """Long-polling timeout of getUpdates, in seconds."""
    settle: float = 3.0
    """After a first send whose outcome is unknown, wait this long before probing for
    it: a request still in flight at the server may land meanwhile."""
    max_probes: int = 5
    """Message ids probed for an unsure send before it is taken as not landed."""
    backoff: Backoff = field(default_factory=Backoff)
    """Between retries after network errors and 5xx (the one policy, backoff.py)."""
    lane_idle: float = 120.0
    """Seconds a chat's lane (its task) waits with nothing to do before it ends; a new
    one starts on demand."""
    remember: int = 10_000
    """At most this many log-once keys: the oldest are forgotten."""
    group: str = "telegram"
    """Consumer group on the change stream."""
    consumer: str | None = None
    """Consumer name; default the host name, so a restarted adapter re-reads what it
    had received but not acknowledged."""
    catch_up: int = 32
    """Drafts looked at together when every follow is read again (start-up): at least
    this many, and as many as calls may be in flight (`pool_size`) — a draft is looked
    at until its call is answered, so fewer would cap the first drafts at a distant Bot
    API (32 drafts ÷ 0.15 s ≈ 200 a second, whatever the budget)."""
    namespace: str = keys.TG
    """The channel name of the bot's state in Redis (`keys.tg_namespace`)."""
    fence: Fence | None = None
    """The bot's lease, when one is held (`telegram.standby`): checked before every Bot
    API call and draft write. None: no lease (a test, a library user running one adapter)."""
    setting: str = "channels.telegram"
    """Where the bot is configured, for error messages (`channels.telegram.bots[0]`)."""

    def paced(self, telegram: TelegramSettings | None) -> Pace:
        """The pace with the bot-wide budget the config sets (`botCallsPerSecond`)."""
        if telegram is not None and telegram.botCallsPerSecond is not None:  # raised (or lowered) on purpose
            return replace(self.pace, bot_rate=telegram.botCallsPerSecond)
        return self.pace

    def pool_size(self, telegram: TelegramSettings | None) -> int:
        """Connections to the Bot API, and calls in flight: the budget's calls a second
        times `round_trip`, so a distant Bot API (each call open longer) never caps the
        calls below the budget; the budget, not the connections, paces them."""
        if self.connection_pool_size is not None:
            return self.connection_pool_size
        return max(MIN_POOL, math.ceil(self.paced(telegram).bot_rate * self.round_trip))

    def worker(self, telegram: TelegramSettings | None = None) -> WorkerOptions:
        return WorkerOptions(
            settle=self.settle,
            max_probes=self.max_probes,
            backoff=self.backoff,
            lane_idle=self.lane_idle,
            remember=self.remember,
            group=self.group,
            consumer=self.consumer,
            catch_up=max(self.catch_up, self.pool_size(telegram)),
            calls_in_flight=self.pool_size(telegram),
        )
