"""`[channels.slack]`: the Slack app's token and secret, and its channels."""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from .base import DestinationSettings, EnvSecret, PlatformSettings

SLACK_CHANNEL_ID = re.compile(r"[CGD][A-Z0-9]{2,20}")
"""Slack conversation ids: C… (channels), G… (private channels, older), D… (DMs)."""


def _slack_channel_id(value: str) -> str:
    if not SLACK_CHANNEL_ID.fullmatch(value):
        raise ValueError(f"channel id {value!r} must look like C0123456789 (C, G or D, then capitals and digits)")
    return value


class SlackChannelSettings(DestinationSettings):
    """`[[channels.slack.channels]]`: one channel's overrides, follows and granted sessions."""

    id: str

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        return _slack_channel_id(value)


class SlackSettings(PlatformSettings):
    ALLOW_LIST: ClassVar[str] = "allowedChannels"
    TABLES: ClassVar[str] = "channels"

    token: EnvSecret = None
    """The bot token (xoxb-…); without it `serve` does not run the Slack adapter."""
    signingSecret: EnvSecret = None
    """Verifies that slash commands and events come from Slack; required with a token."""
    apiBaseUrl: str = "https://slack.com/api/"
    """Slack's Web API, or a test emulator (slack_sdk's `base_url`; ends with `/`)."""
    allowedChannels: list[str] = Field(default_factory=list)
    """Only these channel ids, each granted every session (`access = "allowlist"`);
    empty: unset."""
    channels: list[SlackChannelSettings] = Field(default_factory=list)
    agentSessions: bool = False
    """The app is declared as an agent (Slack's "Agents & AI Apps") and subscribes to
    `agent_session_stopped`: a follow's thread shows Slack's agent session, `processing`
    with Slack's own stop button while a run its agent can stop is live."""

    @field_validator("apiBaseUrl")
    @classmethod
    def _base_url(cls, value: str) -> str:
        if not re.match(r"https?://[^\s/]+", value):
            raise ValueError("must be an http(s) URL")
        return value if value.endswith("/") else value + "/"

    @field_validator("allowedChannels")
    @classmethod
    def _allowed(cls, value: list[str]) -> list[str]:
        return [_slack_channel_id(v) for v in value]

    @model_validator(mode="after")
    def _needs_secret(self) -> SlackSettings:
        if self.token and not self.signingSecret:
            raise ValueError("signingSecret is required when token is set (it verifies slash commands)")
        return self
