"""What a channel on the Discord emulator shows, printed as it happens: each message the
bot creates, edits or deletes, with its text as a person reads it (Discord's Markdown
and Components V2 read as Discord shows them, buttons as `[1: label]`). Used by
`progresscast emulator discord`, as `ChatConsole` is for Telegram."""

from __future__ import annotations

from ._console import CallConsole
from ._discord_state import DiscordCall
from .discordapi import DiscordAPIEmulator

SHOWN = ("create_message", "edit_message", "delete_message")


class DiscordConsole(CallConsole[DiscordCall, DiscordAPIEmulator, str]):
    """Prints what one channel shows each time the bot changes it."""

    def pending(self, call: DiscordCall) -> bool:
        return not call.answered

    def change(self, call: DiscordCall) -> tuple[str, str | None] | None:
        if call.channel != self.watched or call.route not in SHOWN or call.status >= 300:
            return None
        if call.route == "delete_message":
            return "  ✕ the bot deletes a message", None
        shown = self.server.channel(self.watched).visible()
        if not shown:
            return None
        # What the channel shows once the call is answered: the newest message after a
        # create, the one edited last after an edit.
        message = max(shown, key=lambda m: m.edited_at or 0) if call.route == "edit_message" else shown[-1]
        verb = "＋ the bot sends" if call.route == "create_message" else "✎ the bot edits"
        text = message.read().text or "(empty)"
        if buttons := message.buttons():
            keys = "  ".join(f"[{i}: {b.get('label', '')}]" for i, b in enumerate(buttons, 1))
            text += f"\n{keys}   (type: press {1 if len(buttons) == 1 else 'N'} on {message.id})"
        return f"  {verb} message {message.id}:", text


__all__ = ["DiscordConsole"]
