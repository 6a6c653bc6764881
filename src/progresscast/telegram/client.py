"""The Telegram client: Bot API calls for drafts, and what their replies mean.

Every call returns a `channels.Outcome` instead of raising; the shared lifecycle acts on
its kind. The classification is the part that needs care:

- `rate_limited`: 429, wait `retry_after`. Nothing was applied.
- `not_modified`: the message already shows this content — as good as delivered.
- `gone` / `locked`: the message is gone (deleted, bad id) / is not ours or is too
  old; an edit target that is either is replaced by a new draft.
- `refused_content`: Telegram could not parse our HTML, or the server knows rich
  messages but refuses this one (too many blocks, empty, malformed): the payload's
  fallback is shown.
- `unsupported`: the server does not know rich messages (the method is 404, or
  `rich_message` is ignored so the edit "has no text", or refused as an unknown
  parameter): rich messages are switched off for the bot.
- `transient`: the request surely never reached Telegram (connection refused, no free
  connection in the pool): any call may be repeated.
- `unsure`: the request may have reached Telegram (timeout after sending, 5xx, a
  broken connection): edits and deletes may be repeated, a first send may not.
- `forbidden`: the chat refuses the bot (403: blocked by the user, kicked, not a member).
- `refused`: Telegram refuses this for good (a bad request).
"""

from __future__ import annotations

import logging
import warnings
from datetime import timedelta
from typing import Any

import httpx
from telegram import Bot
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
from telegram.warnings import PTBUserWarning

from .. import metrics
from ..channels.draft.outcome import MessageId, Outcome, OutcomeKind
from ..channels.draft.state import Intent
from ..channels.state.ids import Id
from ..render.payload import Payload
from ..render.telegram_payload import RICH_METHOD
from .request import NEVER_SENT, LeaseLost

log = logging.getLogger("progresscast.telegram")


# Causes after which the request surely never left this process: ours (aiohttp) and
# those of python-telegram-bot's own transport (httpx), for a `Bot` built without ours.
_NEVER_SENT = (*NEVER_SENT, httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.UnsupportedProtocol)


def _rich_unknown(low: str) -> bool:
    """A 400 that says the server does not know `rich_message`: an old server ignores
    the unknown field, so an edit carrying only it "has no text"; or it names the
    parameter as unknown."""
    return "message text is empty" in low or "unknown parameter" in low or "unknown field" in low


def classify(exc: BaseException, *, rich: bool = False) -> Outcome:
    """What a python-telegram-bot exception means for a draft."""
    text = str(exc)
    low = text.lower()
    if isinstance(exc, RetryAfter):
        with warnings.catch_warnings():  # PTB 22 warns about int vs timedelta on access
            warnings.simplefilter("ignore")
            value = exc.retry_after
        seconds = value.total_seconds() if isinstance(value, timedelta) else float(value)
        return Outcome(OutcomeKind.rate_limited, retry_after=seconds, detail=text)
    if isinstance(exc, BadRequest):  # before NetworkError: BadRequest is a subclass
        if "not modified" in low:
            return Outcome(OutcomeKind.not_modified, detail=text)
        if "not found" in low or "message_id_invalid" in low:
            return Outcome(OutcomeKind.gone, detail=text)
        if "can't be edited" in low or "can't be deleted" in low:
            return Outcome(OutcomeKind.locked, detail=text)
        if "can't parse entities" in low or "unsupported start tag" in low:
            return Outcome(OutcomeKind.refused_content, detail=text)
        if rich and _rich_unknown(low):
            return Outcome(OutcomeKind.unsupported, detail=text)
        if rich:  # the server knows rich messages: this content is the problem
            return Outcome(OutcomeKind.refused_content, detail=text)
        return Outcome(OutcomeKind.refused, detail=text)
    if isinstance(exc, (EndPointNotFound, InvalidToken)):
        # After getMe succeeded, a 404 means the method does not exist on this server.
        return Outcome(OutcomeKind.unsupported if rich else OutcomeKind.refused, detail=text)
    if isinstance(exc, Forbidden):  # blocked by the user, kicked, not a member
        return Outcome(OutcomeKind.forbidden, detail=text)
    if isinstance(exc, ChatMigrated):
        return Outcome(OutcomeKind.refused, detail=f"chat migrated to {exc.new_chat_id}")
    if isinstance(exc, LeaseLost):  # never sent
        return Outcome(OutcomeKind.transient, detail=text)
    if isinstance(exc, TimedOut):
        if isinstance(exc.__cause__, _NEVER_SENT) or "pool timeout" in low:
            return Outcome(OutcomeKind.transient, detail=text or "timed out before sending")
        return Outcome(OutcomeKind.unsure, detail=text or "timed out")
    if isinstance(exc, NetworkError):
        if isinstance(exc.__cause__, _NEVER_SENT):
            return Outcome(OutcomeKind.transient, detail=text)
        return Outcome(OutcomeKind.unsure, detail=text)
    if isinstance(exc, TelegramError):
        return Outcome(OutcomeKind.unsure, detail=text)
    return Outcome(OutcomeKind.unsure, detail=repr(exc))


def counted(method: str, outcome: Outcome) -> Outcome:
    """Count one Bot API call by method and outcome (a 429 also as rate limited)."""
    metrics.BOT_API_CALLS.labels(method, outcome.kind.value).inc()
    if outcome.kind is OutcomeKind.rate_limited:
        metrics.RATE_LIMITED.inc()
    return outcome


class TelegramClient:
    """`channels.Client` for the Bot API: each call answered with an `Outcome`."""

    def __init__(self, bot: Bot) -> None:
        self.bot = bot
        # Messages are posted with `Bot.do_api_request`, which builds no `Message` object
        # from the reply (a draft needs only its message id; parsing it was a tenth of the
        # adapter's CPU per call). python-telegram-bot suggests its own method for a method
        # it knows: not taken, on purpose. (Set here, not at import: a test's warning
        # context would drop it.)
        warnings.filterwarnings(
            "ignore", message=r"Please use 'Bot\.(sendMessage|editMessageText)'", category=PTBUserWarning
        )

    async def send(
        self, chat_id: Id, thread_id: Id, payload: Payload, *, reply_to: MessageId | None = None, silent: bool = False
    ) -> Outcome:
        """A new message; `silent` sends it with `disable_notification`, `reply_to` as a
        reply to that message (`reply_parameters`, sent even when it is gone)."""
        extra: dict[str, Any] = {}
        if silent:
            extra["disable_notification"] = True
        if reply_to is not None:
            extra["reply_parameters"] = {"message_id": int(reply_to), "allow_sending_without_reply": True}
        return await self._send(int(chat_id), int(thread_id or 0), payload.method, dict(payload.params), extra)

    async def _send(
        self, chat_id: int, thread_id: int, method: str, params: dict[str, Any], extra: dict[str, Any]
    ) -> Outcome:
        api_kwargs = {"chat_id": chat_id, "message_thread_id": thread_id or None, **params, **extra}
        try:
            result = await self.bot.do_api_request(method, api_kwargs=api_kwargs)
        except Exception as exc:
            return counted(method, classify(exc, rich=method == RICH_METHOD))
        message_id = int(result["message_id"]) if isinstance(result, dict) else None
        return counted(method, Outcome(OutcomeKind.ok, message_id=message_id))

    async def edit(self, chat_id: Id, message_id: MessageId, payload: Payload) -> Outcome:
        """Make message `message_id` show the payload."""
        return await self._edit(int(chat_id), int(message_id), payload.method, dict(payload.params))

    async def _edit(self, chat_id: int, message_id: int, method: str, params: dict[str, Any]) -> Outcome:
        # A rich payload edits with `editMessageText` too: its params carry `rich_message`
        # and no text.
        try:
            await self.bot.do_api_request(
                "editMessageText", api_kwargs={"chat_id": chat_id, "message_id": message_id, **params}
            )
        except Exception as exc:
            return counted("editMessageText", classify(exc, rich=method == RICH_METHOD))
        return counted("editMessageText", Outcome(OutcomeKind.ok, message_id=message_id))

    async def delete(self, chat_id: Id, message_id: MessageId) -> Outcome:
        try:
            await self.bot.delete_message(chat_id=int(chat_id), message_id=int(message_id))
        except Exception as exc:
            return counted("deleteMessage", classify(exc))
        return counted("deleteMessage", Outcome(OutcomeKind.ok, message_id=message_id))

    async def probe(self, chat_id: Id, message_id: int, intent: Intent) -> Outcome:
        """An identical edit of a candidate id: only "not modified" proves our unsure
        send landed there. An edit that went through changed a message of this bot we
        did not know of (`foreign`, with its id); "can't be edited" is someone else's
        (`foreign`); "not found" means nothing of ours landed there (`absent`)."""
        reply = await self._edit(int(chat_id), message_id, intent.method, intent.params)
        if reply.kind is OutcomeKind.not_modified:
            return Outcome(OutcomeKind.found, message_id=message_id, detail=reply.detail)
        if reply.kind is OutcomeKind.ok:
            return Outcome(OutcomeKind.foreign, message_id=message_id, detail="edited")
        if reply.kind is OutcomeKind.locked:
            return Outcome(OutcomeKind.foreign, detail=reply.detail)
        if reply.retryable:
            return reply
        return Outcome(OutcomeKind.absent, detail=reply.detail)

    def said(self, thread_id: Id, text: str) -> Payload:
        """What `say` sends: plain text, no parse mode (an edit with it is identical)."""
        return Payload("sendMessage", {"text": text})

    async def say(self, chat_id: Id, thread_id: Id, text: str) -> Outcome:
        """A plain-text message (command replies)."""
        return await self._send(int(chat_id), int(thread_id or 0), "sendMessage", {"text": text}, {})


__all__ = ["TelegramClient", "classify"]
