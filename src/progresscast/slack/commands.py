"""The Slack command surface: `/progresscast follow|unfollow|card|mode|rich|help`,
received over HTTP on the gateway, verified with the app's signing secret.

    POST /slack/commands   a slash command (form-encoded, signed)
    POST /slack/events     the Events API: answers `url_verification`; a `message`
                           event notes where someone else's message landed (the drafts
                           above it move down with their next update, `events.py`);
                           other events are acknowledged and ignored

A body is read up to 64 KiB (413 past it, before anything else looks at it), then
checked with `slack_sdk.signature.SignatureVerifier` (`X-Slack-Signature` over
`v0:<timestamp>:<body>`, timestamps older than five minutes refused): a bad or stale
signature answers 401 and nothing is done. A command
is answered at once (Slack waits three seconds) with an ephemeral reply, seen only by
the person who typed it; the drafts it asks for go through the channel's lane.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from slack_sdk.signature import SignatureVerifier
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..channels.outcome import MessageId
from ..channels.state import DraftKey
from ..config.settings import Mode, Settings, SlackSettings
from ..gateway.body import MAX_BODY, read_body
from ..gateway.state import raw_form
from ..model.card import SURROGATE_RULE, CardError, escape_lone_surrogates, has_lone_surrogate, reject_lone_surrogates
from ..model.owners import Owner, resolve_owner
from ..model.view import View
from ..render.slack_payload import Recipient, slack_draft, slack_snapshot
from .channel import NO_THREAD, allowed, effective_mode
from .events import landed

if TYPE_CHECKING:
    from .worker import SlackWorker

log = logging.getLogger("progresscast.slack")

OPENING_PATIENCE = 120.0
"""Seconds a follow whose thread is still being opened counts as made (a second
`/progresscast follow` of it meanwhile opens no second thread)."""

COMMANDS = [
    ("follow", "SESSION [AGENT] — show this session's progress card in this channel"),
    ("unfollow", "[SESSION [AGENT]] — stop following (all sessions without an argument)"),
    ("card", "show the followed cards again at the bottom of the channel"),
    ("mode", "progress|partial|block|off — what the draft shows"),
    ("rich", "on|off — Slack's plan display where it applies"),
    ("help", "what this app does and what this channel follows"),
]

USAGE = {
    "follow": "Usage: /progresscast follow SESSION [AGENT]",
    "unfollow": "Usage: /progresscast unfollow [SESSION [AGENT]]",
    "mode": "Usage: /progresscast mode progress|partial|block|off",
    "rich": "Usage: /progresscast rich on|off",
}


def _reply(text: str) -> JSONResponse:
    # Ephemeral: only the person who typed the command sees it. Plain text, no markup
    # of what they typed: Slack shows `text` as mrkdwn, so it is escaped; a lone
    # surrogate it repeats is shown as its escape (no encoder accepts one).
    escaped = escape_lone_surrogates(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return JSONResponse({"response_type": "ephemeral", "text": escaped})


@dataclass(frozen=True)
class Invocation:
    """One slash command: where it was typed, its arguments, and who typed it."""

    channel: str
    args: list[str]
    user_id: str = ""
    team_id: str = ""


class SlackCommands:
    def __init__(self, settings: Settings, worker: SlackWorker) -> None:
        assert settings.channels.slack is not None and settings.channels.slack.signingSecret
        self.settings = settings
        self.slack: SlackSettings = settings.channels.slack
        self.worker = worker
        self.state = worker.state
        self.store = worker.store
        self.verifier = SignatureVerifier(settings.channels.slack.signingSecret)
        self._opening: dict[tuple[str, Owner], float] = {}
        """Follows whose thread the channel's lane is still to open, and until when (on
        the monotonic clock) that counts as following: memory only, as the opening is."""
        self.handlers: dict[str, Callable[[Invocation], Awaitable[str]]] = {
            "follow": self.follow,
            "unfollow": self.unfollow,
            "card": self.card,
            "mode": self.mode,
            "rich": self.rich,
            "help": self.help,
        }

    def routes(self) -> list[Route]:
        return [
            Route("/slack/commands", self.command, methods=["POST"]),
            Route("/slack/events", self.event, methods=["POST"]),
        ]

    async def _verified(self, request: Request) -> bytes | None:
        # Bounded first: the signature covers the body, so it is read before it is checked.
        body = await read_body(request, MAX_BODY)
        if not self.verifier.is_valid_request(body, dict(request.headers)):
            return None
        return body

    # --- HTTP ----------------------------------------------------------------------------

    async def command(self, request: Request) -> Response:
        body = await self._verified(request)
        if body is None:
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        # Bytes that are not UTF-8 stay lone surrogates, so what they are in (a session
        # key) is refused naming the rule rather than read as another name.
        form = raw_form(body)
        for field in ("channel_id", "user_id", "team_id"):
            if has_lone_surrogate(form.get(field, "")):
                return _reply(f"Sorry, I can't read this command: {field} {SURROGATE_RULE}.")
        channel = form.get("channel_id", "")
        words = form.get("text", "").split()
        name = words[0].lower() if words else "help"
        if name != "help" and not allowed(self.slack, channel):
            return _reply(
                "Sorry, progresscast is not enabled for this channel. Ask its operator to add "
                f"channel id {channel} to channels.slack.allowedChannels."
            )
        invocation = Invocation(channel, words[1:], form.get("user_id", ""), form.get("team_id", ""))
        handler = self.handlers.get(name)
        if handler is None:
            return _reply(f"Unknown command {name!r}. " + await self.help(invocation))
        try:
            return _reply(await handler(invocation))
        except Exception:  # Redis down: say so rather than time out
            log.exception("slash command %r in %r failed", name, channel)
            return _reply("Sorry, that did not work (the store is unavailable). Try again in a moment.")

    async def event(self, request: Request) -> Response:
        body = await self._verified(request)
        if body is None:
            return JSONResponse({"error": "invalid signature"}, status_code=401)
        try:
            payload = json.loads(body)
            reject_lone_surrogates(payload)
        except CardError as exc:
            return JSONResponse({"error": escape_lone_surrogates(str(exc))}, status_code=400)
        except (ValueError, RecursionError):
            return JSONResponse({"error": "body must be JSON"}, status_code=400)
        if isinstance(payload, dict) and payload.get("type") == "url_verification":
            return JSONResponse({"challenge": str(payload.get("challenge", ""))})
        if isinstance(payload, dict) and payload.get("type") == "event_callback":
            client = self.worker.slack_channel.client
            try:
                for channel, thread, ts in landed(payload.get("event"), own_user=client.bot_user_id,
                                                  own_bot=client.bot_id):
                    await self.worker.heard(channel, thread, ts)
            except Exception:  # Redis down: acknowledged anyway (Slack would only send it again)
                log.exception("noting a Slack message event failed")
        return Response(status_code=200)

    # --- commands ------------------------------------------------------------------------

    def _owner(self, args: list[str]) -> Owner:
        agents = self.settings.agents
        return resolve_owner(
            args[0], args[1] if len(args) > 1 else None, known_agents=agents.known_set, default_agent=agents.default
        )

    @staticmethod
    def _problem(exc: CardError) -> str:
        return f"{exc.field} {exc.rule}" if exc.field else exc.rule

    async def follow(self, inv: Invocation) -> str:
        channel, args = inv.channel, inv.args
        if not 1 <= len(args) <= 2:
            return USAGE["follow"]
        try:
            owner = self._owner(args)
        except CardError as exc:
            return f"Sorry, I can't follow {args[0]}: {self._problem(exc)}."
        view = await self.store.view(owner)
        if await self._followed(channel, owner):
            added = False
        elif await self._plan_display(channel) and inv.user_id and inv.team_id:
            # A thread of its own: a new follow (a follow that cannot open one is made in
            # the channel once that is known, and may find it already followed there).
            self._follow_in_thread(channel, owner, Recipient(inv.user_id, inv.team_id), view)
            added = True
        else:
            key = DraftKey(channel, NO_THREAD, owner)
            added = await self.worker.follow(key)
            self.worker.touch(key, followed=added)
        mode = effective_mode(self.slack, channel, await self.state.prefs(channel))
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

    async def _followed(self, channel: str, owner: Owner) -> bool:
        """Does the channel follow `owner` already, in the channel or in a thread — or is
        a thread for it still being opened?"""
        now = time.monotonic()
        self._opening = {k: until for k, until in self._opening.items() if until > now}
        if (channel, owner) in self._opening:
            return True
        return any(key.owner == owner for key in await self.state.follows(channel))

    async def _plan_display(self, channel: str) -> bool:
        settings = await self.worker.slack_channel.render_settings(channel)
        return settings.rich

    def _follow_in_thread(self, channel: str, owner: Owner, recipient: Recipient, view: View) -> None:
        """The plan display streams in a thread: the channel's lane posts a message that
        starts one, paced and ordered with the channel's other calls, and then follows
        `owner` in it (in the channel, as Block Kit, when it could not be posted). The
        command does not wait for it: Slack waits three seconds for the answer, and the
        lane may be waiting for the channel's pace or a 429's Retry-After."""

        async def follow(thread: MessageId | None) -> None:
            try:
                key = DraftKey(channel, NO_THREAD if thread is None else str(thread), owner)
                if thread is not None:
                    await self.state.set_recipient(channel, str(thread), recipient)
                added = await self.worker.follow(key, view=view)
                self.worker.touch(key, followed=added)
            finally:
                self._opening.pop((channel, owner), None)

        # Until the lane has opened the thread and stored the follow; a reply the lane
        # dropped (Redis down) calls nothing back, so the mark also expires.
        self._opening[(channel, owner)] = time.monotonic() + OPENING_PATIENCE
        self.worker.say(channel, NO_THREAD, f"Progress of {owner.display_key}, in this thread.", then=follow)

    async def unfollow(self, inv: Invocation) -> str:
        channel, args = inv.channel, inv.args
        if len(args) > 2:
            return USAGE["unfollow"]
        current = await self.state.follows(channel)
        if args:
            try:
                owner = self._owner(args)
            except CardError as exc:
                return f"Sorry, {args[0]} is not a session I can follow: {self._problem(exc)}."
            targets = [k for k in current if k.owner == owner]
            if not targets:
                return f"This channel does not follow {owner.display_key}."
        else:
            targets = current
            if not targets:
                return "This channel follows no session."
        for key in targets:
            await self.state.unfollow(key)
            if str(key.thread_id) != NO_THREAD:
                await self.state.forget_recipient(channel, str(key.thread_id))
            self.worker.touch(key)  # the lane deletes the live draft
        return f"Stopped following {', '.join(k.owner.display_key for k in targets)}."

    async def card(self, inv: Invocation) -> str:
        channel = inv.channel
        follows = await self.state.follows(channel)
        if not follows:
            return "This channel follows no session. Use /progresscast follow SESSION [AGENT]."
        render = await self.worker.slack_channel.render_settings(channel)
        templates_dir = self.settings.templates.dir
        nothing, shown = [], []
        for key in follows:
            view = await self.store.view(key.owner)
            if render.mode is Mode.off:
                payload = slack_snapshot(view, render, templates_dir=templates_dir)
                if payload is None:
                    nothing.append(key.owner.display_key)
                else:
                    self.worker.send_once(key.chat_id, key.thread_id, payload)
                    shown.append(key.owner.display_key)
            elif slack_draft(view, render, templates_dir=templates_dir) is None:
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
        channel, args = inv.channel, inv.args
        if len(args) != 1 or args[0].lower() not in Mode.__members__:
            now = effective_mode(self.slack, channel, await self.state.prefs(channel))
            return f"{USAGE['mode']} (now: {now.value})."
        mode = Mode(args[0].lower())
        await self.state.set_mode(channel, mode)
        await self._touch_channel(channel)
        return f"Mode for this channel: {mode.value}."

    async def rich(self, inv: Invocation) -> str:
        channel, args = inv.channel, inv.args
        words = [a.lower() for a in args]
        if len(words) != 1 or words[0] not in ("on", "off"):
            return USAGE["rich"]
        on = words[0] == "on"
        await self.state.set_rich(channel, on)
        await self._touch_channel(channel)
        text = f"Plan display {'on' if on else 'off'} for this channel."
        if on:
            text += " Follows made from now on get their own thread, with the plan streamed to you."
            if await self.worker.slack_channel.plan_refused():
                text += " This workspace refused the plan display lately, so drafts stay Block Kit."
        return text

    async def help(self, inv: Invocation) -> str:
        channel = inv.channel
        lines = ["progresscast shows an AI agent's progress card here, in one message kept up to date."]
        lines += [f"/progresscast {name} {text}" for name, text in COMMANDS]
        if allowed(self.slack, channel):
            follows = await self.state.follows(channel)
            mode = effective_mode(self.slack, channel, await self.state.prefs(channel))
            followed = ", ".join(k.owner.display_key for k in follows) or "nothing"
            lines += ["", f"Here: following {followed}; mode {mode.value}."]
        else:
            lines += ["", "This channel is not enabled for this app."]
        return "\n".join(lines)

    async def _touch_channel(self, channel: str) -> None:
        for key in await self.state.follows(channel):
            self.worker.touch(key)


__all__ = ["COMMANDS", "SlackCommands"]
