"""What a channel on the Slack emulator shows, printed as it happens: each message the
app posts, updates or deletes, with its text as a person reads it (Block Kit and
mrkdwn read as Slack shows them, a plan display as its tasks). Used by
`progresscast emulator slack`, as `ChatConsole` is for Telegram."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from ._console import CallConsole
from ._slack_state import SlackCall
from .slackapi import SlackAPIEmulator

POSTS = ("chat.postMessage", "chat.startStream")
EDITS = ("chat.update", "chat.appendStream", "chat.stopStream")
DELETES = ("chat.delete",)


class ChannelConsole(CallConsole[SlackCall]):
    """Prints what one channel shows each time the app changes it."""

    def __init__(self, slack: SlackAPIEmulator, channel_id: str, out: TextIO) -> None:
        super().__init__(slack, out)
        self.slack = slack
        self.channel_id = channel_id

    @property
    def calls(self) -> Sequence[SlackCall]:
        return self.slack.calls

    def _text_of(self, ts: str) -> str:
        channel = self.slack.channel(self.channel_id)
        shown = channel.messages.get(ts) or channel.deleted.get(ts)
        return shown.visible_text if shown is not None else ""

    def change(self, call: SlackCall) -> tuple[str, str | None] | None:
        if call.channel != self.channel_id or not call.ok or not call.applied or call.result is None:
            return None
        if call.method in POSTS:
            ts = str(call.result.get("ts", ""))
            thread = call.params.get("thread_ts")
            where = f" in thread {thread}" if thread else ""
            return f"  ＋ the app posts message {ts}{where}:", self._text_of(ts)
        if call.method in EDITS:
            ts = str(call.params.get("ts", ""))
            return f"  ✎ the app updates message {ts}:", self._text_of(ts)
        if call.method in DELETES:
            return f"  ✕ the app deletes message {call.params.get('ts')}", None
        return None

    def pending(self, call: SlackCall) -> bool:
        """A call still being answered (a call is listed when it arrives)."""
        return call.ok and call.result is None and call.method in POSTS + EDITS + DELETES and not call.injected


__all__ = ["ChannelConsole"]
