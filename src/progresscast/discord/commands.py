"""What `/progresscast` does in a Discord channel: one handler, given one invocation
(where, who, whether they may change the channel's settings, the command word and its
arguments), answers with the text to show that person. It calls the shared worker's
methods as the other channels' commands do (`follow`, `touch`, `send_once`, the
state's follows and overrides); the transport (`interactions.py`) only turns an
interaction into an `Invocation` and the answer into an ephemeral reply, so this
module can be swapped for a handler shared by every platform.

Access: with `access = "allowlist"` (the default) a channel runs commands only when it
has a `[[channels.discord.channels]]` entry, and follows only the sessions its
`sessions` globs grant (unset: only its `follow` list); with `access = "open"` any
channel may follow any session. A session not granted is answered the same whether
or not it exists. `follow`, `unfollow`, `mode` and `rich` need the Manage Channels
permission; anyone may use `card` and `help`.
"""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..channels.state import DraftKey
from ..channels.worker import ChannelWorker
from ..config.settings import Access, Mode, Settings
from ..model.card import CardError
from ..model.owners import Owner, resolve_owner
from ..render.discord_payload import discord_draft, discord_snapshot
from .channel import NO_THREAD, DiscordChannel, allowed, effective_mode, wants_rich

log = logging.getLogger("progresscast.discord")

COMMANDS = [
    ("follow", "SESSION [AGENT] — show this session's progress card in this channel"),
    ("unfollow", "[SESSION [AGENT]] — stop following (all sessions without an argument)"),
    ("card", "show the followed cards again at the bottom of the channel"),
    ("mode", "progress|partial|block|off — what the draft shows"),
    ("rich", "on|off — Components V2 cards, or plain messages"),
    ("help", "what this bot does and what this channel follows"),
]
CHANGES = frozenset({"follow", "unfollow", "mode", "rich"})
"""Commands that change what a channel follows or how it looks: Manage Channels only."""

USAGE = {
    "follow": "Usage: /progresscast follow session [agent]",
    "unfollow": "Usage: /progresscast unfollow [session [agent]]",
    "mode": "Usage: /progresscast mode progress|partial|block|off",
    "rich": "Usage: /progresscast rich on|off",
}


@dataclass(frozen=True)
class Invocation:
    """One command: where it was typed, by whom, and what it says."""

    destination: str
    user: str
    may_change: bool
    """The person may change the channel's follows and looks (Manage Channels)."""
    word: str
    args: tuple[str, ...] = ()


class DiscordCommands:
    def __init__(self, settings: Settings, worker: ChannelWorker, channel: DiscordChannel) -> None:
        self.settings = settings
        self.discord = channel.discord
        self.channel = channel
        self.worker = worker
        self.state = channel.state
        self.store = worker.store
        self.handlers: dict[str, Callable[[Invocation], Awaitable[str]]] = {
            "follow": self.follow, "unfollow": self.unfollow, "card": self.card,
            "mode": self.mode, "rich": self.rich, "help": self.help,
        }

    async def handle(self, inv: Invocation) -> str:
        """The answer to one command (never raises: a store failure is said as one line)."""
        handler = self.handlers.get(inv.word)
        if handler is None:
            return f"Unknown command {inv.word!r}. " + await self.help(inv)
        if inv.word != "help" and not allowed(self.discord, inv.destination):
            return (
                "Sorry, progresscast is not enabled in this channel. Ask its operator to add "
                f"[[channels.discord.channels]] id = \"{inv.destination}\"."
            )
        if inv.word in CHANGES and not inv.may_change:
            return f"Sorry, /progresscast {inv.word} needs the Manage Channels permission here."
        try:
            return await handler(inv)
        except Exception:  # Redis down: say so rather than time out
            log.exception("/progresscast %r in %r failed", inv.word, inv.destination)
            return "Sorry, that did not work (the store is unavailable). Try again in a moment."

    def _owner(self, args: tuple[str, ...]) -> Owner:
        agents = self.settings.agents
        return resolve_owner(
            args[0], args[1] if len(args) > 1 else None, known_agents=agents.known_set, default_agent=agents.default
        )

    def granted(self, destination: str, owner: Owner) -> bool:
        """May this destination follow `owner`'s session?"""
        if self.discord.access is Access.open:
            return True
        config = self.discord.channels_by_id.get(destination)
        if config is None:
            return False
        if config.sessions is None:
            return owner.session_key in config.follow or owner.display_key in config.follow
        return any(fnmatch.fnmatchcase(owner.session_key, glob) for glob in config.sessions)

    async def follow(self, inv: Invocation) -> str:
        if not 1 <= len(inv.args) <= 2:
            return USAGE["follow"]
        try:
            owner = self._owner(inv.args)
        except CardError as exc:
            return f"Sorry, I can't follow {inv.args[0]}: {exc.field + ' ' if exc.field else ''}{exc.rule}."
        if not self.granted(inv.destination, owner):
            return f"Sorry, this channel may not follow {owner.display_key}. Ask its operator to grant it."
        key = DraftKey(inv.destination, NO_THREAD, owner)
        view = await self.store.view(owner)
        added = await self.worker.follow(key, view=view)
        self.worker.touch(key, followed=added)
        mode = effective_mode(self.discord, inv.destination, await self.state.prefs(inv.destination))
        name = owner.display_key
        if not added:
            text = f"This channel already follows {name}."
        elif view.empty:
            text = f"Following {name}. Its progress card will show here when the agent writes one."
        else:
            text = f"Following {name}."
        if mode is Mode.off:
            text += " Live cards are off in this channel (mode off): only final answers are posted."
        return text

    async def unfollow(self, inv: Invocation) -> str:
        if len(inv.args) > 2:
            return USAGE["unfollow"]
        current = await self.state.follows(inv.destination)
        if inv.args:
            try:
                owner = self._owner(inv.args)
            except CardError as exc:
                return f"Sorry, {inv.args[0]} is not a session I can follow: {exc.rule}."
            targets = [k for k in current if k.owner == owner]
            if not targets:
                return f"This channel does not follow {owner.display_key}."
        else:
            targets = current
            if not targets:
                return "This channel follows no session."
        for key in targets:
            await self.state.unfollow(key)
            self.worker.touch(key)  # the lane deletes the live draft
        return f"Stopped following {', '.join(k.owner.display_key for k in targets)}."

    async def card(self, inv: Invocation) -> str:
        follows = await self.state.follows(inv.destination)
        if not follows:
            return "This channel follows no session. Use /progresscast follow session [agent]."
        render = await self.channel.render_settings(inv.destination)
        templates = self.settings.templates.dir
        nothing, shown = [], []
        for key in follows:
            view = await self.store.view(key.owner)
            if render.mode is Mode.off:
                payload = discord_snapshot(view, render, templates_dir=templates)
                if payload is None:
                    nothing.append(key.owner.display_key)
                else:
                    self.worker.send_once(key.chat_id, key.thread_id, payload)
                    shown.append(key.owner.display_key)
            elif discord_draft(view, render, templates_dir=templates) is None:
                nothing.append(key.owner.display_key)
            else:
                self.worker.touch(key, fresh=True)
                shown.append(key.owner.display_key)
        parts = []
        if shown:
            parts.append(f"Showing {', '.join(shown)} again below.")
        if nothing:
            parts.append(f"Nothing to show yet for {', '.join(nothing)}.")
        return " ".join(parts)

    async def mode(self, inv: Invocation) -> str:
        words = [a.lower() for a in inv.args]
        if len(words) != 1 or words[0] not in Mode.__members__:
            now = effective_mode(self.discord, inv.destination, await self.state.prefs(inv.destination))
            return f"{USAGE['mode']} (now: {now.value})."
        mode = Mode(words[0])
        await self.state.set_mode(inv.destination, mode)
        await self._touch_all(inv.destination)
        return f"Mode for this channel: {mode.value}."

    async def rich(self, inv: Invocation) -> str:
        words = [a.lower() for a in inv.args]
        if len(words) != 1 or words[0] not in ("on", "off"):
            now = wants_rich(self.discord, inv.destination, await self.state.prefs(inv.destination))
            return f"{USAGE['rich']} (now: {'on' if now else 'off'})."
        on = words[0] == "on"
        await self.state.set_rich(inv.destination, on)
        await self._touch_all(inv.destination)
        return f"Cards in this channel: {'Components V2' if on else 'plain messages'}."

    async def help(self, inv: Invocation) -> str:
        lines = ["progresscast shows an AI agent's progress card here, in one message kept up to date."]
        lines += [f"/progresscast {name} {text}" for name, text in COMMANDS]
        if allowed(self.discord, inv.destination):
            follows = await self.state.follows(inv.destination)
            mode = effective_mode(self.discord, inv.destination, await self.state.prefs(inv.destination))
            followed = ", ".join(k.owner.display_key for k in follows) or "nothing"
            lines += ["", f"Here: following {followed}; mode {mode.value}."]
        else:
            lines += ["", "This channel is not enabled for this bot."]
        return "\n".join(lines)

    async def _touch_all(self, destination: str) -> None:
        for key in await self.state.follows(destination):
            self.worker.touch(key)


__all__ = ["COMMANDS", "DiscordCommands", "Invocation"]
