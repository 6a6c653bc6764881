"""What every emulator records of a call it answered, beyond what the call was: when it
arrived, its status, whether a test's fault answered it, and whether it changed what is shown.
`_state.Call` (Telegram), `_slack_state.SlackCall` and `_discord_state.DiscordCall`
add what their service says and names.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field


@dataclass(kw_only=True)
class Answered:
    at: float = field(default_factory=time.monotonic)
    """``time.monotonic()`` when the request arrived."""
    status: int = 200
    """The HTTP status of the answer."""
    injected: bool = False
    """Answered by ``fail_next`` / ``timeout_next`` rather than by the emulated service."""
    timed_out: bool = False
    """The answer was held past the client's timeout (``timeout_next``)."""
    applied: bool = False
    """The call changed what a chat or channel shows."""


__all__ = ["Answered"]
