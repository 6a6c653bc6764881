"""A destination's settings, resolved once for every platform: its own override (set with
`mode` / `rich` in the destination), else its table in the config
(`[[channels.telegram.chats]]`, `[[channels.slack.channels]]`, …), else the
platform-wide settings. Also the follows its table asks for at start-up.
"""

from __future__ import annotations

import logging

from ..config.base import Mode, PlatformSettings, RenderSettings
from ..config.settings import AgentSettings
from ..model.card import CardError
from ..model.owners import resolve_owner
from .state import ChatPrefs, DraftKey, Id


def effective_mode(platform: PlatformSettings, destination: Id, prefs: ChatPrefs) -> Mode:
    """The destination's override, else its table's, else the platform's."""
    if prefs.mode is not None:
        return prefs.mode
    table = platform.table_of(destination)
    if table is not None and table.mode is not None:
        return table.mode
    return platform.streaming.mode


def wants_rich(platform: PlatformSettings, destination: Id, prefs: ChatPrefs) -> bool:
    """Rich drafts (Telegram's rich messages, Slack's plan display) asked for here."""
    if prefs.rich is not None:
        return prefs.rich
    table = platform.table_of(destination)
    if table is not None and table.richMessages is not None:
        return table.richMessages
    return platform.richMessages


def render_settings(
    platform: PlatformSettings, destination: Id, prefs: ChatPrefs, *, rich_available: bool = True
) -> RenderSettings:
    """What the destination's renderer gets. `rich_available`: False while the server
    refuses rich drafts (they are then classic whatever was asked)."""
    progress = platform.streaming.progress
    mode = effective_mode(platform, destination, prefs)
    return RenderSettings(
        mode=mode,
        maxLines=progress.maxLines,
        maxLineChars=progress.maxLineChars,
        checklistLines=platform.streaming.checklist_lines(mode),
        rich=rich_available and wants_rich(platform, destination, prefs),
    )


def config_follows(
    platform: PlatformSettings, agents: AgentSettings, *, no_thread: Id, log: logging.Logger
) -> list[DraftKey]:
    """The follows the destination tables ask for (`follow = [...]`), subscribed at
    start-up; a session that cannot be followed is said in the log and skipped."""
    out = []
    for table in platform.destination_tables:
        for session in table.follow:
            try:
                owner = resolve_owner(session, known_agents=agents.known_set, default_agent=agents.default)
            except CardError as exc:
                log.warning("%s: cannot follow %r from the config: %s", table.id, session, exc)
                continue
            out.append(DraftKey(table.id, no_thread, owner))
    return out


__all__ = ["config_follows", "effective_mode", "render_settings", "wants_rich"]
