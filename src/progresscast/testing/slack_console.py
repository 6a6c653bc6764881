"""What a channel on the Slack emulator shows, printed as it happens: each message the
app posts, updates or deletes, with its text as a person reads it (Block Kit and
mrkdwn read as Slack shows them, a plan display as its tasks, buttons as `[1: text]`), and
what the person does besides writing: `press N`, `reply TEXT`. Used by
`progresscast emulator slack`, as `ChatConsole` is for Telegram."""

from __future__ import annotations

from ._console import CallConsole, asks, pressed_button
from ._slack_requests import Interaction
from ._slack_state import SlackCall
from .slack_blocks import buttons, read_mrkdwn
from .slackapi import SlackAPIEmulator

POSTS = ("chat.postMessage", "chat.startStream")
EDITS = ("chat.update", "chat.appendStream", "chat.stopStream")
DELETES = ("chat.delete",)
WHISPERS = "chat.postEphemeral"


class ChannelConsole(CallConsole[SlackCall, SlackAPIEmulator, str]):
    """Prints what one channel shows each time the app changes it."""

    def _text_of(self, ts: str) -> str:
        channel = self.server.channel(self.watched)
        shown = channel.messages.get(ts) or channel.deleted.get(ts)
        if shown is None:
            return ""
        keys = "  ".join(f"[{i}: {text}]" for i, (text, _) in enumerate(buttons(shown.blocks), 1))
        return f"{shown.visible_text}\n{keys}" if keys else shown.visible_text

    def act(self, line: str, user: str) -> tuple[str, Interaction | None] | None:
        """What the person typed, when it is a console action rather than a message:
        `press N` presses the N-th button of the newest open question, else of the newest
        message that has buttons (`press N on MESSAGE`: of that message);
        `reply TEXT` answers the newest open question in its thread. Returns what to echo and
        the press (its answer: `Interaction.answer`); None: an ordinary message."""
        word, _, rest = line.strip().partition(" ")
        shown = self.server.channel(self.watched).visible()
        if word == "press":
            picked = pressed_button(
                rest, [m for m in shown if buttons(m.blocks)], lambda m: m.ts,
                lambda m: [action for _, action in buttons(m.blocks)],
            )
            if isinstance(picked, str):
                return picked, None
            target, i = picked
            text, action_id = buttons(target.blocks)[i]
            pressed = self.server.press(self.watched, target.ts, action_id, user=user)
            return f"you press [{text}] on message {target.ts}", pressed
        if word == "reply":
            open_asks = [m for m in shown if asks(m.visible_text)]  # never a draft's Stop
            if not rest.strip():
                return "(reply TEXT: the answer to the newest open question)", None
            if not open_asks:
                return "(no open question to reply to)", None
            question = open_asks[-1]
            self.server.post_as_user(self.watched, rest, user=user, thread_ts=question.thread_ts or question.ts)
            return f"you reply in the thread of message {question.ts} → {rest}", None
        return None

    def change(self, call: SlackCall) -> tuple[str, str | None] | None:
        if call.method == WHISPERS and call.channel == self.watched and call.ok and call.result is not None:
            # Shown to one person only (the console's, who typed an answer): not the channel's.
            return f"  app (only you see it) → {read_mrkdwn(str(call.params.get('text', ''))).text}", None
        if call.channel != self.watched or not call.ok or not call.applied or call.result is None:
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
        shown = (*POSTS, *EDITS, *DELETES, WHISPERS)
        return call.ok and call.result is None and call.method in shown and not call.injected


__all__ = ["ChannelConsole"]
