"""`POST /telegram/<path>`: a Telegram bot's webhook (`channels.telegram.webhook`).

Any gateway whose config names the webhook accepts it, with or without the bot token:
the path picks the bot, `X-Telegram-Bot-Api-Secret-Token` must equal its `secretToken`
(403 otherwise; checked before the body is read), the body must be one JSON Update
(400) of at most MAX_UPDATE_BYTES (413).
The update is handed to the adapter that runs the bot through Redis, and answered 200
at once; a retry of an update already handed over is answered 200 and dropped. 404
for a path no bot uses, 503 while Redis does not answer or before the bot's adapter
first registered its webhook (Telegram tries again later).
"""

from __future__ import annotations

import hmac

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..config.settings import Settings, telegram_bots
from ..config.telegram import TelegramWebhookSettings
from ..http.body import parse_json, read_body
from ..http.errors import ApiError
from ..telegram.webhook import UpdateInbox, bot_of_path

MAX_UPDATE_BYTES = 256 * 1024
"""A message update is a few KiB (4,096 characters of text and their entities)."""
SECRET_HEADER = "x-telegram-bot-api-secret-token"


class TelegramWebhooks:
    """The webhook route of every configured bot, by path."""

    def __init__(self, settings: Settings, redis: object) -> None:
        self.redis = redis
        self.hooks: dict[str, TelegramWebhookSettings] = {}
        for bot in telegram_bots(settings):
            if bot.webhook is not None:
                self.hooks.setdefault(bot.webhook.path, bot.webhook)
        self._inboxes: dict[str, UpdateInbox] = {}

    async def receive(self, request: Request) -> Response:
        hook = self.hooks.get(request.url.path)
        if hook is None:
            raise ApiError(404, "not_found", "no Telegram bot has this webhook path")
        sent = request.headers.get(SECRET_HEADER, "")
        # Constant time: the comparison must not tell how much of a guess was right.
        if not hook.secretToken or not hmac.compare_digest(sent.encode(), hook.secretToken.encode()):
            raise ApiError(403, "forbidden", f"the {SECRET_HEADER} header is missing or wrong")
        update = parse_json(await read_body(request, MAX_UPDATE_BYTES))
        if not isinstance(update, dict):
            raise ApiError(400, "invalid_params", "the body must be a JSON object (a Telegram Update)")
        update_id = update.get("update_id")
        if not isinstance(update_id, int) or isinstance(update_id, bool) or update_id < 0:
            raise ApiError(
                400, "invalid_params", "update_id: must be a non-negative integer",
                field="update_id", rule="must be a non-negative integer",
            )
        inbox = await self._inbox(hook.path)
        if inbox is None:
            raise ApiError(503, "unavailable", "the bot's adapter has not started yet; try again")
        fresh = await inbox.hand_over(update)
        return JSONResponse({"ok": True, "duplicate": not fresh})

    async def _inbox(self, path: str) -> UpdateInbox | None:
        inbox = self._inboxes.get(path)
        if inbox is None:
            bot_id = await bot_of_path(self.redis, path)
            if bot_id is None:
                return None
            inbox = self._inboxes[path] = UpdateInbox(self.redis, bot_id)
        return inbox


__all__ = ["MAX_UPDATE_BYTES", "TelegramWebhooks"]
