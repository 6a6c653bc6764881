"""A destination's settings, resolved once for every platform: its own override (set with
`mode` / `rich` in the destination), else its table in the config
(`[[channels.telegram.chats]]`, `[[channels.slack.channels]]`, …), else the
platform-wide settings. Also the follows its table asks for at start-up.
"""

from __future__ import annotations

import logging
from typing import TypeVar

from ...config.agents import AgentSettings
from ...config.base import Mode, PlatformSettings, RenderSettings
from ...model.card import CardError
from ...model.needs import Notify
from ...model.owners import resolve_owner
from ..state.ids import DraftKey, Id
from ..state.prefs import ChatPrefs

T = TypeVar("T")


def _chosen(own: T | None, table: T | None, platform: T) -> T:
    """The destination's own setting, else its table's, else the platform's."""
    if own is not None:
        return own
    return table if table is not None else platform


def effective_mode(platform: PlatformSettings, destination: Id, prefs: ChatPrefs) -> Mode:
    """The destination's override, else its table's, else the platform's."""
    table = platform.table_of(destination)
    return _chosen(prefs.mode, table.mode if table is not None else None, platform.streaming.mode)


def wants_rich(platform: PlatformSettings, destination: Id, prefs: ChatPrefs) -> bool:
    """Rich drafts (Telegram's rich messages, Slack's plan display) asked for here."""
    table = platform.table_of(destination)
    return _chosen(prefs.rich, table.richMessages if table is not None else None, platform.richMessages)


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


class RenderSettingsCache:
    """Each destination's render settings, built again only when what they are made of
    changes: its overrides (read with every draft, compared by value) and whether rich
    drafts are available. The config is fixed for the life of a channel."""

    def __init__(self, platform: PlatformSettings) -> None:
        self.platform = platform
        self._built: dict[Id, tuple[ChatPrefs, bool, RenderSettings]] = {}
        self._shared: dict[tuple[object, ...], RenderSettings] = {}
        """One object per distinct value: most destinations have the same settings, and
        each model (its dict and set of fields) is ≈ 1.5 KB — per chat at 10,000 chats."""

    def get(self, destination: Id, prefs: ChatPrefs, *, rich_available: bool = True) -> RenderSettings:
        built = self._built.get(destination)
        if built is not None and built[0] == prefs and built[1] == rich_available:
            return built[2]
        settings = render_settings(self.platform, destination, prefs, rich_available=rich_available)
        settings = self._shared.setdefault(tuple(settings.__dict__.items()), settings)
        self._built[destination] = (prefs, rich_available, settings)
        return settings


def notify_of(platform: PlatformSettings, destination: Id) -> list[Notify]:
    """What pings the destination: its table's `notify`, else the platform's."""
    table = platform.table_of(destination)
    return table.notify if table is not None and table.notify is not None else platform.notify


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


__all__ = ["RenderSettingsCache", "config_follows", "effective_mode", "notify_of", "render_settings", "wants_rich"]
