"""The Telegram transport of presses and typed answers (`channels.asks`): a
`callback_query` from an ask's inline keyboard or a draft's Stop button, and a text
message replying to an ask, each turned into a `Press` for the one handler.

Every callback query is answered (`answerCallbackQuery`, its short text shown to the
presser as a toast) — also when the press changed nothing or failed — so the button
stops spinning within Telegram's deadline. A typed answer is acknowledged in the chat.
"""

from __future__ import annotations

import logging
import time

from telegram import Bot, Update
from telegram.error import TelegramError
from telegram.ext import Application, CallbackQueryHandler, ContextTypes, MessageHandler, filters

from ..channels.asks import Press
from ..channels.chat.commands import cached_check
from ..channels.worker import ChannelWorker
from .commands import ADMIN_TTL, GROUPS, is_admin, thread_of
from .worker import PLATFORM

log = logging.getLogger("progresscast.telegram")

MAX_CALLBACK_TEXT = 200
"""What `answerCallbackQuery` shows at most."""


class TelegramPresses:
    def __init__(self, worker: ChannelWorker, bot: Bot) -> None:
        self.worker = worker
        self.bot = bot
        self._admins: dict[object, tuple[float, bool]] = {}

    def register(self, app: Application) -> None:  # type: ignore[type-arg]
        app.add_handler(CallbackQueryHandler(self._pressed))
        app.add_handler(MessageHandler(filters.REPLY & filters.TEXT & ~filters.COMMAND, self._typed))

    def _may_change(self, chat_id: int, user_id: int) -> object:
        return cached_check(
            lambda: is_admin(self.bot, chat_id, user_id), self._admins, (chat_id, user_id), ttl=ADMIN_TTL,
            clock=time.monotonic,
        )

    async def _pressed(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        query = update.callback_query
        if query is None:
            return
        text = "Sorry, that did not work. Try again in a moment."
        try:
            message = query.message
            user = query.from_user
            if message is None or not hasattr(message, "chat"):
                text = "This message is too old to act on."
            else:
                chat = message.chat
                await self.worker.spoke(chat.id)
                text = await self.worker.presses.press(Press(
                    platform=PLATFORM, destination=chat.id,
                    thread=thread_of(message) if hasattr(message, "is_topic_message") else 0,  # type: ignore[arg-type]
                    user=str(user.id), name=user.full_name or user.username or str(user.id),
                    control=query.data or "", message_id=message.message_id, group=chat.type in GROUPS,
                    may_change=self._may_change(chat.id, user.id),  # type: ignore[arg-type]
                ))
        except Exception:
            log.exception("a press in chat %s failed", getattr(query.message, "chat_id", "?"))
        finally:
            try:
                await query.answer(text=text[:MAX_CALLBACK_TEXT])
            except TelegramError as exc:  # too late, or the query is gone: nothing to do
                log.info("answering a press failed: %s", exc)

    async def _typed(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None or message.reply_to_message is None or message.from_user is None or not message.text:
            return
        user, chat = message.from_user, message.chat
        reply = await self.worker.presses.typed(Press(
            platform=PLATFORM, destination=chat.id, thread=thread_of(message), user=str(user.id),
            name=user.full_name or user.username or str(user.id), message_id=message.reply_to_message.message_id,
            text=message.text, group=chat.type in GROUPS,
            may_change=self._may_change(chat.id, user.id),  # type: ignore[arg-type]
        ))
        if reply is not None:
            self.worker.say(chat.id, thread_of(message), reply)


__all__ = ["TelegramPresses"]
