"""`progresscast discord register [--guild ID]`: put the `/progresscast` slash command."""

from __future__ import annotations

import argparse
import asyncio

from ..config.errors import ConfigError
from ..config.settings import Settings
from ..discord.register import register


def discord_command(args: argparse.Namespace, settings: Settings) -> None:
    discord = settings.channels.discord
    if discord is None:
        raise ConfigError("channels.discord is not configured: add [channels.discord] (see docs/discord.md)")
    settings.require_env()
    guild = args.guild
    if guild is not None and not (guild.isdigit() and 15 <= len(guild) <= 21):
        raise ConfigError(f"--guild: {guild!r} must be a Discord server id: 15-21 digits")
    names = asyncio.run(register(discord, guild))
    where = f"in server {guild}" if guild else "globally (Discord may take a while to show it everywhere)"
    print(f"registered /{', /'.join(names)} {where}")
