"""The emulated Bot API server's methods, without HTTP: parameters in, result or ApiError out.

Validation follows the order of telegram-bot-api and TDLib, so that a request
with several faults fails with the error Telegram would give first: raw text
checks and entity parsing, then the message lookup, then trimming and length,
then "message is not modified".
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..timescale import time_scale
from . import telegram_html as html
from ._html_lexer import TelegramHTMLError
from ._params import int_param, require_chat_id, text_param
from ._state import ApiError, ChatState, ShownMessage, default_chat_type, message_to_api, now, refusal
from ._updates import UpdateQueue
from ._webhook import Webhook, check_set_webhook
from .telegram_rich import RichContent, check_rich

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)

# Methods that act on a chat and therefore count against its flood limits.
PACED = frozenset({"sendMessage", "editMessageText", "deleteMessage", "deleteMessages", "sendRichMessage"})
RICH_ONLY = frozenset({"sendRichMessage"})

# A bot command as Telegram detects it: "/" at a word start, 1-64 word characters, optional @bot.
_COMMAND = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?(?![\w/@])")

Handler = Callable[[dict[str, Any]], Any]


class FakeTelegram:
    """State and methods of one bot's Bot API server."""

    def __init__(
        self, token: str, *, bot_username: str = "progresscast_test_bot", count: str = "utf16", local_mode: bool = True
    ) -> None:
        head = token.split(":", 1)[0]
        self.token = token
        self.bot_user: dict[str, Any] = {
            "id": int(head) if head.isdigit() else 1,
            "is_bot": True,
            "first_name": "progresscast test bot",
            "username": bot_username,
        }
        self.count = count
        """How ``message is too long`` counts: "utf16" (strict, default) or "codepoints" (TDLib's own count)."""
        self.rich_supported = True
        self.local_mode = local_mode
        """Like telegram-bot-api's `--local`: a webhook may be http, on any port."""
        self.webhook: Webhook | None = None
        self.webhook_last_error: tuple[int, str] | None = None
        self.chats: dict[int, ChatState] = {}
        self.updates = UpdateQueue()
        self.commands: list[Any] = []
        self.closing = asyncio.Event()
        self.methods: dict[str, tuple[str, Handler]] = {
            name.lower(): (name, getattr(self, name))
            for name in (
                "getMe",
                "getUpdates",
                "setWebhook",
                "deleteWebhook",
                "getWebhookInfo",
                "setMyCommands",
                "getMyCommands",
                "sendChatAction",
                "sendMessage",
                "editMessageText",
                "deleteMessage",
                "deleteMessages",
                "sendRichMessage",
                "getChatMember",
                "answerCallbackQuery",
            )
        }
        self.callbacks: dict[str, CallbackQuery] = {}
        """Every press, by query id: what it answered (`answerCallbackQuery`), if it did."""

    def lookup(self, method: str) -> tuple[str, Handler] | None:
        """(canonical name, handler) of a method, matched case-insensitively like Telegram does."""
        found = self.methods.get(method.lower())
        if found is None or (found[0] in RICH_ONLY and not self.rich_supported):
            return None
        return found

    def chat(self, chat_id: int, chat_type: str | None = None) -> ChatState:
        chat = self.chats.get(chat_id)
        if chat is None:
            chat = self.chats[chat_id] = ChatState(chat_id, chat_type or default_chat_type(chat_id))
        elif chat_type:
            chat.type = chat_type
        return chat

    # --- bot and updates -------------------------------------------------------------------

    def getMe(self, p: dict[str, Any]) -> dict[str, Any]:
        return {
            **self.bot_user,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }

    async def getUpdates(self, p: dict[str, Any]) -> list[dict[str, Any]]:
        return await self.updates.get(
            int_param(p, "offset"), int_param(p, "limit", 100), int_param(p, "timeout"), self.closing
        )

    def setWebhook(self, p: dict[str, Any]) -> bool:
        self._set_webhook(check_set_webhook(p, self.webhook, local_mode=self.local_mode))
        if p.get("drop_pending_updates"):
            self.updates.drop_pending()
        return True

    def deleteWebhook(self, p: dict[str, Any]) -> bool:
        self._set_webhook(None)
        if p.get("drop_pending_updates"):
            self.updates.drop_pending()
        return True

    def _set_webhook(self, webhook: Webhook | None) -> None:
        self.webhook = webhook
        self.webhook_last_error = None
        self.updates.webhook_active = webhook is not None
        self.updates.wake()  # the sender starts (or stops) delivering

    def getWebhookInfo(self, p: dict[str, Any]) -> dict[str, Any]:
        hook = self.webhook
        info: dict[str, Any] = {
            "url": hook.url if hook else "",
            "has_custom_certificate": False,
            "pending_update_count": len(self.updates),
        }
        if hook is not None:
            info["max_connections"] = hook.max_connections
            if hook.allowed_updates:
                info["allowed_updates"] = hook.allowed_updates
            if self.webhook_last_error is not None:
                info["last_error_date"], info["last_error_message"] = self.webhook_last_error
        return info

    def setMyCommands(self, p: dict[str, Any]) -> bool:
        commands = p.get("commands")
        if not isinstance(commands, list):
            raise ApiError(400, "Bad Request: can't parse commands JSON object")
        self.commands = commands
        return True

    def getMyCommands(self, p: dict[str, Any]) -> list[Any]:
        return self.commands

    def getChatMember(self, p: dict[str, Any]) -> dict[str, Any]:
        """The member's status as Telegram answers it: "creator", "administrator" (with
        the rights python-telegram-bot requires), "member" (someone who wrote there) or
        "left"; a chat the bot never saw is "chat not found", one that refuses it a 403."""
        chat_id = require_chat_id(p)
        chat = self.chats.get(chat_id)
        if chat is None:
            raise ApiError(400, "Bad Request: chat not found")
        refused = refusal(chat)
        if refused is not None:
            raise refused
        user_id = p.get("user_id")
        if not isinstance(user_id, int) or isinstance(user_id, bool):
            try:
                user_id = int(str(user_id))
            except ValueError:
                raise ApiError(400, "Bad Request: invalid user_id specified") from None
        user = {"id": user_id, "is_bot": False, "first_name": "Tester"}
        if chat.type == "private":
            status = "member" if user_id == chat_id else "left"
        elif user_id in chat.admins:
            status = "creator" if user_id == chat.admins[0] else "administrator"
        elif any(m.user_id == user_id for m in chat.messages.values()):
            status = "member"
        else:
            status = "left"
        if status == "creator":
            return {"status": status, "user": user, "is_anonymous": False}
        if status == "administrator":
            rights = (
                "can_manage_chat", "can_delete_messages", "can_manage_video_chats", "can_restrict_members",
                "can_promote_members", "can_change_info", "can_invite_users", "can_post_stories",
                "can_edit_stories", "can_delete_stories", "can_pin_messages", "can_manage_topics",
            )
            return {"status": status, "user": user, "can_be_edited": False, "is_anonymous": False,
                    **{right: True for right in rights}}
        return {"status": status, "user": user}

    def refuse_bot(self, chat_id: int, how: str) -> None:
        """The chat refuses the bot from now on: "blocked" (its user blocked the bot),
        "kicked" or "left" (a group removed it). Every call to it answers 403."""
        if how not in ("blocked", "kicked", "left"):
            raise ValueError(f"how must be blocked, kicked or left, not {how!r}")
        self.chat(chat_id).bot_status = how

    def set_admins(self, chat_id: int, *user_ids: int) -> None:
        """The chat's administrators (the first is its creator)."""
        self.chat(chat_id).admins = list(user_ids)

    def sendChatAction(self, p: dict[str, Any]) -> bool:
        self.chat(require_chat_id(p))
        return True

    # --- messages --------------------------------------------------------------------------

    def sendMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        parsed = self._parse_text(p)
        chat = self.chat(require_chat_id(p))
        reply_to = _reply_to(p, chat)
        shown = self._fit(parsed)
        return self._send(
            p,
            chat,
            reply_to,
            text=shown.text,
            entities=shown.entities,
            parse_mode=text_param(p, "parse_mode") or None,
            source=text_param(p, "text"),
        )

    def sendRichMessage(self, p: dict[str, Any]) -> dict[str, Any]:
        chat = self.chat(require_chat_id(p))
        reply_to = _reply_to(p, chat)
        content = check_rich(p.get("rich_message"))
        return self._send(p, chat, reply_to, text=content.text, rich=content.rich, blocks=content.blocks)

    def _send(self, p: dict[str, Any], chat: ChatState, reply_to: int | None, **content: Any) -> dict[str, Any]:
        """The bot's new message in ``chat``, showing ``content`` (`ShownMessage` fields)."""
        msg = ShownMessage(
            message_id=chat.new_message_id(),
            chat_id=chat.id,
            date=now(),
            from_bot=True,
            message_thread_id=_thread(p),
            reply_markup=_markup(p),
            reply_to=reply_to,
            notified=not p.get("disable_notification"),
            **content,
        )
        chat.messages[msg.message_id] = msg
        return message_to_api(msg, chat, self.bot_user)

    def editMessageText(self, p: dict[str, Any]) -> dict[str, Any]:
        # A server without rich messages (before 10.1) does not know the parameter and ignores
        # it, as the Bot API ignores every unknown parameter: the edit then has no text.
        rich_value = p.get("rich_message") if self.rich_supported else None
        rich: RichContent | None = None
        parsed: html.ParsedText | None = None
        if rich_value is not None:
            if text_param(p, "text"):
                raise ApiError(400, "Bad Request: text and rich_message can't be specified together")  # invented
            rich = check_rich(rich_value)
        else:
            parsed = self._parse_text(p)
        if p.get("inline_message_id"):
            raise ApiError(400, "Bad Request: the emulator does not support inline messages")
        chat_id = require_chat_id(p)
        chat = self.chats.get(chat_id)
        old = chat.messages.get(int_param(p, "message_id")) if chat else None
        if chat is None or old is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if not old.from_bot:
            raise ApiError(400, "Bad Request: message can't be edited")
        if rich is not None:
            new = replace(
                old, text=rich.text, entities=[], parse_mode=None, source=None,
                rich=rich.rich, blocks=rich.blocks, reply_markup=_markup(p),
            )
        else:
            assert parsed is not None
            shown = self._fit(parsed)
            new = replace(
                old, text=shown.text, entities=shown.entities, parse_mode=text_param(p, "parse_mode") or None,
                source=text_param(p, "text"), rich=None, blocks=None, reply_markup=_markup(p),
            )
        if new.content_key() == old.content_key():
            raise ApiError(400, NOT_MODIFIED)
        new.edit_date = now()
        new.edits = old.edits + 1
        chat.messages[new.message_id] = new
        return message_to_api(new, chat, self.bot_user)

    def deleteMessage(self, p: dict[str, Any]) -> bool:
        chat = self.chats.get(require_chat_id(p))
        message_id = int_param(p, "message_id")
        if chat is None or message_id not in chat.messages:
            raise ApiError(400, "Bad Request: message to delete not found")
        chat.deleted[message_id] = chat.messages.pop(message_id)
        return True

    def deleteMessages(self, p: dict[str, Any]) -> bool:
        chat = self.chat(require_chat_id(p))
        ids = p.get("message_ids")
        if not isinstance(ids, list) or not 1 <= len(ids) <= 100:
            raise ApiError(400, "Bad Request: message_ids must be a non-empty list of at most 100 identifiers")
        for message_id in ids:  # missing messages are skipped, as documented
            if isinstance(message_id, int) and message_id in chat.messages:
                chat.deleted[message_id] = chat.messages.pop(message_id)
        return True

    # --- text rules ------------------------------------------------------------------------

    def _parse_text(self, p: dict[str, Any]) -> html.ParsedText:
        """Checks the Bot API makes before the message is looked at: raw size, parse mode."""
        text = text_param(p, "text")
        if not text:
            raise ApiError(400, "Bad Request: message text is empty")
        if len(text.encode("utf-8", "surrogatepass")) > html.MAX_RAW_TEXT:
            raise ApiError(400, "Bad Request: text is too long")
        mode = text_param(p, "parse_mode").lower()
        if mode == "html":
            try:
                return html.parse(text)
            except TelegramHTMLError as e:
                raise ApiError(400, e.description) from None
        if mode in ("markdown", "markdownv2"):
            raise ApiError(400, "Bad Request: the emulator parses only parse_mode HTML")  # not Telegram's
        if mode not in ("", "none"):
            raise ApiError(400, "Bad Request: unsupported parse_mode")
        entities = p.get("entities")
        if entities is None:
            return html.ParsedText(text, [])
        try:
            return html.ParsedText(text, [html.Entity.from_api(e) for e in entities])
        except (TypeError, KeyError, ValueError):
            raise ApiError(400, "Bad Request: can't parse entities JSON object") from None

    def _fit(self, parsed: html.ParsedText) -> html.ParsedText:
        """What the chat will show, after Telegram's trimming and length limit."""
        shown = html.fix_text(parsed)
        if not shown.text:
            raise ApiError(400, "Bad Request: text must be non-empty")
        length = html.utf16_len(shown.text) if self.count == "utf16" else len(shown.text)
        if length > html.MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        return shown

    # --- what users do ---------------------------------------------------------------------

    def user_message(
        self,
        chat_id: int,
        text: str,
        *,
        chat_type: str | None,
        message_thread_id: int | None,
        user_id: int | None,
        first_name: str,
        username: str | None,
        reply_to: int | None = None,
    ) -> dict[str, Any]:
        chat = self.chat(chat_id, chat_type)
        if chat.bot_status == "blocked":
            chat.bot_status = "member"  # writing to a bot one blocked unblocks it (Telegram's "Restart")
        if message_thread_id is not None and chat.type == "supergroup":
            chat.is_forum = True
        sender_id = user_id if user_id is not None else (chat_id if chat.type == "private" else 424242)
        sender: dict[str, Any] = {"id": sender_id, "is_bot": False, "first_name": first_name}
        if username:
            sender["username"] = username
        entities = [html.Entity("bot_command", *_utf16_span(text, m.start(), m.end())) for m in _COMMAND.finditer(text)]
        msg = ShownMessage(
            message_id=chat.new_message_id(),
            chat_id=chat_id,
            date=now(),
            from_bot=False,
            text=text,
            entities=entities,
            message_thread_id=message_thread_id,
            user_id=sender_id,
            reply_to=reply_to if reply_to is not None and reply_to in chat.messages else None,
        )
        chat.messages[msg.message_id] = msg
        return self.updates.push({"message": message_to_api(msg, chat, sender)})

    def press(
        self, chat_id: int, message_id: int, data: str, *, user_id: int, first_name: str, username: str | None,
        forged: bool = False,
    ) -> dict[str, Any]:
        """A user presses the button whose `callback_data` is `data` on a bot message;
        `forged`: data the message does not carry (a modified client, a replay)."""
        chat = self.chats.get(chat_id)
        msg = chat.messages.get(message_id) if chat else None
        if chat is None or msg is None:
            raise KeyError(f"chat {chat_id} shows no message {message_id}")
        buttons = [b for row in (msg.reply_markup or {}).get("inline_keyboard", []) for b in row]
        if not forged and data not in [b.get("callback_data") for b in buttons]:
            raise KeyError(f"message {message_id} has no button {data!r}; it has {[b.get('text') for b in buttons]}")
        query_id = str(len(self.callbacks) + 1) + "0" * 6
        self.callbacks[query_id] = CallbackQuery(query_id, chat_id, message_id, data, user_id, time.monotonic())
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            sender["username"] = username
        return self.updates.push({"callback_query": {
            "id": query_id, "from": sender, "message": message_to_api(msg, chat, self.bot_user),
            "chat_instance": str(-chat_id), "data": data,
        }})

    def answerCallbackQuery(self, p: dict[str, Any]) -> bool:
        query = self.callbacks.get(str(p.get("callback_query_id", "")))
        if query is None or query.answered:
            raise ApiError(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        if time.monotonic() - query.at > CALLBACK_DEADLINE / time_scale():
            query.late = True
            raise ApiError(400, "Bad Request: query is too old and response timeout expired or query ID is invalid")
        text = p.get("text")
        if text is not None and len(str(text)) > 200:
            raise ApiError(400, "Bad Request: MESSAGE_TOO_LONG")
        query.answered, query.text = True, None if text is None else str(text)
        return True


@dataclass
class CallbackQuery:
    """A press of an inline button, and how the bot answered it."""

    id: str
    chat_id: int
    message_id: int
    data: str
    user_id: int
    at: float
    answered: bool = False
    text: str | None = None
    late: bool = False
    """Answered after Telegram's deadline (refused, as Telegram does)."""


CALLBACK_DEADLINE = 15.0
"""Seconds Telegram waits for `answerCallbackQuery` before the button stops spinning."""


def _reply_to(p: dict[str, Any], chat: ChatState) -> int | None:
    """The message a send replies to (`reply_parameters`), checked as the Bot API does:
    a missing one is refused unless `allow_sending_without_reply` (then no reply)."""
    reply = p.get("reply_parameters")
    if reply is None:
        return None
    if not isinstance(reply, dict) or not isinstance(reply.get("message_id"), int):
        raise ApiError(400, "Bad Request: can't parse reply parameters JSON object")
    if reply.get("chat_id") not in (None, chat.id):
        raise ApiError(400, "Bad Request: the emulator does not reply across chats")  # invented
    if reply["message_id"] in chat.messages:
        return int(reply["message_id"])
    if reply.get("allow_sending_without_reply"):
        return None
    raise ApiError(400, "Bad Request: message to be replied not found")


def _thread(p: dict[str, Any]) -> int | None:
    value = p.get("message_thread_id")
    return value if isinstance(value, int) and value > 0 else None


def _markup(p: dict[str, Any]) -> Any:
    """The inline keyboard a message keeps; an edit without one removes it, as on Telegram.
    Each button's `callback_data` is 1–64 bytes, its text non-empty."""
    markup = p.get("reply_markup")
    if isinstance(markup, str):  # sent form-encoded: JSON text
        import json

        try:
            markup = json.loads(markup)
        except ValueError:
            raise ApiError(400, "Bad Request: can't parse reply keyboard markup JSON object") from None
    if isinstance(markup, dict) and markup.get("inline_keyboard"):
        rows = markup["inline_keyboard"]
        if not isinstance(rows, list) or not all(isinstance(r, list) for r in rows):
            raise ApiError(
                400, "Bad Request: can't parse inline keyboard button: InlineKeyboardButton must be an Object"
            )
        for row in rows:
            for button in row:
                if not isinstance(button, dict) or not str(button.get("text", "")).strip():
                    raise ApiError(400, "Bad Request: text buttons are unallowed in the inline keyboard")
                data = button.get("callback_data")
                if data is not None and not (isinstance(data, str) and 1 <= len(data.encode()) <= 64):
                    raise ApiError(400, "Bad Request: BUTTON_DATA_INVALID")
        return markup
    return None


def _utf16_span(text: str, start: int, end: int) -> tuple[int, int]:
    offset = html.utf16_len(text[:start])
    return offset, html.utf16_len(text[start:end])
