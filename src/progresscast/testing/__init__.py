"""Test helpers shipped with progresscast, like Starlette's TestClient.

- :class:`BotAPIEmulator` — a loopback Telegram Bot API server that behaves like Telegram.
- :func:`parse` / :func:`visible_length` — Telegram's HTML parse mode, with its exact errors.
"""

from ._pacing import BOT_PACE, GROUP_PACE, PRIVATE_PACE, Pace
from ._state import Call, ChatState, ShownMessage
from .botapi import DEFAULT_TOKEN, BotAPIEmulator
from .telegram_html import (
    MAX_TEXT,
    Entity,
    ParsedText,
    TelegramHTMLError,
    fix_text,
    parse,
    utf16_len,
    visible_length,
)

__all__ = [
    "BOT_PACE",
    "DEFAULT_TOKEN",
    "GROUP_PACE",
    "MAX_TEXT",
    "PRIVATE_PACE",
    "BotAPIEmulator",
    "Call",
    "ChatState",
    "Entity",
    "Pace",
    "ParsedText",
    "ShownMessage",
    "TelegramHTMLError",
    "fix_text",
    "parse",
    "utf16_len",
    "visible_length",
]
