"""`!pc …` commands in a Matrix room, answered through the shared channel worker
(`follow`, `touch`, `send_once`), as the Slack commands are.

One `Invocation` is what the /sync transport (`sync.py`) read from a message: where
it was typed (room and thread), by whom, whether that person may change what the
room follows and how it looks (power level 50 or more), the command word and its
arguments. `MatrixCommands.run` returns the reply; the transport sends it.

    !pc follow SESSION [AGENT]   show this session's card here (a thread: in it)
    !pc unfollow [SESSION [AGENT]]
    !pc card                     show the followed cards again at the bottom
    !pc mode progress|partial|block|off
    !pc help
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..channels.state import DraftKey
from ..config.settings import MatrixSettings, Mode, Settings
from ..model.card import CardError
from ..model.owners import Owner, resolve_owner
from ..render.matrix_payload import matrix_draft, matrix_snapshot
from .channel import allowed, effective_mode, granted

if TYPE_CHECKING:
    from ..channels.worker import ChannelWorker
    from .channel import MatrixChannel

log = logging.getLogger("progresscast.matrix")

PREFIX = "!pc"
MIN_POWER = 50
"""Power level needed to change what a room follows and how it looks (a room's moderators)."""

COMMANDS = [
    ("follow", "SESSION [AGENT] — show this session's progress card here"),
    ("unfollow", "[SESSION [AGENT]] — stop following (all sessions without an argument)"),
    ("card", "show the followed cards again at the bottom of the room"),
    ("mode", "progress|partial|block|off — what the draft shows"),
    ("help", "what this bot does and what this room follows"),
]
CHANGES = frozenset({"follow", "unfollow", "mode"})
USAGE = {
    "follow": f"Usage: {PREFIX} follow SESSION [AGENT]",
    "unfollow": f"Usage: {PREFIX} unfollow [SESSION [AGENT]]",
    "mode": f"Usage: {PREFIX} mode progress|partial|block|off",
}


def _problem(exc: CardError) -> str:
    return f"{exc.field} {exc.rule}" if exc.field else exc.rule


@dataclass(frozen=True)
class Invocation:
    room: str
    thread: str
    """The thread's root event id, or "0" for the room itself."""
    user: str
    may_change: bool
    word: str
    args: tuple[str, ...] = ()


class MatrixCommands:
    def __init__(self, settings: Settings, worker: ChannelWorker, channel: MatrixChannel) -> None:
        assert settings.channels.matrix is not None
        self.settings = settings
        self.matrix: MatrixSettings = settings.channels.matrix
        self.worker = worker
        self.channel = channel
        self.state = channel.state
        self.store = worker.store

    async def run(self, inv: Invocation) -> str:
        if inv.word != "help" and not allowed(self.matrix, inv.room):
            return (
                "Sorry, progresscast is not enabled for this room. Ask its operator to add room id "
                f"{inv.room} to [[channels.matrix.rooms]]."
            )
        if inv.word in CHANGES and not inv.may_change:
            return f"Only members with power level {MIN_POWER} or more may change what this room follows."
        handler = {
            "follow": self.follow, "unfollow": self.unfollow, "card": self.card, "mode": self.mode, "help": self.help,
        }.get(inv.word)
        if handler is None:
            return f"Unknown command {inv.word!r}. " + await self.help(inv)
        return await handler(inv)

    def _owner(self, args: tuple[str, ...]) -> Owner:
        agents = self.settings.agents
        return resolve_owner(
            args[0], args[1] if len(args) > 1 else None, known_agents=agents.known_set, default_agent=agents.default
        )

    async def follow(self, inv: Invocation) -> str:
        if not 1 <= len(inv.args) <= 2:
            return USAGE["follow"]
        try:
            owner = self._owner(inv.args)
        except CardError as exc:
            return f"Sorry, I can't follow {inv.args[0]}: {_problem(exc)}."
        if not granted(self.matrix, inv.room, owner):
            # The same answer whether or not the session exists.
            return f"This room may not follow {owner.display_key}. Ask the operator to grant it."
        key = DraftKey(inv.room, inv.thread, owner)
        added = await self.worker.follow(key)
        self.worker.touch(key, followed=added)
        view = await self.store.view(owner)
        if not added:
            text = f"This room already follows {owner.display_key}."
        elif view.empty:
            text = f"Following {owner.display_key}. Its progress card will show here when the agent writes one."
        else:
            text = f"Following {owner.display_key}."
        if effective_mode(self.matrix, inv.room, await self.state.prefs(inv.room)) is Mode.off:
            text += " Live cards are off in this room (mode off): only final answers are posted."
        return text

    async def unfollow(self, inv: Invocation) -> str:
        if len(inv.args) > 2:
            return USAGE["unfollow"]
        current = await self.state.follows(inv.room)
        if inv.args:
            try:
                owner = self._owner(inv.args)
            except CardError as exc:
                return f"Sorry, {inv.args[0]} is not a session I can follow: {_problem(exc)}."
            targets = [k for k in current if k.owner == owner]
            if not targets:
                return f"This room does not follow {owner.display_key}."
        else:
            targets = current
            if not targets:
                return "This room follows no session."
        for key in targets:
            await self.state.unfollow(key)
            self.worker.touch(key)  # the lane redacts the live draft
        return f"Stopped following {', '.join(k.owner.display_key for k in targets)}."

    async def card(self, inv: Invocation) -> str:
        follows = await self.state.follows(inv.room)
        if not follows:
            return f"This room follows no session. Use {PREFIX} follow SESSION [AGENT]."
        render = await self.channel.render_settings(inv.room)
        templates_dir = self.settings.templates.dir
        nothing, shown = [], []
        for key in follows:
            view = await self.store.view(key.owner)
            thread = str(key.thread_id) if str(key.thread_id) != "0" else None
            if render.mode is Mode.off:
                payload = matrix_snapshot(view, render, thread_root=thread, templates_dir=templates_dir)
                if payload is None:
                    nothing.append(key.owner.display_key)
                else:
                    self.worker.send_once(key.chat_id, key.thread_id, payload)
                    shown.append(key.owner.display_key)
            elif matrix_draft(view, render, templates_dir=templates_dir) is None:
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
        if len(inv.args) != 1 or inv.args[0].lower() not in Mode.__members__:
            now = effective_mode(self.matrix, inv.room, await self.state.prefs(inv.room))
            return f"{USAGE['mode']} (now: {now.value})."
        mode = Mode(inv.args[0].lower())
        await self.state.set_mode(inv.room, mode)
        for key in await self.state.follows(inv.room):
            self.worker.touch(key)
        return f"Mode for this room: {mode.value}."

    async def help(self, inv: Invocation) -> str:
        lines = ["progresscast shows an AI agent's progress card here, in one message kept up to date."]
        lines += [f"{PREFIX} {name} {text}" for name, text in COMMANDS]
        lines.append(f"Changing what the room follows or its mode needs power level {MIN_POWER}.")
        if allowed(self.matrix, inv.room):
            follows = await self.state.follows(inv.room)
            mode = effective_mode(self.matrix, inv.room, await self.state.prefs(inv.room))
            followed = ", ".join(k.owner.display_key for k in follows) or "nothing"
            lines += ["", f"Here: following {followed}; mode {mode.value}."]
        else:
            lines += ["", "This room is not enabled for this bot."]
        return "\n".join(lines)


__all__ = ["COMMANDS", "MIN_POWER", "PREFIX", "Invocation", "MatrixCommands"]
