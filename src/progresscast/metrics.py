"""Prometheus metrics of one process (served at `GET /metrics` by the gateway).

Counters move where the work happens; gauges that describe Redis (consumer lag,
follows) are read from it when scraped, so every process reports the same truth.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

WRITES = Counter(
    "progresscast_writes",
    "Card writes by outcome: ok, conflict (stale revision or reset in between), error (Redis)",
    ["outcome"],
)
A2A_UPDATES = Counter(
    "progresscast_a2a_updates",
    "A2A updates by outcome: applied, stale, duplicate, untimed, future (timestamp too far ahead "
    "of the store's clock), reset (the card was reset after the update arrived)",
    ["outcome"],
)
RENDERS = Counter("progresscast_renders", "Cards rendered, by channel", ["channel"])
BOT_API_CALLS = Counter(
    "progresscast_bot_api_calls", "Telegram Bot API calls by method and outcome", ["method", "outcome"]
)
RATE_LIMITED = Counter("progresscast_rate_limited", "Bot API answers 429 (Too Many Requests)")
PACING_WAIT = Histogram(
    "progresscast_pacing_wait_seconds",
    "How long a chat's next call waited for its pacing slot (its own and the bot-wide one)",
    buckets=(0.01, 0.1, 0.5, 1, 2, 3, 5, 10, 30, 60),
)
STALENESS = Histogram(
    "progresscast_staleness_seconds",
    "From a change's write to its delivery to a chat or an open page, by channel",
    ["channel"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 30, 60),
)
CONSUMER_LAG = Gauge(
    "progresscast_consumer_lag", "Change events not yet handled by a consumer group (all shards)", ["group"]
)
FOLLOWS = Gauge(
    "progresscast_follows",
    "Chat topics following a card owner, by channel (its consumer group: telegram, telegram-<bot id>, slack)",
    ["channel"],
)
PAUSED = Gauge(
    "progresscast_paused_destinations",
    "Destinations that refused the bot for good (blocked, kicked, archived) and get no calls until they speak "
    "again or a probe is due, by channel",
    ["channel"],
)
LEASE_HELD = Gauge(
    "progresscast_lease_held", "1 while this process holds the bot's lease (polls and edits for it), else 0", ["bot"]
)
