"""What a chat on the Bot API emulator shows, printed as it happens: each message the
bot sends, edits or deletes, with its text as a person reads it (Telegram's HTML
parsed, rich checklists as ☑/☐). Used by `progresscast demo` and
`progresscast emulator telegram`."""

from __future__ import annotations

import textwrap
from typing import TextIO

from ._state import Call
from .botapi import BotAPIEmulator

SENDS = ("sendMessage", "sendRichMessage")
EDITS = ("editMessageText",)
DELETES = ("deleteMessage",)
SHOWN = SENDS + EDITS + DELETES


class ChatConsole:
    """Prints what one chat shows each time the bot changes it."""

    def __init__(self, api: BotAPIEmulator, chat_id: int, out: TextIO) -> None:
        self.api = api
        self.chat_id = chat_id
        self.out = out
        self._seen = 0
        self.printed = 0

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)
        self.printed += 1

    def _text_of(self, message_id: int) -> str:
        chat = self.api.chat(self.chat_id)
        shown = chat.messages.get(message_id) or chat.deleted.get(message_id)
        return shown.text if shown is not None else ""

    def show(self, call: Call) -> None:
        if call.chat_id != self.chat_id or not call.ok or not call.applied:
            return  # "message is not modified", refusals and other chats change nothing here
        if call.method in SENDS and isinstance(call.result, dict):
            message_id = int(call.result["message_id"])
            self._print(f"  ＋ the bot sends message {message_id}:")
        elif call.method in EDITS:
            message_id = int(call.params.get("message_id", 0))
            self._print(f"  ✎ the bot edits message {message_id}:")
        elif call.method in DELETES:
            self._print(f"  ✕ the bot deletes message {call.params.get('message_id')}")
            return
        else:
            return
        self._print(textwrap.indent(self._text_of(message_id) or "(empty)", "    │ ", lambda line: True))

    def catch_up(self) -> None:
        """Print every call made since the last look."""
        calls = self.api.calls
        while self._seen < len(calls):
            call = calls[self._seen]
            if self._pending(call):
                return  # still being answered (a call is listed when it arrives): keep the order
            self.show(call)
            self._seen += 1

    async def run(self) -> None:
        """Print calls as they arrive, until cancelled."""
        while True:
            self.catch_up()
            try:
                await self.api.wait_for(self._unseen, timeout=3600)
            except TimeoutError:
                continue

    @staticmethod
    def _pending(call: Call) -> bool:
        # Only changes of a chat keep their order; a long poll (getUpdates) in flight does not.
        return call.method in SHOWN and call.ok and call.result is None

    def _unseen(self) -> bool:
        calls = self.api.calls
        return self._seen < len(calls) and not self._pending(calls[self._seen])
