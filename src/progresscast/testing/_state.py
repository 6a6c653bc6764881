"""What the emulated Telegram remembers: chats, the messages they show, the calls made."""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from typing import Any

from ._answered import Answered
from ._shown import ShownMessages
from .telegram_html import Entity


class ApiError(Exception):
    """A Bot API failure, answered as ``{"ok": false, "error_code", "description"}``."""

    def __init__(self, status: int, description: str, parameters: dict[str, Any] | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters

    def envelope(self) -> dict[str, Any]:
        body: dict[str, Any] = {"ok": False, "error_code": self.status, "description": self.description}
        if self.parameters:
            body["parameters"] = self.parameters
        return body


def not_found() -> ApiError:
    """What Telegram answers for a method it does not know."""
    return ApiError(404, "Not Found")


@dataclass
class Call(Answered):
    """One request the bot made, as the emulator answered it."""

    method: str
    """Canonical spelling (``sendMessage``) for known methods, as sent otherwise."""
    chat_id: int | None
    params: dict[str, Any]
    answered: float | None = None
    """``time.monotonic()`` when the answer left (after any hold); None while it is held."""
    description: str | None = None
    """The error description; None when the call succeeded."""
    result: Any = None
    token: str | None = None
    """The bot token the call was made with (the emulator may serve several bots)."""
    instance: str | None = None
    """The `INSTANCE` of a base URL `…/i/INSTANCE/bot` (:meth:`BotAPIEmulator.base_url_for`):
    which of several clients made the call."""
    limit: str | None = None
    """For a call refused with 429 by the flood limits: ``chat`` or ``bot``, the one it
    was over (what Telegram does not say, but a test wants to know)."""

    @property
    def ok(self) -> bool:
        return self.status == 200


@dataclass
class ShownMessage:
    """A message as the chat shows it now."""

    message_id: int
    chat_id: int
    date: int
    from_bot: bool
    text: str
    """Visible text. For a rich message, a plain rendering of its blocks (checkboxes as ☑/☐)."""
    entities: list[Entity] = field(default_factory=list)
    parse_mode: str | None = None
    source: str | None = None
    """The ``text`` parameter exactly as sent (HTML before parsing)."""
    rich: dict[str, Any] | None = None
    """The InputRichMessage as sent, for a rich message."""
    blocks: list[dict[str, Any]] | None = None
    """The rich blocks the message shows."""
    message_thread_id: int | None = None
    reply_markup: Any = None
    edit_date: int | None = None
    edits: int = 0
    user_id: int | None = None
    """The sender, for a message a user sent."""
    reply_to: int | None = None
    """The message this one replies to (`reply_parameters`), when it was there."""
    notified: bool = True
    """Sent without `disable_notification`: the chat's members were notified of it."""

    @property
    def is_rich(self) -> bool:
        return self.rich is not None

    def content_key(self) -> tuple[Any, ...]:
        """What must change for an edit not to be "message is not modified"."""
        return (self.text if self.rich is None else None, self.entities, self.rich, self.reply_markup)


@dataclass
class ChatState(ShownMessages[int, ShownMessage]):
    id: int
    type: str
    is_forum: bool = False
    next_message_id: int = 1
    bot_status: str = "member"
    """The bot in this chat: "member", "blocked" (a private chat whose user blocked it),
    "kicked" or "left" (a group that removed it): every call to it answers 403."""
    admins: list[int] = field(default_factory=list)
    """Users who are administrators here (getChatMember); the first is the creator."""

    def visible(self, *, include_user: bool = False) -> list[ShownMessage]:
        """The bot's messages still present, oldest first (users' messages too on request)."""
        return self.present(others=include_user)

    def texts(self) -> list[str]:
        """Visible text of each bot message still present, oldest first."""
        return [m.text for m in self.visible()]

    def new_message_id(self) -> int:
        message_id = self.next_message_id
        self.next_message_id += 1
        return message_id

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.type == "private":
            out["first_name"] = "Tester"
        else:
            out["title"] = f"Test {self.type} {self.id}"
            if self.is_forum:
                out["is_forum"] = True
        return out


def refusal(chat: ChatState) -> ApiError | None:
    """Telegram's 403 for a chat that refuses the bot (None: it does not)."""
    kind = "supergroup" if chat.type == "supergroup" else "group" if chat.type == "group" else "channel"
    if chat.bot_status == "blocked":
        return ApiError(403, "Forbidden: bot was blocked by the user")
    if chat.bot_status == "kicked":
        return ApiError(403, f"Forbidden: bot was kicked from the {kind} chat")
    if chat.bot_status == "left":
        return ApiError(403, f"Forbidden: bot is not a member of the {kind} chat")
    return None


def default_chat_type(chat_id: int) -> str:
    """Telegram's id ranges: users are positive, supergroups below -10^12, basic groups between."""
    if chat_id > 0:
        return "private"
    return "supergroup" if chat_id <= -1_000_000_000_000 else "group"


def now() -> int:
    return int(time.time())


def message_to_api(msg: ShownMessage, chat: ChatState, sender: dict[str, Any]) -> dict[str, Any]:
    """The Bot API ``Message`` object python-telegram-bot parses."""
    out: dict[str, Any] = {
        "message_id": msg.message_id,
        "from": sender,
        "chat": chat.to_api(),
        "date": msg.date,
    }
    if msg.message_thread_id is not None:
        out["message_thread_id"] = msg.message_thread_id
        if chat.is_forum:
            out["is_topic_message"] = True
    if msg.edit_date is not None:
        out["edit_date"] = msg.edit_date
    replied = chat.messages.get(msg.reply_to) if msg.reply_to is not None else None
    if replied is not None:
        out["reply_to_message"] = message_to_api(replace(replied, reply_to=None), chat, sender)
    if msg.rich is not None:
        out["rich_message"] = {"blocks": msg.blocks or []}
        if msg.rich.get("is_rtl"):
            out["rich_message"]["is_rtl"] = True
    else:
        out["text"] = msg.text
        if msg.entities:
            out["entities"] = [e.to_api() for e in msg.entities]
    if isinstance(msg.reply_markup, dict) and msg.reply_markup.get("inline_keyboard"):
        out["reply_markup"] = msg.reply_markup
    return out
