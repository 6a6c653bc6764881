"""What a channel on the Slack emulator shows, printed as it happens: each message the
app posts, updates or deletes, with its text as a person reads it (Block Kit and
mrkdwn read as Slack shows them, a plan display as its tasks). Used by
`progresscast emulator slack`, as `ChatConsole` is for Telegram."""

from __future__ import annotations

import textwrap
from typing import TextIO

from ._slack_state import SlackCall
from .slackapi import SlackAPIEmulator

POSTS = ("chat.postMessage", "chat.startStream")
EDITS = ("chat.update", "chat.appendStream", "chat.stopStream")
DELETES = ("chat.delete",)


class ChannelConsole:
    """Prints what one channel shows each time the app changes it."""

    def __init__(self, slack: SlackAPIEmulator, channel_id: str, out: TextIO) -> None:
        self.slack = slack
        self.channel_id = channel_id
        self.out = out
        self._seen = 0

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def _text_of(self, ts: str) -> str:
        channel = self.slack.channel(self.channel_id)
        shown = channel.messages.get(ts) or channel.deleted.get(ts)
        return shown.visible_text if shown is not None else ""

    def show(self, call: SlackCall) -> None:
        if call.channel != self.channel_id or not call.ok or not call.applied or call.result is None:
            return
        if call.method in POSTS:
            ts = str(call.result.get("ts", ""))
            thread = call.params.get("thread_ts")
            where = f" in thread {thread}" if thread else ""
            self._print(f"  ＋ the app posts message {ts}{where}:")
        elif call.method in EDITS:
            ts = str(call.params.get("ts", ""))
            self._print(f"  ✎ the app updates message {ts}:")
        elif call.method in DELETES:
            self._print(f"  ✕ the app deletes message {call.params.get('ts')}")
            return
        else:
            return
        self._print(textwrap.indent(self._text_of(ts) or "(empty)", "    │ ", lambda line: True))

    def catch_up(self) -> None:
        """Print every call answered since the last look, in order."""
        calls = self.slack.calls
        while self._seen < len(calls):
            call = calls[self._seen]
            if _pending(call):
                return  # still being answered: keep the order
            self.show(call)
            self._seen += 1

    async def run(self) -> None:
        """Print calls as they are answered, until cancelled."""
        while True:
            self.catch_up()
            try:
                await self.slack.wait_for(self._unseen, timeout=3600)
            except TimeoutError:
                continue

    def _unseen(self) -> bool:
        calls = self.slack.calls
        return self._seen < len(calls) and not _pending(calls[self._seen])


def _pending(call: SlackCall) -> bool:
    """A call still being answered (a call is listed when it arrives)."""
    return call.ok and call.result is None and call.method in POSTS + EDITS + DELETES and not call.injected


__all__ = ["ChannelConsole"]
