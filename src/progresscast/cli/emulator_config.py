"""`progresscast emulator … --write-config FILE`: a whole config for trying a channel
on its emulator — a gateway token, the agents, the channel pointed at the emulator, and
the console's chat or channel granted every session — that `serve` and `doctor` take as
it is; and the commands to run next."""

from __future__ import annotations

import json
import os
import secrets
import shlex
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO
from urllib.parse import urlsplit

from ..config.errors import ConfigError
from ..config.gateway import SCOPES

TRIAL_SCOPES = ("operator.read", "operator.write", "operator.answer")
"""A trial's gateway token reads, writes and answers the agent (those the gateway knows)."""
DEFAULT_LISTEN = "127.0.0.1:8787"
"""The gateway's address in a written config (the default `[gateway] listen`)."""


@dataclass
class Emulated:
    """What a config needs to know of a running emulator."""

    platform: str
    channel: dict[str, str]
    """`[channels.<platform>]`: its token, secrets and apiBaseUrl."""
    table: str
    """The name of its destinations' tables (`chats`, `channels`, `rooms`)."""
    destination: int | str
    """The console's chat or channel."""
    listen: str = DEFAULT_LISTEN
    then: list[str] = field(default_factory=list)
    """Commands to run after `serve`, before typing (e.g. `discord register`)."""


def listen_of(url: str, option: str) -> str:
    """`host:port` of a gateway URL given on the command line (`--app`, `--interactions`)."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = None
    if parts.scheme != "http" or not parts.hostname:
        raise ConfigError(f"{option}: {url!r} is not an http:// URL of the gateway")
    return f"{parts.hostname}:{port or 80}"


def _value(value: str | int | list[str]) -> str:
    """A TOML value: JSON's strings, integers and arrays of strings are TOML's too."""
    return json.dumps(value)


def config_text(emulated: Emulated, token: str, store_url: str | None) -> str:
    """The config, as TOML."""
    lines = [
        f"# Written by `progresscast emulator {emulated.platform}`: its {emulated.platform.capitalize()} emulator "
        "only lives while that command runs.",
    ]
    if store_url:
        lines += ["[store]", f"url = {_value(store_url)}", ""]
    lines += [
        "[gateway]",
        f"listen = {_value(emulated.listen)}",
        "",
        "[[gateway.tokens]]",
        f"token = {_value(token)}",
        f"scopes = {_value([scope for scope in TRIAL_SCOPES if scope in SCOPES])}",
        'sessions = ["*"]',
        "",
        "[agents]",
        'default = "main"',
        "",
        f"[channels.{emulated.platform}]",
        *(f"{name} = {_value(value)}" for name, value in emulated.channel.items()),
        "",
        f"[[channels.{emulated.platform}.{emulated.table}]]  # the emulator's console: granted every session",
        f"id = {_value(emulated.destination)}",
        'sessions = ["*"]',
    ]
    return "\n".join(lines) + "\n"


def write_config(path: Path, text: str) -> None:
    """Write `text` whole or not at all, readable by its user alone (it holds secrets)."""
    where = path.parent
    try:
        fd, temporary = tempfile.mkstemp(dir=where, prefix=f".{path.name}.")
    except OSError as exc:
        raise ConfigError(f"--write-config: cannot write {path} ({exc.strerror})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text)
        os.replace(temporary, path)
    except OSError as exc:
        os.unlink(temporary)
        raise ConfigError(f"--write-config: cannot write {path} ({exc.strerror})") from None


def offer_config(out: TextIO, emulated: Emulated, path: str | None, store_url: str | None) -> None:
    """With `path`, write the config there and print the next commands; else print the
    channel's table to paste into a config of one's own."""
    section = f"[channels.{emulated.platform}]"
    if path is None:
        print(f"Point the {emulated.platform.capitalize()} adapter at it (or run this again with "
              "--write-config FILE for a whole config):", file=out)
        print(f"  {section}", file=out)
        for name, value in emulated.channel.items():
            print(f"  {name} = {_value(value)}", file=out)
        print(f"  [[channels.{emulated.platform}.{emulated.table}]]", file=out)
        print(f"  id = {_value(emulated.destination)}", file=out)
        print('  sessions = ["*"]', file=out)
        print(f"Without that last table the console's first command gets a pairing code: grant it with "
              f"`progresscast pairing approve {emulated.platform} CODE`.", file=out)
        return
    token = secrets.token_hex(16)
    write_config(Path(path), config_text(emulated, token, store_url))
    config = shlex.quote(path)
    print(f"Wrote {path}: a gateway token, the agents, {section} pointed at this emulator, and "
          f"{emulated.table[:-1]} {emulated.destination} granted every session.", file=out)
    print("Next, in another shell:", file=out)
    for command in [
        f"progresscast serve --config {config}",
        *(command.format(config=config) for command in emulated.then),
        f"progresscast card put --config {config} --session ticket-4821 < examples/plan.json",
    ]:
        print(f"  {command}", file=out)
    print(f"The gateway's token (for the web page and RPC) is in {path}.", file=out)


__all__ = ["DEFAULT_LISTEN", "Emulated", "config_text", "listen_of", "offer_config", "write_config"]
