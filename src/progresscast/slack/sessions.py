"""Slack's agent sessions (`[channels.slack] agentSessions`): a follow's thread shows its
session `processing` — with Slack's own stop button — while a run its agent can stop is
live there, and `active` again once it ended or was stopped (`agents.sessions.setStatus`).

When is decided from the view alone (`session_status`), as each read of a followed draft
finds it (`ChannelWorker.watchers`); a change is set once, by one task per thread that
waits for the channel's pace like any other call (`Pacer.acquire`/`leaving`), and sets
only the newest status wanted by then. A thread whose session was never made
`processing` here gets no call. What was set is kept in memory: after a restart a
session is set `processing` again when its run is live, and one whose run ended
meanwhile keeps what it showed (Slack's stop button then records nothing: no live run).

Slack's stop button sends `agent_session_stopped` to the Events API, taken as a
confirmed Stop by `presses.SlackPresses.session_stopped`.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from ..channels.draft.outcome import OutcomeKind
from ..channels.state.ids import DraftKey
from ..channels.worker import ChannelWorker
from ..model.view import RunState, View
from .channel import SlackChannel
from .client import SlackClient

log = logging.getLogger("progresscast.slack")

PROCESSING = "processing"
ACTIVE = "active"
MAX_TRIES = 3
"""Calls for one status that Slack did not answer (unsure, unreachable) before it is left."""

Place = tuple[str, str]
"""A session: (channel, thread_ts)."""


def session_status(view: View) -> str:
    """`processing` while the run is live, its agent acts on a Stop, and nobody pressed
    it yet; `active` otherwise."""
    live = view.stoppable and view.run is RunState.active and view.stop is None
    return PROCESSING if live else ACTIVE


@dataclass(eq=False)
class AgentSessions:
    worker: ChannelWorker
    channel: SlackChannel
    client: SlackClient
    _wanted: dict[Place, str] = field(default_factory=dict, init=False)
    _shown: dict[Place, str] = field(default_factory=dict, init=False)
    """Sessions this process set `processing` and not yet `active` again."""
    _setting: dict[Place, asyncio.Task[None]] = field(default_factory=dict, init=False)

    def saw(self, key: DraftKey, view: View) -> None:
        """A followed draft's view was read (a `ChannelWorker` watcher: no I/O here)."""
        thread = self.channel.thread_of(key)
        if thread is None:
            return
        place = (str(key.chat_id), thread)
        status = session_status(view)
        if self._wanted.get(place, ACTIVE) == status:
            return
        self._wanted[place] = status
        if place not in self._setting:
            self._setting[place] = asyncio.get_running_loop().create_task(self._set(place))

    async def _set(self, place: Place) -> None:
        """Set the newest status wanted until it is the one shown, one paced call each."""
        try:
            await self._set_until_shown(place)
        finally:  # no await from the last look at what is wanted to here: no change is missed
            if self._wanted.get(place, ACTIVE) == ACTIVE:
                self._wanted.pop(place, None)
                self._shown.pop(place, None)
            self._setting.pop(place, None)

    async def _set_until_shown(self, place: Place) -> None:
        channel, thread = place
        pacer, tries = self.worker.pacer, 0
        while (status := self._wanted.get(place, ACTIVE)) != self._shown.get(place, ACTIVE) and tries < MAX_TRIES:
            await pacer.acquire(channel)
            async with self.worker.ctx.calls:
                await pacer.leaving(channel)
                outcome = await self.client.set_session_status(channel, thread, status)
            if outcome.kind is OutcomeKind.ok:
                self._shown[place], tries = status, 0
            elif outcome.kind is OutcomeKind.rate_limited:
                pacer.hold(channel, outcome.retry_after)
            elif outcome.kind in (OutcomeKind.unsure, OutcomeKind.transient):
                tries += 1
                pacer.hold(channel, self.worker.backoff(channel) / pacer.budgets.scale)
            else:  # refused (not an agent, a scope missing, the thread gone): left as it is
                self.worker.failures.warning(
                    f"agent session: {outcome.detail}", "channel %r: Slack refused the agent session status %s: %s",
                    channel, status, outcome.detail,
                )
                break

    def close(self) -> None:
        for task in list(self._setting.values()):
            task.cancel()


__all__ = ["ACTIVE", "PROCESSING", "AgentSessions", "session_status"]
