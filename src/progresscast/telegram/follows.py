"""The Telegram adapter's settings per chat, and its state in Redis.

The state (follows, chat overrides, drafts, message ids) is the shared chat-channel
state (`channels.state`) under the name `tg`; what is Telegram's own here is how a
chat's settings are found: its /mode and /rich override, else its
`channels.telegram.chats[]` entry, else the bot-wide settings.
"""

from __future__ import annotations

from redis.asyncio import Redis

from ..channels.state import ChannelState, ChatPrefs, DraftKey
from ..config.settings import ChatSettings, Mode, RenderSettings, TelegramSettings
from ..store import keys
from ..store.lease import Fence


def chat_config(telegram: TelegramSettings, chat_id: int) -> ChatSettings | None:
    return telegram.chats_by_id.get(chat_id)


def effective_mode(telegram: TelegramSettings, chat_id: int, prefs: ChatPrefs) -> Mode:
    """The chat's override, else its `channels.telegram.chats[]` entry, else the bot's."""
    config = chat_config(telegram, chat_id)
    if prefs.mode is not None:
        return prefs.mode
    if config is not None and config.mode is not None:
        return config.mode
    return telegram.streaming.mode


def wants_rich(telegram: TelegramSettings, chat_id: int, prefs: ChatPrefs) -> bool:
    config = chat_config(telegram, chat_id)
    if prefs.rich is not None:
        return prefs.rich
    if config is not None and config.richMessages is not None:
        return config.richMessages
    return telegram.richMessages


def render_settings(
    telegram: TelegramSettings, chat_id: int, prefs: ChatPrefs, *, rich_available: bool = True
) -> RenderSettings:
    progress = telegram.streaming.progress
    mode = effective_mode(telegram, chat_id, prefs)
    return RenderSettings(
        mode=mode,
        maxLines=progress.maxLines,
        maxLineChars=progress.maxLineChars,
        checklistLines=telegram.streaming.checklist_lines(mode),
        rich=rich_available and wants_rich(telegram, chat_id, prefs),
    )


def allowed(telegram: TelegramSettings, chat_id: int) -> bool:
    return not telegram.allowedChats or chat_id in telegram.allowed_chat_ids


class TelegramState(ChannelState):
    def __init__(self, redis: Redis, namespace: str = keys.TG, *, fence: Fence | None = None) -> None:
        super().__init__(redis, namespace, int, fence=fence)


__all__ = [
    "ChatPrefs",
    "DraftKey",
    "TelegramState",
    "allowed",
    "chat_config",
    "effective_mode",
    "render_settings",
    "wants_rich",
]
