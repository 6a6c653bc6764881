"""Typed settings (docs/configuration.md): the TOML config as one object, `Settings`.

Each table's model lives in a module of its own; `config.load` reads a file into it.
Secrets may be written as "env:NAME" and are read from the environment at load.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, PrivateAttr

from .agents import A2ASettings, AgentSettings
from .base import _Model
from .discord import DiscordSettings
from .errors import ConfigError
from .gateway import GatewaySettings
from .matrix import MatrixSettings
from .slack import SlackSettings
from .store import StoreSettings
from .telegram import TelegramSettings


class ChannelSettings(_Model):
    telegram: TelegramSettings | None = None
    slack: SlackSettings | None = None
    discord: DiscordSettings | None = None
    matrix: MatrixSettings | None = None


def telegram_bots(settings: Settings) -> list[TelegramSettings]:
    """The settings of every configured Telegram bot: `[channels.telegram]`, then each of
    `[[channels.telegram.bots]]` with what it inherits (none without `[channels.telegram]`)."""
    telegram = settings.channels.telegram
    return [] if telegram is None else telegram.every_bot


class TemplateSettings(_Model):
    dir: str | None = None


class McpSettings(_Model):
    """`progresscast mcp --http`."""

    allowedHosts: list[str] = Field(default_factory=list)
    """`Host` header values accepted besides the listen address (`mcp.example.org`,
    `mcp.example.org:8443`, or `name:*` for any port); browsers' `Origin` likewise."""


class ServeSettings(_Model):
    """How `progresscast serve` lays its parts out in processes."""

    processes: Literal["one", "split"] = "one"
    """`one`: every part on one event loop in one process. `split`: the gateway (with
    Slack, Discord, A2A, the retention sweep) in the process `serve` started as, and the
    Telegram and Matrix adapters in a child process of their own that `serve` starts,
    restarts and stops; the writes' CPU no longer starves the adapters."""


class Settings(_Model):
    store: StoreSettings = Field(default_factory=StoreSettings)
    agents: AgentSettings = Field(default_factory=AgentSettings)
    gateway: GatewaySettings = Field(default_factory=GatewaySettings)
    channels: ChannelSettings = Field(default_factory=ChannelSettings)
    templates: TemplateSettings = Field(default_factory=TemplateSettings)
    a2a: A2ASettings = Field(default_factory=A2ASettings)
    mcp: McpSettings = Field(default_factory=McpSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)

    _source: str | None = PrivateAttr(default=None)
    _unset_env: list[tuple[str, str]] = PrivateAttr(default_factory=list)
    _env_names: dict[str, str] = PrivateAttr(default_factory=dict)

    def env_name(self, field: str) -> str | None:
        """The variable an `"env:NAME"` setting (`channels.telegram.token`) was read from."""
        return self._env_names.get(field)

    def unset_env(self) -> list[tuple[str, str]]:
        """(setting, NAME) of every `"env:NAME"` setting whose variable is unset."""
        return list(self._unset_env)

    def require_env(self) -> None:
        """Raise ConfigError naming the first `"env:NAME"` setting whose variable is unset
        (checked by the commands that use secrets, not by every command)."""
        if self._unset_env:
            field, name = self._unset_env[0]
            raise ConfigError(
                f"config {self._source}: {field}: the environment variable {name} is not set "
                f"(export {name}=…, or remove the setting)"
            )
