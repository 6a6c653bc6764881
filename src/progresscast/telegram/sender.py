"""Bot API calls for drafts, and what their errors mean.

Every call returns a `Reply` instead of raising: the worker decides what to do from
its `Outcome`. The classification is the part that needs care:

- `flood`: 429, wait `retry_after`. Nothing was applied.
- `not_modified`: the message already shows this content — as good as delivered.
- `missing` / `not_editable`: the message is gone (deleted, bad id) / is not ours or
  is too old; an edit target that is either is replaced by a new draft.
- `bad_entities`: Telegram could not parse our HTML; resend as plain text.
- `rich_rejected`: the server does not know rich messages (the method is 404, or
  `rich_message` is ignored so the edit "has no text", or refused as an unknown
  parameter): rich messages are switched off for the bot.
- `rich_refused`: the server knows rich messages but refuses this one (too many
  blocks, empty, malformed): this payload falls back to classic HTML, the bot keeps
  rich messages.
- `retry`: the request surely never reached Telegram (connection refused, no free
  connection in the pool): any call may be repeated.
- `unsure`: the request may have reached Telegram (timeout after sending, 5xx, a
  broken connection): edits and deletes may be repeated, a first send may not.
- `forbidden` / `rejected`: Telegram refuses this for good (bot blocked, bad request).
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from datetime import timedelta
from enum import StrEnum
from typing import Any

import httpx
from telegram import Bot, Message
from telegram.error import (
    BadRequest,
    ChatMigrated,
    EndPointNotFound,
    Forbidden,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TelegramError,
    TimedOut,
)

from ..drafts import RICH_METHOD

log = logging.getLogger("progresscast.telegram")


class Outcome(StrEnum):
    ok = "ok"
    not_modified = "not_modified"
    missing = "missing"
    not_editable = "not_editable"
    bad_entities = "bad_entities"
    rich_rejected = "rich_rejected"
    rich_refused = "rich_refused"
    flood = "flood"
    retry = "retry"
    unsure = "unsure"
    forbidden = "forbidden"
    rejected = "rejected"


@dataclass(frozen=True)
class Reply:
    outcome: Outcome
    message_id: int | None = None
    retry_after: float = 0.0
    detail: str = ""

    @property
    def delivered(self) -> bool:
        return self.outcome in (Outcome.ok, Outcome.not_modified)


# Causes (httpx exceptions) after which the request surely never left this process.
_NEVER_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def _rich_unknown(low: str) -> bool:
    """A 400 that says the server does not know `rich_message`: an old server ignores
    the unknown field, so an edit carrying only it "has no text"; or it names the
    parameter as unknown."""
    return "message text is empty" in low or "unknown parameter" in low or "unknown field" in low


def classify(exc: BaseException, *, rich: bool = False) -> Reply:
    """What a python-telegram-bot exception means for a draft."""
    text = str(exc)
    low = text.lower()
    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():  # PTB 22 warns about int vs timedelta on access
            warnings.simplefilter("ignore")
            value = exc.retry_after
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
        return Reply(Outcome.flood, retry_after=seconds, detail=text)
    if isinstance(exc, BadRequest):  # before NetworkError: BadRequest is a subclass
        if "not modified" in low:
            return Reply(Outcome.not_modified, detail=text)
        if "not found" in low or "message_id_invalid" in low:
            return Reply(Outcome.missing, detail=text)
        if "can't be edited" in low or "can't be deleted" in low:
            return Reply(Outcome.not_editable, detail=text)
        if "can't parse entities" in low or "unsupported start tag" in low:
            return Reply(Outcome.bad_entities, detail=text)
        if rich and _rich_unknown(low):
            return Reply(Outcome.rich_rejected, detail=text)
        if rich:  # the server knows rich messages: this content is the problem
            return Reply(Outcome.rich_refused, detail=text)
        return Reply(Outcome.rejected, detail=text)
    if isinstance(exc, (EndPointNotFound, InvalidToken)):
        # After getMe succeeded, a 404 means the method does not exist on this server.
        return Reply(Outcome.rich_rejected if rich else Outcome.rejected, detail=text)
    if isinstance(exc, Forbidden):
        return Reply(Outcome.forbidden, detail=text)
    if isinstance(exc, ChatMigrated):
        return Reply(Outcome.rejected, detail=f"chat migrated to {exc.new_chat_id}")
    if isinstance(exc, TimedOut):
        if isinstance(exc.__cause__, _NEVER_SENT) or "pool timeout" in low:
            return Reply(Outcome.retry, detail=text or "timed out before sending")
        return Reply(Outcome.unsure, detail=text or "timed out")
    if isinstance(exc, NetworkError):
        if isinstance(exc.__cause__, _NEVER_SENT):
            return Reply(Outcome.retry, detail=text)
        return Reply(Outcome.unsure, detail=text)
    if isinstance(exc, TelegramError):
        return Reply(Outcome.unsure, detail=text)
    return Reply(Outcome.unsure, detail=repr(exc))


def _split(params: dict[str, Any]) -> tuple[str | None, dict[str, Any]]:
    """(parse_mode, the other parameters besides text) of a classic payload."""
    rest = {k: v for k, v in params.items() if k not in ("text", "parse_mode")}
    return params.get("parse_mode"), rest


class Sender:
    """The Bot API calls a draft needs, each answered with a `Reply`."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot

    async def send(self, chat_id: int, thread_id: int, method: str, params: dict[str, Any]) -> Reply:
        rich = method == RICH_METHOD
        thread = thread_id or None
        try:
            if rich:
                result = await self.bot.do_api_request(
                    RICH_METHOD, api_kwargs={"chat_id": chat_id, "message_thread_id": thread, **params}
                )
                message_id = int(result["message_id"]) if isinstance(result, dict) else None
            else:
                parse_mode, rest = _split(params)
                message = await self.bot.send_message(
                    chat_id=chat_id,
                    text=params["text"],
                    parse_mode=parse_mode,
                    message_thread_id=thread,
                    api_kwargs=rest or None,
                )
                message_id = message.message_id
        except Exception as exc:
            return classify(exc, rich=rich)
        return Reply(Outcome.ok, message_id=message_id)

    async def edit(self, chat_id: int, message_id: int, method: str, params: dict[str, Any]) -> Reply:
        """Make message `message_id` show the payload `method`/`params` would send."""
        rich = method == RICH_METHOD
        try:
            if rich:
                # python-telegram-bot 22 (Bot API 10.0) has no `rich_message` parameter yet;
                # `text=None` is dropped from the request.
                await self.bot.edit_message_text(
                    text=None,  # type: ignore[arg-type]
                    chat_id=chat_id,
                    message_id=message_id,
                    api_kwargs=dict(params),
                )
            else:
                parse_mode, rest = _split(params)
                await self.bot.edit_message_text(
                    text=params["text"],
                    chat_id=chat_id,
                    message_id=message_id,
                    parse_mode=parse_mode,
                    api_kwargs=rest or None,
                )
        except Exception as exc:
            return classify(exc, rich=rich)
        return Reply(Outcome.ok, message_id=message_id)

    async def delete(self, chat_id: int, message_id: int) -> Reply:
        try:
            await self.bot.delete_message(chat_id=chat_id, message_id=message_id)
        except Exception as exc:
            return classify(exc)
        return Reply(Outcome.ok, message_id=message_id)

    async def say(self, chat_id: int, thread_id: int, text: str) -> Reply:
        """A plain-text message (command replies)."""
        try:
            message: Message = await self.bot.send_message(
                chat_id=chat_id, text=text, message_thread_id=thread_id or None
            )
        except Exception as exc:
            return classify(exc)
        return Reply(Outcome.ok, message_id=message.message_id)
