"""`progresscast status`: the store this command line uses, whether a `serve` runs on it,
the chat channels the config sets up, and what each destination follows. It starts
nothing: an embedded Redis that is not running is said so, not started."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any, TextIO

from ..config.settings import Settings
from ..store import keys
from ..store.connections import connect, redis_url
from ..store.embedded import embedded_home, is_running
from ..store.serving import running

FOLLOWS_SHOWN = 20
"""Destinations listed per channel; more are counted."""


def add_status(commands: Any, common: argparse.ArgumentParser) -> None:
    from ..arguments import example

    commands.add_parser(
        "status", help="the store in use, whether a serve runs on it, its channels and follows", parents=[common],
        description="Show the store this command line uses (--redis, $PROGRESSCAST_REDIS_URL, the config's "
        "store.url, else the embedded Redis under $PROGRESSCAST_HOME), whether a `serve` runs on it, the chat "
        "channels the config sets up and what each destination follows. Starts nothing.",
        epilog=example("progresscast status --config progresscast.toml"),
    )


def status_command(args: argparse.Namespace, settings: Settings, out: TextIO) -> None:
    url = redis_url(args.redis, settings, start=False)
    home = embedded_home(url)

    def say(name: str, text: str) -> None:
        print(f"{name:<9} {text}", file=out)

    say("config", settings._source or "none (built-in defaults)")
    say("store", f"{url} (the embedded Redis of {home})" if home else url)
    serves = running()
    here = [serve for serve in serves if serve.store == url]
    if here:
        for serve in here:
            say("serve", f"running, pid {serve.pid}" + (f", config {serve.config}" if serve.config else ""))
    else:
        elsewhere = f" (one runs on {serves[0].store}, pid {serves[0].pid})" if serves else ""
        say("serve", f"none on this store{elsewhere}")
    channels = _channels(settings)
    say("channels", ", ".join(channels) or "none configured (the web page and text only)")
    if home is not None and not is_running(Path(home)):
        say("follows", "not read: the embedded Redis is not running")
        return
    for line in asyncio.run(_follows(url, settings)):
        say("follows", line)


def _channels(settings: Settings) -> list[str]:
    configured = settings.channels
    return [
        name for name in ("telegram", "slack", "discord", "matrix") if getattr(configured, name, None) is not None
    ]


async def _follows(url: str, settings: Settings) -> list[str]:
    """One line per destination that follows something, per channel of the config."""
    from ..gateway.health import follow_channels, lease_holders
    from ..telegram.standby import bots

    redis = connect(url, settings)
    lines: list[str] = []
    try:
        telegram = [bot.bot_id for bot in bots(settings)] if settings.channels.telegram is not None else []
        for bot_id, held in (await lease_holders(redis, telegram)).items():
            lines.append(f"telegram bot {bot_id}: " + ("an adapter holds its lease" if held["held"] else "no adapter"))
        for label, namespace in follow_channels(settings).items():
            if label == "telegram" and settings.channels.telegram is None:
                continue
            destinations = sorted(str(d) for d in await redis.smembers(keys.channel_destinations(namespace)))
            for destination in destinations[:FOLLOWS_SHOWN]:
                follows = sorted(str(f) for f in await redis.smembers(keys.channel_follows(namespace, destination)))
                shown = ", ".join(_follow(f) for f in follows) or "nothing"
                lines.append(f"{label} {destination}: {shown}")
            if len(destinations) > FOLLOWS_SHOWN:
                lines.append(f"{label}: and {len(destinations) - FOLLOWS_SHOWN} more destinations")
            if not destinations:
                lines.append(f"{label}: no destination follows anything")
    finally:
        await redis.aclose()
    return lines or ["no chat channel configured"]


def _follow(entry: str) -> str:
    """"<thread> <displayKey>" as a person reads it."""
    thread, _, key = entry.partition(" ")
    return key if thread in ("", "0") else f"{key} (thread {thread})"


__all__ = ["add_status", "status_command"]
