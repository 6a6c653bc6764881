"""How a channel worker behaves: waits, retries, sizes (`ChannelWorker`)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ..backoff import Backoff
from ..failure_log import INTERVAL


@dataclass(frozen=True)
class WorkerOptions:
    settle: float = 3.0
    """After a first send whose outcome is unknown, wait this long before probing for
    it: a request still in flight at the server may land meanwhile."""
    max_probes: int = 5
    """Message ids probed for an unsure send before it is taken as not landed."""
    backoff: Backoff = field(default_factory=Backoff)
    """After network errors and 5xx (and a failing change stream)."""
    lane_idle: float = 120.0
    """Seconds a destination's lane (its task) waits with nothing to do before it ends;
    a new one starts on demand."""
    remember: int = 10_000
    """At most this many log-once keys: the oldest are forgotten."""
    group: str = "telegram"
    """Consumer group on the change stream."""
    consumer: str | None = None
    """Consumer name; default the host name, so a restarted adapter re-reads what it
    had received but not acknowledged."""
    catch_up: int = 32
    """Drafts looked at together when every follow is read again (start-up, a lost
    change stream): a queue, not 10,000 lanes hitting Redis at once."""
    failure_log_interval: float = INTERVAL
    """A kind of failure is logged at most once per this many seconds."""
    intake_linger: float = 0.05
    """The change stream reader's `GroupReading.linger`, on the time scale. A
    destination's calls are a second or more apart: this delays none by more."""
    calls_in_flight: int = 16
    """Calls made at once (the client's connections). A lane reads and renders only once
    it holds one of them besides its slot: content never waits for a connection."""


__all__ = ["WorkerOptions"]
