"""Typed settings (docs/configuration.md), loaded from TOML and the environment.

Secrets may be written as "env:NAME" and are read from the environment at load.
"""

from __future__ import annotations

import difflib
import ipaddress
import os
import re
import tomllib
import zlib
from functools import cached_property
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import unquote, urlsplit

from pydantic import BaseModel, Field, PrivateAttr, ValidationError, field_validator, model_validator

from ..model.owners import AGENT_ID, DEFAULT_AGENT
from ..model.validation import field_and_rule, field_path
from .base import MAX_LINE_CHARS as MAX_LINE_CHARS
from .base import MAX_LINES as MAX_LINES
from .base import Access as Access
from .base import DestinationSettings as DestinationSettings
from .base import Mode as Mode
from .base import PlatformSettings as PlatformSettings
from .base import PreviewSettings as PreviewSettings
from .base import ProgressSettings as ProgressSettings
from .base import RenderSettings as RenderSettings
from .base import StreamingSettings as StreamingSettings
from .base import _from_env, _Model
from .errors import ConfigError as ConfigError
from .matrix import MatrixRoomSettings as MatrixRoomSettings
from .matrix import MatrixSettings as MatrixSettings

RETENTION_DEFAULT = 30 * 86_400.0
"""`store.retention` unless set: 30 days."""

READ_SCOPE = "operator.read"
WRITE_SCOPE = "operator.write"
SCOPES = (READ_SCOPE, WRITE_SCOPE)


def _agent_id(value: str) -> str:
    # Agent ids go into Redis hash tags and display keys (`agent:<id>:<key>`).
    if not AGENT_ID.fullmatch(value):
        raise ValueError(
            f"agent id {value!r} must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return value


class StoreSettings(_Model):
    url: str | None = None
    """`redis://…`, `rediss://…`, `unix://…`, or `redis+cluster://host:port` (any node)."""
    shards: int | None = Field(None, ge=1, le=1024)
    """Shards of a new store (default 16); a store keeps the count it was created with."""
    maxConnections: int = Field(64, ge=1, le=10_000)
    """Redis connections a process uses for commands; more concurrent requests wait."""
    retention: float = Field(RETENTION_DEFAULT, ge=0, le=100 * 365 * 86_400)
    """How long an owner nobody writes to is kept (with its runs, activity, and what chats
    made for it), counted from its last write: seconds, or a number with a unit —
    `"30d"`, `"12h"`, `"90m"`, `"45s"`. 0 keeps everything. Recorded in the store, so
    every process (an agent hook without this config too) keeps cards as long."""

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, value: Any) -> Any:
        if isinstance(value, str):
            found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
            if not found:
                raise ValueError(f"{value!r} must be seconds, or a number with s, m, h or d (e.g. \"30d\")")
            return float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}[found.group(2)]
        return value


class AgentSettings(_Model):
    default: str = DEFAULT_AGENT
    known: list[str] = Field(default_factory=lambda: [DEFAULT_AGENT])

    @field_validator("default")
    @classmethod
    def _default(cls, value: str) -> str:
        return _agent_id(value)

    @field_validator("known")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return [_agent_id(v) for v in value]

    @property
    def known_set(self) -> frozenset[str]:
        return frozenset(self.known) | {self.default}


class GatewayToken(_Model):
    token: str
    scopes: list[str] = Field(default_factory=lambda: [READ_SCOPE])
    sessions: list[str] = Field(default_factory=lambda: ["*"])

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        for scope in value:
            if scope not in SCOPES:
                raise ValueError(f"{scope!r} is not a scope; the scopes are {' and '.join(SCOPES)}")
        return value

    @field_validator("token")
    @classmethod
    def _token(cls, value: str) -> str:
        return _from_env(value) or ""


MIN_TOKEN_CHARS = 16
"""Gateway tokens shorter than this are refused when the gateway listens beyond loopback."""


class GatewaySettings(_Model):
    listen: str = "127.0.0.1:8787"
    tokens: list[GatewayToken] = Field(default_factory=list)
    publicUrl: str | None = None
    """The address people open (`https://cards.example.org`); https here marks the login
    cookie `Secure` even when a proxy on another host terminates TLS."""
    trustedProxies: list[str] | None = None
    """Addresses (or networks) whose `X-Forwarded-Proto` / `X-Forwarded-For` are believed;
    unset: uvicorn's default (`$FORWARDED_ALLOW_IPS`, else loopback)."""
    metricsToken: str | None = None
    """Set: `GET /metrics` needs `Authorization: Bearer <it>`; unset: open."""
    maxStreamsPerToken: int = Field(20, ge=1, le=100_000)
    """Live event streams (`/v1/events`) one token may hold open at once; more are 429."""

    @field_validator("metricsToken")
    @classmethod
    def _metrics_token(cls, value: str | None) -> str | None:
        return _from_env(value)

    @field_validator("trustedProxies")
    @classmethod
    def _trusted(cls, value: list[str] | None) -> list[str] | None:
        for entry in value or []:
            if entry != "*":
                try:
                    ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    raise ValueError(f"{entry!r} must be an IP address, a network (10.0.0.0/8) or *") from None
        return value

    @field_validator("publicUrl")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^\s/]+", value):
            raise ValueError(f"{value!r} must be an http(s) URL, e.g. https://cards.example.org")
        return value

    @property
    def public_https(self) -> bool:
        return (self.publicUrl or "").lower().startswith("https://")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        _, colon, port = value.rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{value!r} must read host:port, e.g. 127.0.0.1:8787")
        return value

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host or "127.0.0.1", int(port)


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

    token: str | None = None
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

    @field_validator("token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        return _from_env(value)

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

    @property
    def destination_tables(self) -> list[ChatSettings]:
        return self.chats

    @cached_property
    def allow_list(self) -> frozenset[int]:
        return frozenset(self.allowedChats)


def bot_id_of(token: str) -> str:
    """The bot's id: the number before ':' in its token (a token of another shape: a
    digest of it, so that no secret ends up in a key name)."""
    head, colon, _ = token.partition(":")
    if colon and head.isdigit():
        return head
    return f"x{zlib.crc32(token.encode()):08x}"


class SettingError(ValueError):
    """A rule broken by a setting below the one being validated (`bots[1].token`)."""

    def __init__(self, where: str, rule: str) -> None:
        super().__init__(f"{where}: {rule}")
        self.where = where
        self.rule = rule


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


# --- Slack ------------------------------------------------------------------------------

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

    token: str | None = None
    """The bot token (xoxb-…); without it `serve` does not run the Slack adapter."""
    signingSecret: str | None = None
    """Verifies that slash commands and events come from Slack; required with a token."""
    apiBaseUrl: str = "https://slack.com/api/"
    """Slack's Web API, or a test emulator (slack_sdk's `base_url`; ends with `/`)."""
    allowedChannels: list[str] = Field(default_factory=list)
    """Only these channel ids, each granted every session (`access = "allowlist"`);
    empty: unset."""
    channels: list[SlackChannelSettings] = Field(default_factory=list)

    @property
    def destination_tables(self) -> list[SlackChannelSettings]:
        return self.channels

    @cached_property
    def allow_list(self) -> frozenset[str]:
        return frozenset(self.allowedChannels)

    @field_validator("token", "signingSecret")
    @classmethod
    def _secret(cls, value: str | None) -> str | None:
        return _from_env(value)

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


# --- Discord ----------------------------------------------------------------------------

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

    token: str | None = None
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

    @property
    def destination_tables(self) -> list[DiscordChannelSettings]:
        return self.channels

    @cached_property
    def allow_list(self) -> frozenset[str]:
        return frozenset(self.allowedChannels)

    @field_validator("token")
    @classmethod
    def _token(cls, value: str | None) -> str | None:
        return _from_env(value)

    @field_validator("access")
    @classmethod
    def _access(cls, value: Access) -> Access:
        if value is Access.pairing:
            raise ValueError("Discord takes allowlist or open (no pairing codes yet)")
        return value

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


class A2AAgentSettings(_Model):
    """One A2A agent `serve` follows (`[[a2a.agents]]`)."""

    url: str
    agentId: str | None = None
    """The cards' agent id (default: `agents.default`)."""
    contexts: list[str] = Field(default_factory=lambda: ["*"])
    """Context ids to follow; `*` (or any glob pattern) follows every matching context."""
    allowedHosts: list[str] = Field(default_factory=list)
    """Hosts (`host` or `host:port`) the agent's card may name for its interfaces besides
    the origin of `url`; by default a card pointing anywhere else is refused."""

    @field_validator("agentId")
    @classmethod
    def _agent(cls, value: str | None) -> str | None:
        return None if value is None else _agent_id(value)


class A2ASettings(_Model):
    agents: list[A2AAgentSettings] = Field(default_factory=list)
    pollSeconds: float = Field(5.0, gt=0, le=3600)
    """How often ListTasks is asked for tasks that changed."""
    backoffMaxSeconds: float = Field(30.0, gt=0, le=3600)
    """The longest wait before trying an agent (or a dropped stream) again."""
    maxClockSkew: float = Field(300.0, ge=0, le=86_400)
    """Seconds a status timestamp may be ahead of the store's clock; later ones are refused."""
    idleTimeout: float = Field(120.0, gt=0, le=86_400)
    """Seconds a task's stream may bring no event before it is subscribed to again; also
    the longest wait for any answer of an agent."""
    maxTasks: int = Field(100, ge=1, le=100_000)
    """Tasks of one agent subscribed to at once; more are followed by ListTasks alone."""


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


def _model_at(loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The settings model a location inside the config points into."""
    model: type[BaseModel] = Settings
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        inner = _model_in(field.annotation) if field else None
        if inner is None:
            return None
        model = inner
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model in an annotation such as `X`, `X | None` or `list[X]`."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _unknown_setting(path: str | Path, loc: tuple[int | str, ...]) -> ConfigError:
    name = str(loc[-1])
    model = _model_at(loc[:-1])
    known = sorted(model.model_fields) if model else []
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f" — did you mean `{close[0]}`?" if close else (f" (known here: {', '.join(known)})" if known else "")
    return ConfigError(f"config {path}: unknown setting `{field_path(loc)}`{hint}")


def _env_settings(data: Any, loc: tuple[int | str, ...] = ()) -> list[tuple[str, str]]:
    """(setting, NAME) of every `"env:NAME"` value in the raw config."""
    if isinstance(data, str):
        return [(field_path(loc), data[4:])] if data.startswith("env:") else []
    if isinstance(data, dict):
        return [found for key, value in data.items() for found in _env_settings(value, (*loc, key))]
    if isinstance(data, list):
        return [found for i, value in enumerate(data) for found in _env_settings(value, (*loc, i))]
    return []


def load_settings(path: str | Path | None = None) -> Settings:
    """Read a TOML config: `path`, else the file PROGRESSCAST_CONFIG names, else the defaults."""
    path = path or os.environ.get("PROGRESSCAST_CONFIG")
    if not path:
        return Settings()
    try:
        data: dict[str, Any] = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"config {path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"config {path}: is a directory, not a TOML file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"config {path}: cannot be read: {getattr(exc, 'strerror', None) or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config {path}: not valid TOML: {exc}") from None
    try:
        settings = Settings.model_validate(data)
    except ValidationError as exc:
        unknown = [e for e in exc.errors(include_url=False) if e["type"] == "extra_forbidden"]
        if unknown:  # a misspelt key explains the "missing" one next to it
            raise _unknown_setting(path, tuple(unknown[0]["loc"])) from None
        field, rule = field_and_rule(exc)
        below = exc.errors(include_url=False)[0].get("ctx", {}).get("error")
        if isinstance(below, SettingError):  # name the setting itself, not the table it is in
            field, rule = f"{field}.{below.where}" if field else below.where, below.rule
        raise ConfigError(f"config {path}: {field}: {rule}") from None
    settings._source = str(path)
    from_env = _env_settings(data)
    settings._env_names = dict(from_env)
    settings._unset_env = [(field, name) for field, name in from_env if not os.environ.get(name)]
    return settings
