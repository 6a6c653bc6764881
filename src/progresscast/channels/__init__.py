"""What every chat channel shares (see docs/channels.md).

- `drafts`  — pure: `decide` (the next call), on the draft state (`draft_state`); the
  calls (`calls`) and what a reply to one means (`replies`, `apply`)
- `conduct` — pure: pings, the start delay and staying at the bottom, per destination
- `outcome` — the kinds of reply a channel's client reports
- `pacing`  — budgets per destination and bot, served fairly, rendering only once granted
  (retries use the one policy in `progresscast.backoff`)
- `state`   — follows, overrides, drafts and message ids in Redis
- `worker`  — change stream → lanes → paced calls
- `channel` — what a channel plugs in: renderer, client, budgets (and its commands)
"""

from .channel import Channel, Client
from .drafts import Call, DraftState, Renderers, apply, decide
from .outcome import Outcome, OutcomeKind
from .pacing import Budgets, Pacer
from .state import ChannelState, ChatPrefs, DraftKey
from .worker import ChannelWorker, WorkerOptions

__all__ = [
    "Budgets",
    "Call",
    "Channel",
    "ChannelState",
    "ChannelWorker",
    "ChatPrefs",
    "Client",
    "DraftKey",
    "DraftState",
    "Outcome",
    "OutcomeKind",
    "Pacer",
    "Renderers",
    "WorkerOptions",
    "apply",
    "decide",
]
