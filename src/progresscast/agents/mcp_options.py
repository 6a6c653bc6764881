"""`progresscast mcp`'s options, checked before the MCP SDK is imported: the SDK takes
about a second to import, and a mistyped option is answered at once."""

from __future__ import annotations

import argparse
import os
import re
from dataclasses import dataclass
from pathlib import Path

from ..config.settings import Settings
from ..model.card import CardError
from ..model.owners import Owner, resolve_option_owner

TOOL_NAMES = ("progress_card", "update_plan", "ask_person")


class McpUsageError(Exception):
    """A bad option: one line on stderr, exit status 2."""


@dataclass(frozen=True)
class McpOptions:
    tools: tuple[str, ...]
    """The tools offered to the model."""
    session: str
    agent: str | None
    """`--agent` as given (through a gateway, resolved with the gateway's agents)."""
    listen: tuple[str, int] | None
    """Where `--http` serves (None: stdio)."""
    gateway: str | None
    """The gateway the cards are written through (`--gateway`; None: the store itself)."""
    token: str | None
    """The gateway's token (None without a gateway)."""
    owner: Owner | None
    """Whose card the server writes on the store path. Through a gateway it is resolved
    with the gateway's agents once the server starts (None here)."""


def mcp_options(args: argparse.Namespace, settings: Settings) -> McpOptions:
    tools = offered_tools(args.tools)
    session = args.session or os.environ.get("PROGRESSCAST_SESSION") or session_from_directory(Path.cwd())
    listen = None if args.http is None else listen_of(args.http)
    if args.gateway:
        token = args.token or os.environ.get("PROGRESSCAST_TOKEN")
        if not token:
            raise McpUsageError("--token: required with --gateway (or set PROGRESSCAST_TOKEN)")
        return McpOptions(tools, session, args.agent, listen, args.gateway, token, None)
    owner = owner_of(session, args.agent, settings.agents.known_set, settings.agents.default)
    return McpOptions(tools, session, args.agent, listen, None, None, owner)


def session_from_directory(directory: Path) -> str:
    """The directory's name as a session key: whitespace and braces become '-'."""
    name = re.sub(r"[\s{}]+", "-", "".join(ch for ch in directory.name if ch.isprintable())).strip("-")
    return name[:200] or "session"


def offered_tools(value: str | None) -> tuple[str, ...]:
    if value is None:
        return TOOL_NAMES
    names = tuple(dict.fromkeys(n.strip() for n in value.split(",") if n.strip()))
    for name in names:
        if name not in TOOL_NAMES:
            raise McpUsageError(f"--tools: '{name}' is not one of {', '.join(TOOL_NAMES)}")
    if not names:
        raise McpUsageError(f"--tools: name at least one of {', '.join(TOOL_NAMES)}")
    return names


def owner_of(session: str, agent: str | None, known: frozenset[str], default: str) -> Owner:
    try:
        return resolve_option_owner(session, agent, known_agents=known, default_agent=default)
    except CardError as exc:
        raise McpUsageError(str(exc)) from None


def listen_of(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit():
        raise McpUsageError(f"--http: '{value}' must be HOST:PORT")
    if not 0 <= int(port) <= 65535:
        raise McpUsageError(f"--http: port {port} is out of range (0 to 65535)")
    return host.strip("[]") or "127.0.0.1", int(port)


__all__ = ["TOOL_NAMES", "McpOptions", "McpUsageError", "mcp_options", "owner_of", "session_from_directory"]
