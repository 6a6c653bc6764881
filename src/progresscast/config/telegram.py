"""`[channels.telegram]`: the bot (or bots), its chats, and its webhook."""

from __future__ import annotations

import re
import zlib
from typing import Any, ClassVar
from urllib.parse import unquote, urlsplit

from pydantic import Field, field_validator, model_validator

from .base import DestinationSettings, EnvSecret, PlatformSettings, _from_env, _Model
from .errors import SettingError


class ChatSettings(DestinationSettings):
    """`[[channels.telegram.chats]]`: one chat's overrides, follows and granted sessions."""

    id: int


WEBHOOK_PATH_PREFIX = "/telegram/"
"""Every Telegram webhook is a path under this one on the gateway."""
WEBHOOK_SECRET = re.compile(r"[A-Za-z0-9_-]{1,256}")
"""What Telegram allows as a webhook's `secret_token`."""


class TelegramWebhookSettings(_Model):
    """`[channels.telegram.webhook]`: Telegram posts updates to `url` (a gateway's
    `/telegram/…` route) instead of the adapter polling for them."""

    url: str
    secretToken: str
    """Sent back by Telegram in `X-Telegram-Bot-Api-Secret-Token`; `env:NAME` reads it."""

    @field_validator("url")
    @classmethod
    def _url(cls, value: str) -> str:
        parts = urlsplit(value)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or not parts.path.startswith(WEBHOOK_PATH_PREFIX)
            or parts.path == WEBHOOK_PATH_PREFIX
            or parts.query
            or parts.fragment
        ):
            raise ValueError(
                f"{value!r} must be an http(s) URL whose path starts with {WEBHOOK_PATH_PREFIX} "
                f"(no query), e.g. https://example.org{WEBHOOK_PATH_PREFIX}hook-path"
            )
        return value

    @field_validator("secretToken")
    @classmethod
    def _secret(cls, value: str) -> str:
        resolved = _from_env(value)
        if resolved is None:
            return ""  # an unset variable: `serve` says which (Settings.require_env)
        if not WEBHOOK_SECRET.fullmatch(resolved):
            raise ValueError("must be 1-256 characters of A-Z, a-z, 0-9, '_' and '-' (Telegram's rule)")
        return resolved

    @property
    def path(self) -> str:
        """The route the gateway serves for it: the URL's path, percent-decoded."""
        return unquote(urlsplit(self.url).path)


class TelegramSettings(PlatformSettings):
    ALLOW_LIST: ClassVar[str] = "allowedChats"
    TABLES: ClassVar[str] = "chats"

    token: EnvSecret = None
    apiBaseUrl: str = "https://api.telegram.org/bot"
    allowedChats: list[int] = Field(default_factory=list)
    botCallsPerSecond: float | None = Field(None, gt=0, le=10_000)
    """Bot API calls a second for the whole bot; unset: Telegram's ≈ 30. Raise it only
    for a Bot API server that allows more (or a benchmark against the emulator)."""
    chats: list[ChatSettings] = Field(default_factory=list)
    webhook: TelegramWebhookSettings | None = None
    """Updates by webhook (through any gateway) instead of long polling."""
    leaseSeconds: float = Field(5.0, ge=0.5, le=600)
    """Time to live of the bot's lease in Redis: a standby takes over this long (plus a
    second) after the holder died; renewed every third of it."""
    bots: list[TelegramSettings] = Field(default_factory=list)
    """More bots (`[[channels.telegram.bots]]`), each inheriting what it does not set."""

    @model_validator(mode="after")
    def _bots(self) -> TelegramSettings:
        seen: dict[str, str] = {}
        if self.token:
            seen[bot_id_of(self.token)] = "channels.telegram.token"
        hooks: dict[str, str] = {}
        if self.webhook is not None:
            hooks[self.webhook.path] = "channels.telegram.webhook.url"
        for i, bot in enumerate(self.bots):
            where = f"bots[{i}]"
            if bot.bots:
                raise SettingError(f"{where}.bots", "a bot cannot have bots of its own")
            merged = inherit(self, bot)
            if merged.token:
                earlier = seen.get(bot_id_of(merged.token))
                if earlier is not None:
                    own = "token" in bot.model_fields_set
                    raise SettingError(
                        f"{where}.token",
                        f"the same bot as {earlier}" + ("" if own else " (it inherits the token: set its own)"),
                    )
                seen[bot_id_of(merged.token)] = f"channels.telegram.{where}.token"
            if merged.webhook is not None:
                earlier = hooks.get(merged.webhook.path)
                if earlier is not None:
                    own = "webhook" in bot.model_fields_set
                    raise SettingError(
                        f"{where}.webhook.url",
                        f"the same webhook path as {earlier}"
                        + ("" if own else " (it inherits the webhook: set its own)"),
                    )
                hooks[merged.webhook.path] = f"channels.telegram.{where}.webhook.url"
        return self

    @property
    def every_bot(self) -> list[TelegramSettings]:
        """This bot, then each of `bots` with what it inherits filled in (each without
        `bots`). Made from the fields each time: a copy with other fields stays true."""
        if not self.bots:
            return [self]
        return [self.model_copy(update={"bots": []}), *(inherit(self, bot) for bot in self.bots)]

    @field_validator("apiBaseUrl")
    @classmethod
    def _api_base_url(cls, value: str) -> str:
        # python-telegram-bot appends "<token>/<method>" to it.
        if not value.startswith(("http://", "https://")) or not value.endswith("/bot"):
            raise ValueError(
                f"{value!r} must be the Bot API's URL ending in /bot (the token follows it), "
                "e.g. https://api.telegram.org/bot"
            )
        return value


def bot_id_of(token: str) -> str:
    """The bot's id: the number before ':' in its token (a token of another shape: a
    digest of it, so that no secret ends up in a key name)."""
    head, colon, _ = token.partition(":")
    if colon and head.isdigit():
        return head
    return f"x{zlib.crc32(token.encode()):08x}"


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value  # a list (chats, allowedChats) is replaced whole
    return out


def inherit(parent: TelegramSettings, bot: TelegramSettings) -> TelegramSettings:
    """`bot` with every setting it does not set taken from `parent` — whatever the
    setting is, at any depth (tables merge, lists are replaced)."""
    merged = _deep_merge(parent.model_dump(exclude={"bots"}), bot.model_dump(exclude_unset=True))
    return TelegramSettings.model_validate(merged)
