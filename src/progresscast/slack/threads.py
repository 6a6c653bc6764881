"""Follows in a thread of their own: Slack's plan display streams to one person in a
thread (Slack requires a recipient in channels), so a follow made with the plan display
on posts a message that starts a thread, and follows the session there
(`channels.commands.Places`, for the shared command handler)."""

from __future__ import annotations

import time
from typing import cast

from ..channels.chat.commands import Invocation
from ..channels.draft.outcome import MessageId
from ..channels.state.ids import DraftKey, Id
from ..channels.worker import ChannelWorker
from ..model.owners import Owner
from ..model.view import View
from ..render.slack_payload import Recipient
from .channel import NO_THREAD, SlackChannel, SlackState

OPENING_PATIENCE = 120.0
"""Seconds a follow whose thread is still being opened counts as made (a second
`/progresscast follow` of it meanwhile opens no second thread)."""


class Threads:
    def __init__(self, worker: ChannelWorker) -> None:
        self.worker = worker
        self.channel = cast(SlackChannel, worker.channel)
        self.state = cast(SlackState, worker.state)
        self._opening: dict[tuple[Id, Owner], float] = {}
        """Follows whose thread the channel's lane is still to open, and until when (on
        the monotonic clock) that counts as following: memory only, as the opening is."""

    def opening(self, destination: Id, owner: Owner) -> bool:
        now = time.monotonic()
        self._opening = {k: until for k, until in self._opening.items() if until > now}
        return (destination, owner) in self._opening

    async def follow_elsewhere(self, inv: Invocation, owner: Owner, view: View) -> bool:
        """With the plan display on, a thread of its own: the channel's lane posts a
        message that starts one, paced and ordered with the channel's other calls, and
        then follows `owner` in it (in the channel, as Block Kit, when it could not be
        posted). The command does not wait for it: Slack waits three seconds for the
        answer, and the lane may be waiting for the channel's pace or a 429's Retry-After."""
        settings = await self.channel.render_settings(inv.destination)
        team = self.channel.team_id
        if not (settings.rich and inv.user and team):
            return False
        channel, recipient = str(inv.destination), Recipient(inv.user, team)

        async def follow(thread: MessageId | None) -> None:
            try:
                key = DraftKey(channel, NO_THREAD if thread is None else str(thread), owner)
                if thread is not None:
                    await self.state.set_recipient(channel, str(thread), recipient)
                added = await self.worker.follow(key, view=view)
                self.worker.touch(key, followed=added)
            finally:
                self._opening.pop((channel, owner), None)

        # Until the lane has opened the thread and stored the follow; a reply the lane
        # dropped (Redis down) calls nothing back, so the mark also expires.
        self._opening[(channel, owner)] = time.monotonic() + OPENING_PATIENCE
        self.worker.say(channel, NO_THREAD, f"Progress of {owner.display_key}, in this thread.", then=follow)
        return True

    async def unfollowed(self, key: DraftKey) -> None:
        if str(key.thread_id) != NO_THREAD:
            await self.state.forget_recipient(str(key.chat_id), str(key.thread_id))


__all__ = ["OPENING_PATIENCE", "Threads"]
