"""The Telegram transport of the chat commands: a message's `/word args` turned into a
`channels.commands.Invocation`, the one handler asked, and its reply sent through the
chat's lane (so it counts against the chat's pace, like drafts).

Every message seen is also a mark for probing (the highest message id of a chat with a
grant) and tells the worker the chat speaks again (a paused chat is called again). In
groups, the chat's administrators (`getChatMember`, cached a minute) may change what it
follows; anyone may use `/card` and `/help`. A command addressed to another bot
(`/help@other_bot`) is left alone; `/start` is `/help`.
"""

from __future__ import annotations

import logging
import time

from telegram import Bot, Message, Update
from telegram.error import TelegramError
from telegram.ext import Application, ContextTypes, MessageHandler, filters

from ..channels.chat.commands import ChatCommands, Invocation, Surface, cached_check
from ..channels.worker import ChannelWorker
from .worker import PLATFORM

log = logging.getLogger("progresscast.telegram")

COMMANDS = [
    ("follow", "SESSION [AGENT] — show this session's progress card here"),
    ("unfollow", "[SESSION] — stop following (all sessions without an argument)"),
    ("card", "show the followed cards again at the bottom of the chat"),
    ("mode", "progress|partial|block|off — what the draft shows"),
    ("rich", "on|off — rich messages with checkboxes"),
    ("help", "what this bot does and what this chat follows"),
]
"""What `setMyCommands` lists in Telegram's command menu."""

# "/follow" in a chat, rich messages with checkboxes: Surface's defaults are Telegram's words.
SURFACE = Surface(rich_refused_note=" This bot's Bot API server does not support them, so drafts stay classic HTML.")
ADMIN_TTL = 60.0
"""Seconds an administrator check is trusted (a demoted admin keeps the right this long)."""
ADMINS = frozenset({"creator", "administrator"})
GROUPS = frozenset({"group", "supergroup"})


async def is_admin(bot: Bot, chat_id: int, user_id: int) -> bool:
    """Whether the user is one of the chat's administrators (`getChatMember`)."""
    try:
        member = await bot.get_chat_member(chat_id, user_id)
    except TelegramError as exc:
        log.warning("chat %s: cannot tell whether %s is an administrator (%s)", chat_id, user_id, exc)
        return False
    return member.status in ADMINS


def thread_of(message: Message) -> int:
    """The forum topic a message belongs to (0: none). Replies in ordinary groups carry a
    message_thread_id too; only topic messages make it a topic."""
    if message.is_topic_message and message.message_thread_id:
        return int(message.message_thread_id)
    return 0


class TelegramCommands:
    def __init__(self, worker: ChannelWorker) -> None:
        self.worker = worker
        self.commands = ChatCommands(worker, SURFACE)
        self._admins: dict[object, tuple[float, bool]] = {}

    def register(self, app: Application) -> None:  # type: ignore[type-arg]
        # Group -1 runs before the commands: every message seen is a mark for probing.
        app.add_handler(MessageHandler(filters.ALL, self._saw), group=-1)
        app.add_handler(MessageHandler(filters.COMMAND, self._command))

    async def _saw(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None:
            return
        await self.worker.spoke(message.chat_id)
        # Only for a chat with a grant: a stranger's messages store nothing.
        if await self.worker.channel.access.grant_of(message.chat_id) is not None:
            await self.worker.state.messages.saw(message.chat_id, message.message_id)

    def invocation(self, message: Message, username: str) -> Invocation | None:
        """The command in a message (None: not a command, or one for another bot)."""
        words = (message.text or "").split()
        if not words or not words[0].startswith("/"):
            return None
        word, _, target = words[0][1:].partition("@")
        if target and target.lower() != username.lower():
            return None
        chat = message.chat
        user = message.from_user
        group = chat.type in GROUPS
        word = word.lower()
        return Invocation(
            platform=PLATFORM,
            destination=chat.id,
            thread=thread_of(message),
            user=str(user.id) if user else "",
            word="help" if word == "start" else word,
            args=tuple(words[1:]),
            group=group,
            may_change=cached_check(
                lambda: self._is_admin(message), self._admins, (chat.id, user.id if user else None),
                ttl=ADMIN_TTL, clock=time.monotonic,
            ),
        )

    async def _is_admin(self, message: Message) -> bool:
        if message.sender_chat is not None and message.sender_chat.id == message.chat_id:
            return True  # an anonymous administrator writes as the group itself
        if message.from_user is None:
            return False
        return await is_admin(message.get_bot(), message.chat_id, message.from_user.id)

    async def _command(self, update: Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        message = update.effective_message
        if message is None:
            return
        inv = self.invocation(message, context.bot.username or "")
        if inv is None:
            return
        reply = await self.commands.handle(inv)
        if reply is not None:
            self.worker.say(inv.destination, inv.thread, reply.text, urgent=reply.urgent)


__all__ = ["ADMIN_TTL", "COMMANDS", "GROUPS", "SURFACE", "TelegramCommands", "is_admin", "thread_of"]
