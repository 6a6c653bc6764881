"""What a chat on the Bot API emulator shows, printed as it happens: each message the
bot sends, edits or deletes, with its text as a person reads it (Telegram's HTML
parsed, rich checklists as ☑/☐). Used by `progresscast demo` and
`progresscast emulator telegram`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TextIO

from ._console import CallConsole
from ._state import Call
from .botapi import BotAPIEmulator

SENDS = ("sendMessage", "sendRichMessage")
EDITS = ("editMessageText",)
DELETES = ("deleteMessage",)
SHOWN = SENDS + EDITS + DELETES


class ChatConsole(CallConsole[Call]):
    """Prints what one chat shows each time the bot changes it."""

    def __init__(self, api: BotAPIEmulator, chat_id: int, out: TextIO) -> None:
        super().__init__(api, out)
        self.api = api
        self.chat_id = chat_id

    @property
    def calls(self) -> Sequence[Call]:
        return self.api.calls

    def _text_of(self, message_id: int) -> str:
        chat = self.api.chat(self.chat_id)
        shown = chat.messages.get(message_id) or chat.deleted.get(message_id)
        return shown.text if shown is not None else ""

    def change(self, call: Call) -> tuple[str, str | None] | None:
        if call.chat_id != self.chat_id or not call.ok or not call.applied:
            return None  # "message is not modified", refusals and other chats change nothing here
        if call.method in SENDS and isinstance(call.result, dict):
            message_id = int(call.result["message_id"])
            return f"  ＋ the bot sends message {message_id}:", self._text_of(message_id)
        if call.method in EDITS:
            message_id = int(call.params.get("message_id", 0))
            return f"  ✎ the bot edits message {message_id}:", self._text_of(message_id)
        if call.method in DELETES:
            return f"  ✕ the bot deletes message {call.params.get('message_id')}", None
        return None

    def pending(self, call: Call) -> bool:
        # Only changes of a chat keep their order; a long poll (getUpdates) in flight does not.
        return call.method in SHOWN and call.ok and call.result is None


__all__ = ["ChatConsole"]
