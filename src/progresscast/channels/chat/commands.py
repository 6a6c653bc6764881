"""Chat commands, written once for every platform: parsing, access, replies and errors of
`follow`, `unfollow`, `card`, `mode`, `rich` and `help`.

How a platform plugs its commands in
------------------------------------
A platform's transport (Telegram updates, Slack's signed slash commands, Discord
interactions, Matrix `!pc` messages) does three things and nothing else:

1. **Build an `Invocation`** from what arrived::

       inv = Invocation(
           platform="discord",            # the `channels.<platform>` name: grants and codes are kept under it
           destination=channel_id,        # where the command was typed (chat, channel, room id)
           thread=thread_id,              # its thread/topic there, or the channel's `no_thread`
           user=user_id,                  # who typed it (logs only)
           word="follow",                 # the command word, lower case, without "/" or "!pc "
           args=("ticket-4821",),         # the words after it
           group=True,                    # several people can read the destination
           may_change=is_admin,           # async () -> bool: may this user change what the
                                          # destination follows and how it looks?
       )

   `may_change` is asked only when it matters (a `follow`, `unfollow`, `mode` or `rich`
   in a group with a grant), so a transport that needs an API call for it (Telegram's
   `getChatMember`, cached briefly: `cached_check`) makes none for strangers or for
   `card`/`help`. What it means per platform: Telegram, the chat's administrators;
   Slack, whoever can use the command in the channel (`allow`); Discord, Manage
   Channels; Matrix, power level ≥ 50. An unknown or misspelt word is passed as typed:
   it is answered with "Unknown command", the nearest command and that command's help
   line, written with the platform's prefix (`Surface.prefix`).

2. **Call the handler**: `reply = await commands.handle(inv)`, where `commands` is the
   platform's one `ChatCommands(worker, Surface(...))`, built on the platform's one
   `ChannelWorker` (`channels.worker`) whose `Channel` supplies the access policy
   (`channel.access`) and the destination settings (`channel.render_settings`).
   Before handing over a command (or any other update from a destination), a transport
   that sees updates calls `worker.spoke(destination)`: a paused destination (it had
   refused the bot) is called again.

3. **Send the reply back**: `reply` is None (say nothing: a stranger over its limits)
   or a `Reply`: `text` is plain text, already cleaned of control and bidi characters
   (escape it for the platform's markup); `urgent` is False for answers to
   destinations without a grant (they must not take the bot-wide budget's priority).
   A platform whose replies are chat messages sends them through the destination's
   lane: `worker.say(inv.destination, inv.thread, reply.text, urgent=reply.urgent)`;
   one that answers the request itself (Slack's ephemeral answer) returns the text.

The worker API the handler uses — and nothing else of it — is `follow`, `touch`, `say`,
`send_once`, `state` (follows, overrides), `store.view` and `channel`.
"""

from __future__ import annotations

import difflib
import logging
import re

from ...config.base import Mode
from ...model.card import CardError, clean_text, escape_lone_surrogates
from ...model.owners import Owner, resolve_owner
from ..state.ids import DraftKey, Id
from ..worker import ChannelWorker
from .access import Grant
from .destinations import effective_mode, wants_rich
from .invocation import Invocation, MayChange, Places, Reply, Surface, cached_check

log = logging.getLogger("progresscast.commands")

WORDS = ("follow", "unfollow", "card", "mode", "rich", "help")
CHANGING = frozenset({"follow", "unfollow", "mode", "rich"})
"""Commands that change what a destination follows or how it looks: in a group, only
from those who `may_change`."""
MODES_SHOWN = (Mode.progress, Mode.partial, Mode.block, Mode.off)
_CONTROLS = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")
_ECHOED_WORD = 40
"""At most this many characters of an unknown command are quoted back."""

def echo_safe(text: str) -> str:
    """Text fit to send back into a chat: no bidi or invisible characters, no controls,
    a lone surrogate as its escape (no encoder accepts one: the reply would never go)."""
    return escape_lone_surrogates(_CONTROLS.sub("", clean_text(text)))


def _problem(exc: CardError) -> str:
    """The field and the rule, as the store names them: `agentId 'x' is not …`."""
    return f"{exc.field} {exc.rule}" if exc.field else exc.rule


class ChatCommands:
    """The command handler of one platform's worker."""

    def __init__(self, worker: ChannelWorker, surface: Surface, *, places: Places | None = None) -> None:
        self.worker = worker
        self.channel = worker.channel
        self.state = worker.state
        self.store = worker.store
        self.surface = surface
        self.places = places

    # --- texts ---------------------------------------------------------------------------

    def usage(self, word: str) -> str:
        p = self.surface.prefix
        return {
            "follow": f"Usage: {p}follow SESSION [AGENT]",
            "unfollow": f"Usage: {p}unfollow [SESSION [AGENT]]",
            "mode": f"Usage: {p}mode progress|partial|block|off",
            "rich": f"Usage: {p}rich on|off",
        }[word]

    def command_lines(self) -> list[str]:
        s = self.surface
        return [
            f"{s.prefix}follow SESSION [AGENT] — show this session's progress card in this {s.noun}",
            f"{s.prefix}unfollow [SESSION [AGENT]] — stop following (all sessions without an argument)",
            f"{s.prefix}card — show the followed cards again at the bottom of the {s.noun}",
            f"{s.prefix}mode progress|partial|block|off — what the draft shows",
            f"{s.prefix}rich on|off — {s.rich_help}",
            f"{s.prefix}help — what this bot does and what this {s.noun} follows",
        ]

    def unknown(self, word: str) -> str:
        """A misspelt command: the nearest one and its help line, not the whole help."""
        p = self.surface.prefix
        typed = word if len(word) <= _ECHOED_WORD else word[: _ECHOED_WORD - 1] + "…"
        near = difflib.get_close_matches(word, WORDS, n=1, cutoff=0.6)
        if near:
            line = self.command_lines()[WORDS.index(near[0])]
            return f"Unknown command {p}{typed} — did you mean {p}{near[0]}?\n{line}"
        listed = ", ".join(f"{p}{w}" for w in WORDS)
        return f"Unknown command {p}{typed}. The commands are {listed}; {p}help says what each does."

    def pairing_text(self, inv: Invocation, code: str) -> str:
        return (
            f"This {self.surface.noun} is not paired with progresscast yet. Pairing code: {code}\n"
            f"Ask the bot's operator to run: progresscast pairing approve {inv.platform} {code}\n"
            "The code is valid for one hour."
        )

    def refusal_text(self, inv: Invocation) -> str:
        access = self.channel.access
        return (
            f"Sorry, this bot is not enabled for this {self.surface.noun}. Ask its operator to add "
            f"{self.surface.noun} id {inv.destination} to {access.setting}.{access.settings.ALLOW_LIST}."
        )

    def not_granted(self, owner: Owner) -> str:
        # The same words whether or not the session exists: nothing is read before it.
        return f"Sorry, this {self.surface.noun} may not follow {owner.display_key}."

    # --- the handler ---------------------------------------------------------------------

    async def handle(self, inv: Invocation) -> Reply | None:
        """Answer one command (None: say nothing). Store errors are answered too."""
        try:
            return await self._handle(inv)
        except Exception:  # Redis down: say so rather than leave the command unanswered
            log.exception("command %r in %s %r failed", inv.word, inv.platform, inv.destination)
            return Reply("Sorry, that did not work (the store is unavailable). Try again in a moment.")

    async def _handle(self, inv: Invocation) -> Reply | None:
        verdict = await self.channel.access.verdict(inv.destination)
        if verdict.grant is None:
            if verdict.code is not None:
                log.info("%s %r asked for access: pairing code issued", inv.platform, inv.destination)
                return Reply(self.pairing_text(inv, verdict.code), urgent=False)
            if verdict.refuse:
                return Reply(self.refusal_text(inv), urgent=False)
            return None
        word = inv.word.lower()
        if word not in WORDS:
            return Reply(echo_safe(self.unknown(word)))
        if inv.group and word in CHANGING and not await inv.may_change():
            return Reply(
                f"Only the {self.surface.noun}'s administrators can change what it follows or how it looks "
                f"({self.surface.prefix}card and {self.surface.prefix}help are open to everyone)."
            )
        if word == "follow":
            text = await self.follow(inv, verdict.grant)
        elif word == "unfollow":
            text = await self.unfollow(inv)
        elif word == "card":
            text = await self.card(inv)
        elif word == "mode":
            text = await self.mode(inv)
        elif word == "rich":
            text = await self.rich(inv)
        else:
            text = await self.help(inv)
        return Reply(echo_safe(text))

    def _owner(self, args: tuple[str, ...]) -> Owner:
        agents = self.channel.access.agents
        return resolve_owner(
            args[0], args[1] if len(args) > 1 else None, known_agents=agents.known_set, default_agent=agents.default
        )

    def _scope(self, inv: Invocation) -> Id | None:
        """The thread whose follows a command concerns: the one it was typed in, or every
        thread of the destination where the platform makes follows elsewhere (Slack)."""
        return None if self.places is not None else inv.thread

    async def _followed(self, inv: Invocation, owner: Owner) -> bool:
        if self.places is not None and self.places.opening(inv.destination, owner):
            return True
        return any(key.owner == owner for key in await self.state.follows.of(inv.destination, self._scope(inv)))

    async def follow(self, inv: Invocation, grant: Grant) -> str:
        args, noun = inv.args, self.surface.noun
        if not 1 <= len(args) <= 2:
            return self.usage("follow")
        try:
            owner = self._owner(args)
        except CardError as exc:
            return f"Sorry, I can't follow {args[0]}: {_problem(exc)}."
        if not grant.covers(owner):
            return self.not_granted(owner)
        # Everything is read before the draft is touched: a touched draft's lane may call
        # as soon as this yields, and the reply is to go first.
        prefs = await self.state.prefs.of(inv.destination)
        view = await self.store.view(owner)
        if await self._followed(inv, owner):
            added = False
        elif self.places is not None and await self.places.follow_elsewhere(inv, owner, view):
            added = True
        else:
            key = DraftKey(inv.destination, inv.thread, owner)
            added = await self.worker.follow(key, view=view)
            self.worker.touch(key, followed=added)
        name = owner.display_key
        if not added:
            text = f"This {noun} already follows {name}."
        elif view.empty:
            text = f"Following {name}. Its progress card will show here when the agent writes one."
        else:
            text = f"Following {name}."
        if effective_mode(self.channel.platform, inv.destination, prefs) is Mode.off:
            text += f" Live cards are off in this {noun} ({self.surface.prefix}mode off): only final answers are sent."
        return text

    async def unfollow(self, inv: Invocation) -> str:
        args, noun = inv.args, self.surface.noun
        if len(args) > 2:
            return self.usage("unfollow")
        current = await self.state.follows.of(inv.destination, self._scope(inv))
        if args:
            try:
                owner = self._owner(args)
            except CardError as exc:
                return f"Sorry, {args[0]} is not a session I can follow: {_problem(exc)}."
            targets = [k for k in current if k.owner == owner]
            if not targets:
                return f"This {noun} does not follow {owner.display_key}."
        else:
            targets = current
            if not targets:
                return f"This {noun} follows no session."
        for key in targets:
            await self.state.follows.remove(key)
            if self.places is not None:
                await self.places.unfollowed(key)
            self.worker.touch(key)  # the lane deletes the live draft
        return f"Stopped following {', '.join(k.owner.display_key for k in targets)}."

    async def card(self, inv: Invocation) -> str:
        follows = await self.state.follows.of(inv.destination, self._scope(inv))
        if not follows:
            return f"This {self.surface.noun} follows no session. Use {self.surface.prefix}follow SESSION [AGENT]."
        prefs = await self.state.prefs.of(inv.destination)
        nothing, shown = [], []
        snapshots, fresh = [], []
        for key in follows:
            view = await self.store.view(key.owner)
            renderers = await self.channel.renderers(key, prefs)
            if renderers.mode is Mode.off:
                # No live draft here: a one-off snapshot of the progress card.
                payload = renderers.snapshot(view)
                if payload is None:
                    nothing.append(key.owner.display_key)
                else:
                    snapshots.append((key, payload))
                    shown.append(key.owner.display_key)
            elif renderers.draft(view) is None:
                nothing.append(key.owner.display_key)
            else:
                fresh.append(key)
                shown.append(key.owner.display_key)
        # Asked of the lanes only now (no await until the reply is handed over): it goes first.
        for key, payload in snapshots:
            self.worker.send_once(key.chat_id, key.thread_id, payload)
        for key in fresh:
            self.worker.touch(key, fresh=True)
        parts = []
        if shown:
            parts.append(f"Showing {', '.join(shown)} again below.")
        if nothing:
            parts.append(f"Nothing to show yet for {', '.join(nothing)}.")
        return " ".join(parts)

    async def mode(self, inv: Invocation) -> str:
        args = inv.args
        if len(args) != 1 or args[0].lower() not in Mode.__members__:
            prefs = await self.state.prefs.of(inv.destination)
            now = effective_mode(self.channel.platform, inv.destination, prefs)
            modes = ", ".join(m.value for m in MODES_SHOWN)
            wrong = f"{args[0]} is not a mode; the modes are {modes}. " if len(args) == 1 else ""
            return f"{wrong}{self.usage('mode')} (now: {now.value})."
        mode = Mode(args[0].lower())
        await self.state.prefs.set_mode(inv.destination, mode)
        await self._touch_all(inv.destination)
        return f"Mode for this {self.surface.noun}: {mode.value}."

    async def rich(self, inv: Invocation) -> str:
        words = [a.lower() for a in inv.args]
        if len(words) != 1 or words[0] not in ("on", "off"):
            return self.usage("rich")
        on = words[0] == "on"
        await self.state.prefs.set_rich(inv.destination, on)
        await self._touch_all(inv.destination)
        name = self.surface.rich_name
        text = f"{name[:1].upper()}{name[1:]} {'on' if on else 'off'} for this {self.surface.noun}."
        if on:
            text += self.surface.rich_on_note
            if await self.channel.rich_refused():
                text += self.surface.rich_refused_note
        return text

    async def help(self, inv: Invocation) -> str:
        lines = ["progresscast shows an AI agent's progress card here, in one message kept up to date."]
        lines += self.command_lines()
        follows = await self.state.follows.of(inv.destination, self._scope(inv))
        prefs = await self.state.prefs.of(inv.destination)
        platform = self.channel.platform
        mode = effective_mode(platform, inv.destination, prefs)
        rich = wants_rich(platform, inv.destination, prefs) and not await self.channel.rich_refused()
        followed = ", ".join(k.owner.display_key for k in follows) or "nothing"
        lines += [
            "",
            f"Here: following {followed}; mode {mode.value}; {self.surface.rich_name} {'on' if rich else 'off'}.",
        ]
        return "\n".join(lines)

    async def _touch_all(self, destination: Id) -> None:
        for key in await self.state.follows.of(destination):
            self.worker.touch(key)


__all__ = [
    "CHANGING",
    "WORDS",
    "ChatCommands",
    "Invocation",
    "MayChange",
    "Places",
    "Reply",
    "Surface",
    "cached_check",
    "echo_safe",
]
