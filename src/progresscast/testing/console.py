"""What a chat on the Bot API emulator shows, printed as it happens: each message the
bot sends, edits or deletes, with its text as a person reads it (Telegram's HTML
parsed, rich checklists as ☑/☐). Used by `progresscast demo` and
`progresscast emulator telegram`."""

from __future__ import annotations

from ._console import CallConsole, asks, pressed_button
from ._state import Call
from .botapi import BotAPIEmulator

SENDS = ("sendMessage", "sendRichMessage")
EDITS = ("editMessageText",)
DELETES = ("deleteMessage",)
SHOWN = SENDS + EDITS + DELETES


class ChatConsole(CallConsole[Call, BotAPIEmulator, int]):
    """Prints what one chat shows each time the bot changes it."""

    def _text_of(self, message_id: int) -> str:
        chat = self.server.chat(self.watched)
        shown = chat.messages.get(message_id) or chat.deleted.get(message_id)
        if shown is None:
            return ""
        buttons = _buttons(shown.reply_markup)
        if not buttons or message_id in chat.deleted:
            return shown.text
        keys = "  ".join(f"[{i}: {b.get('text', '')}]" for i, b in enumerate(buttons, 1))
        # The id always: a plain `press N` takes the newest open question (else the newest
        # message with buttons), which may not be this message by the time it is typed.
        return f"{shown.text}\n{keys}   (type: press {1 if len(buttons) == 1 else 'N'} on {message_id})"

    def act(self, line: str, user_id: int) -> tuple[str, str | None] | None:
        """What the person typed, when it is a console action rather than a message:
        `press N` presses the N-th button of the newest open question, else of the newest
        message that has buttons (`press N on MESSAGE`: of that message);
        `reply TEXT` answers the newest open question, as a reply. Returns what to echo
        and the press's callback query id (its answer: `answer_of`); None: an ordinary
        message, for the caller to send."""
        word, _, rest = line.strip().partition(" ")
        chat = self.server.chat(self.watched)
        if word == "press":
            picked = pressed_button(
                rest, [m for m in chat.visible() if _buttons(m.reply_markup)],
                lambda m: m.message_id, lambda m: [str(b.get("callback_data", "")) for b in _buttons(m.reply_markup)],
            )
            if isinstance(picked, str):
                return picked, None
            target, i = picked
            query = self.server.press(self.watched, target.message_id, i, user_id=user_id)
            label = _buttons(target.reply_markup)[i].get("text", "")
            return f"you press [{label}] on message {target.message_id}", query
        if word == "reply":
            # The newest question still open (its first line says who `asks:`), never a
            # draft, whose Stop button it may be newer than.
            open_asks = [m for m in chat.visible() if asks(m.text)]
            if not rest.strip():
                return "(reply TEXT: the answer to the newest open question)", None
            if not open_asks:
                return "(no open question to reply to)", None
            self.server.send_user_message(self.watched, rest, user_id=user_id, reply_to=open_asks[-1].message_id)
            return f"you reply to message {open_asks[-1].message_id} → {rest}", None
        return None

    def answer_of(self, query_id: str) -> str | None:
        """The bot's answer to a press (the toast a person sees), once it came."""
        found = self.server.callback(query_id)
        return found.text if found.answered else None

    def change(self, call: Call) -> tuple[str, str | None] | None:
        if call.chat_id != self.watched or not call.ok or not call.applied:
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


def _buttons(markup: object) -> list[dict[str, object]]:
    if not isinstance(markup, dict):
        return []
    return [b for row in markup.get("inline_keyboard") or [] for b in row if isinstance(b, dict)]


__all__ = ["ChatConsole"]
