"""The emulated Bot API's webhook: setWebhook's checks, and the sender that POSTs each
update to the webhook URL like Telegram does (in order, one at a time, with the
`X-Telegram-Bot-Api-Secret-Token` header; an answer that is not 2xx, or none, is
retried with growing pauses, and after the last try the update is given up on).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from ._loopback import end_task
from ._params import int_param, text_param
from ._state import ApiError
from ._updates import UpdateQueue


class WebhookOwner(Protocol):
    """What the sender needs of the emulated Telegram: its updates and its webhook."""

    updates: UpdateQueue
    webhook: Webhook | None
    webhook_last_error: tuple[int, str] | None

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"
SECRET_TOKEN = re.compile(r"[A-Za-z0-9_-]*")
WEBHOOK_PORTS = (80, 88, 443, 8443)
MAX_URL = 500  # not documented; telegram-bot-api's own limit is similar
UPDATE_TYPES = frozenset(
    {
        "message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
        "business_message", "edited_business_message", "deleted_business_messages", "message_reaction",
        "message_reaction_count", "inline_query", "chosen_inline_result", "callback_query", "shipping_query",
        "pre_checkout_query", "purchased_paid_media", "poll", "poll_answer", "my_chat_member", "chat_member",
        "chat_join_request", "chat_boost", "removed_chat_boost",
    }
)  # fmt: skip


@dataclass
class Webhook:
    url: str
    secret_token: str = ""
    allowed_updates: list[str] = field(default_factory=list)
    """Empty: every type (but the ones Telegram sends only on request)."""
    max_connections: int = 40

    def wants(self, update: dict[str, Any]) -> bool:
        kinds = [k for k in update if k != "update_id"]
        return not self.allowed_updates or any(k in self.allowed_updates for k in kinds)


@dataclass
class Delivery:
    """One POST of an update to the webhook, as the emulator saw it answered."""

    update_id: int
    status: int | None
    """The HTTP status; None when no answer came (refused, timed out, or dropped)."""
    error: str | None = None


def check_set_webhook(p: dict[str, Any], previous: Webhook | None, *, local_mode: bool) -> Webhook | None:
    """The webhook setWebhook asks for (None: an empty url removes it), or ApiError.
    `local_mode` is telegram-bot-api's `--local`: any port, and http as well as https."""
    url = text_param(p, "url")
    if not url:
        return None
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if parts.scheme not in ("http", "https") or not parts.hostname or port == -1 or len(url) > MAX_URL:
        raise ApiError(400, "Bad Request: invalid webhook URL specified")
    if parts.scheme != "https" and not local_mode:
        raise ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
    if port is not None and port not in WEBHOOK_PORTS and not local_mode:
        raise ApiError(400, "Bad Request: bad webhook: Webhook can be set up only on ports 80, 88, 443 or 8443")
    secret = text_param(p, "secret_token")
    if len(secret) > 256:
        raise ApiError(400, "Bad Request: secret token is too long")
    if not SECRET_TOKEN.fullmatch(secret):
        raise ApiError(400, "Bad Request: secret token contains unallowed characters")
    max_connections = int_param(p, "max_connections", 40)
    if not 1 <= max_connections <= 100:  # telegram-bot-api clamps instead; refusing is stricter
        raise ApiError(400, "Bad Request: max_connections must be between 1 and 100")
    allowed = p.get("allowed_updates")
    if allowed is None:  # "If not specified, the previous setting will be used."
        allowed_updates = list(previous.allowed_updates) if previous else []
    elif isinstance(allowed, list) and all(isinstance(a, str) for a in allowed):
        allowed_updates = [a for a in allowed if a in UPDATE_TYPES]  # unknown types are ignored
    else:
        raise ApiError(400, "Bad Request: can't parse allowed updates JSON object")
    return Webhook(url, secret, allowed_updates, max_connections)


class WebhookSender:
    """Delivers the queue's pending updates to the webhook while one is set."""

    def __init__(
        self,
        telegram: WebhookOwner,
        *,
        retry_delays: Sequence[float],
        timeout: float,
        on_change: Callable[[], None],
    ) -> None:
        self.telegram = telegram
        self.updates: UpdateQueue = telegram.updates
        self.retry_delays = tuple(retry_delays)
        self.timeout = timeout
        self.on_change = on_change
        self.deliveries: list[Delivery] = []
        self.lose_answers = 0
        """Answers to treat as never received (the update was delivered, Telegram retries it)."""
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run())

    async def stop(self) -> None:
        await end_task(self._task)
        self._task = None

    async def _run(self) -> None:
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            while True:
                hook = self.telegram.webhook
                update = self.updates.first() if hook is not None else None
                if hook is None or update is None:
                    await self.updates.wait()
                    continue
                if not hook.wants(update) or await self._deliver(client, update):
                    self.updates.remove(update)  # delivered, or given up on
                    self.on_change()

    async def _deliver(self, client: httpx.AsyncClient, update: dict[str, Any]) -> bool:
        """Post until an answer is 2xx or the tries run out (True); False when the webhook
        was deleted meanwhile (the update stays pending, for getUpdates)."""
        for attempt in range(len(self.retry_delays) + 1):
            if attempt:
                await asyncio.sleep(self.retry_delays[attempt - 1])
            hook = self.telegram.webhook
            if hook is None:
                return False
            if await self._post(client, hook, update):
                return True
        return True

    async def _post(self, client: httpx.AsyncClient, hook: Webhook, update: dict[str, Any]) -> bool:
        headers = {"Content-Type": "application/json"}
        if hook.secret_token:
            headers[SECRET_HEADER] = hook.secret_token
        delivery = Delivery(update["update_id"], None)
        self.deliveries.append(delivery)
        try:
            answer = await client.post(hook.url, content=json.dumps(update), headers=headers)
        except httpx.HTTPError as exc:
            delivery.error = type(exc).__name__
            self.telegram.webhook_last_error = (int(time.time()), f"Connection failed: {exc}")
            self.on_change()
            return False
        delivery.status = answer.status_code
        if self.lose_answers > 0:
            self.lose_answers -= 1
            delivery.status, delivery.error = None, "answer lost (lose_webhook_answers)"
            self.telegram.webhook_last_error = (int(time.time()), "Read timeout expired")
            self.on_change()
            return False
        self.on_change()
        if 200 <= answer.status_code < 300:
            return True
        wrong = f"Wrong response from the webhook: {answer.status_code} {answer.reason_phrase}"
        self.telegram.webhook_last_error = (int(time.time()), wrong)
        return False


__all__ = ["SECRET_HEADER", "Delivery", "Webhook", "WebhookSender", "check_set_webhook"]
