"""`[channels.discord]`: the Discord application's keys, and its channels."""

from __future__ import annotations

import re
from typing import Any, ClassVar

from pydantic import Field, field_validator, model_validator

from .base import DestinationSettings, EnvSecret, PlatformSettings, _from_env

SNOWFLAKE = re.compile(r"[0-9]{15,21}")
"""Discord ids (channels, threads, applications, guilds): 15-21 digits."""
PUBLIC_KEY = re.compile(r"[0-9a-fA-F]{64}")
"""An application's Ed25519 public key, as the developer portal shows it: 64 hex digits."""


def _snowflake(value: Any, what: str) -> str:
    # TOML readers write ids as numbers as often as strings.
    text = str(value) if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(text, str) or not SNOWFLAKE.fullmatch(text):
        raise ValueError(f"{what} {value!r} must be a Discord id: 15-21 digits, e.g. 1234567890123456789")
    return text


class DiscordChannelSettings(DestinationSettings):
    """`[[channels.discord.channels]]`: a channel or thread's overrides, follows and
    granted sessions (`sessions`; unset: only its `follow` list)."""

    id: str

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> str:
        return _snowflake(value, "id")


class DiscordSettings(PlatformSettings):
    ALLOW_LIST: ClassVar[str] = "allowedChannels"
    TABLES: ClassVar[str] = "channels"

    token: EnvSecret = None
    """The bot token; without it `serve` does not run the Discord adapter."""
    applicationId: str | None = None
    """The application's id (the developer portal's General Information); required with a token."""
    publicKey: str | None = None
    """The application's public key (hex): verifies that interactions come from Discord."""
    apiBaseUrl: str = "https://discord.com/api/v10"
    """Discord's REST API, or a test emulator."""
    richMessages: bool = True
    """Components V2 drafts (a container with the checklist); false: plain messages."""
    allowedChannels: list[str] = Field(default_factory=list)
    """Only these channel ids, each granted every session (`access = "allowlist"`);
    empty: unset."""
    channels: list[DiscordChannelSettings] = Field(default_factory=list)

    @field_validator("publicKey")
    @classmethod
    def _public_key(cls, value: str | None) -> str | None:
        resolved = _from_env(value)
        if resolved is not None and not PUBLIC_KEY.fullmatch(resolved):
            raise ValueError("must be the application's public key: 64 hex digits")
        return resolved

    @field_validator("applicationId", mode="before")
    @classmethod
    def _application(cls, value: Any) -> str | None:
        return None if value is None else _snowflake(value, "id")

    @field_validator("allowedChannels", mode="before")
    @classmethod
    def _allowed(cls, value: Any) -> Any:
        return [_snowflake(v, "channel id") for v in value] if isinstance(value, list) else value

    @field_validator("apiBaseUrl")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not re.match(r"https?://[^\s/]+", value):
            raise ValueError("must be an http(s) URL, e.g. https://discord.com/api/v10")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _needs_keys(self) -> DiscordSettings:
        if self.token and not self.applicationId:
            raise ValueError("applicationId is required when token is set (commands are registered under it)")
        if self.token and not self.publicKey and "publicKey" not in self.model_fields_set:
            raise ValueError("publicKey is required when token is set (it verifies interactions)")
        return self
