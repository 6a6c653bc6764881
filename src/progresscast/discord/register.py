"""`progresscast discord register [--guild ID]`: put the `/progresscast` command.

Global commands reach every server the bot is in (Discord may take a while to show a
change everywhere); a guild's command shows in that server at once — good for trying
it out. Registering again replaces the definition (a bulk overwrite), so it is safe
to repeat after an upgrade.
"""

from __future__ import annotations

from typing import Any

import httpx

from ..channels.chat.commands import WORDS
from ..config.discord import DiscordSettings
from ..config.errors import ConfigError
from .rest import DiscordHTTPError, DiscordREST, RateLimited

NAME = "progresscast"
DESCRIPTION = "Follow AI agents' progress cards in this channel"
SUB_COMMAND, STRING = 1, 3

DESCRIPTIONS = {
    "follow": "show this session's progress card in this channel",
    "unfollow": "stop following (all sessions without an argument)",
    "card": "show the followed cards again at the bottom of the channel",
    "mode": "what the draft shows: progress, partial, block or off",
    "rich": "Components V2 cards, or plain messages",
    "help": "what this bot does and what this channel follows",
}
"""One subcommand per word the shared handler takes (`channels.commands.WORDS`)."""


def _string(name: str, description: str, *, required: bool = False, choices: tuple[str, ...] = ()) -> dict[str, Any]:
    option: dict[str, Any] = {"type": STRING, "name": name, "description": description, "required": required}
    if choices:
        option["choices"] = [{"name": c, "value": c} for c in choices]
    return option


_OPTIONS: dict[str, list[dict[str, Any]]] = {
    "follow": [
        _string("session", "the session key", required=True),
        _string("agent", "the agent id (default: the default agent)"),
    ],
    "unfollow": [_string("session", "the session key (none: every one)"), _string("agent", "the agent id")],
    "mode": [_string("mode", "what the draft shows", required=True, choices=("progress", "partial", "block", "off"))],
    "rich": [_string("state", "Components V2 cards or plain messages", required=True, choices=("on", "off"))],
}


def command() -> dict[str, Any]:
    """The `/progresscast` definition: one subcommand per command word."""
    options = []
    for name in WORDS:
        sub: dict[str, Any] = {"type": SUB_COMMAND, "name": name, "description": DESCRIPTIONS[name][:100]}
        if name in _OPTIONS:
            sub["options"] = _OPTIONS[name]
        options.append(sub)
    return {"name": NAME, "type": 1, "description": DESCRIPTION, "options": options}


async def register(discord: DiscordSettings, guild: str | None = None) -> list[str]:
    """Put the command (globally, or in one guild); returns the names Discord now has."""
    if not discord.token or not discord.applicationId:
        raise ConfigError("channels.discord: token and applicationId are needed to register the command")
    app = discord.applicationId
    path = f"/applications/{app}/guilds/{guild}/commands" if guild else f"/applications/{app}/commands"
    rest = DiscordREST(discord.apiBaseUrl, discord.token)
    try:
        done = await rest.request("PUT", path, json=[command()])
    except DiscordHTTPError as exc:
        if exc.status == 401:
            raise ConfigError("channels.discord.token: Discord refused it (401 Unauthorized)") from None
        raise ConfigError(f"discord register: Discord refused the command: {exc}") from None
    except RateLimited as exc:
        raise ConfigError(f"discord register: rate limited by Discord; try again in {exc.retry_after:.0f} s") from None
    except httpx.HTTPError as exc:
        raise ConfigError(f"discord register: cannot reach {discord.apiBaseUrl} ({exc})") from None
    finally:
        await rest.close()
    return [str(c.get("name")) for c in done or [] if isinstance(c, dict)]


__all__ = ["DESCRIPTION", "DESCRIPTIONS", "NAME", "command", "register"]
