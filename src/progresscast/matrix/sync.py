"""The Matrix command transport: `/sync` long polling for the bot account (one reader,
the holder of the account's lease), turning room events into what the adapter does.

- A `!pc …` message (`m.text`, not an edit, not the bot's own) becomes one
  `channels.commands.Invocation` — room, thread (`m.thread` root or "0"), sender, the
  command word and its arguments, and who may change what the room follows: a member
  whose power level in the room is at least 50 (read from the room's
  `m.room.power_levels` only when the handler asks) — handed to the one shared
  handler (`ChatCommands`); its reply goes back through the room's lane, in the
  thread it was typed in, as an `m.notice` that mentions nobody.
- Any event from someone else in a room tells the worker the room speaks (a room
  paused because it refused the bot is called again).
- An invite to a room with a grant is accepted. Any other invite follows `access`:
  `pairing` (the default) accepts it and answers with the room's pairing code (the
  shared handler's answer to a stranger); `allowlist` declines it, and the log names
  the room, so that an operator can grant it; `open` accepts every invite.
- A message someone else posts (`m.room.message`, `m.sticker`; not an edit) is
  noted for the drafts of its thread (`ChannelWorker.heard`): a draft above it moves
  to the bottom with its next update. Event ids say nothing of which came later, so
  what is noted is when it was posted (`heard_in`), compared with when the draft was
  sent (`conduct.under`).
- A live draft someone else redacted is shown again as a new message (edits of a
  redacted event would go nowhere).
- A reaction, or a reply, someone else sent may answer an ask or stop a run
  (`matrix.presses`).
- A room that is (or becomes) end-to-end encrypted is told once that the bot does not
  take part in encrypted rooms; its follows end and the bot leaves it. Encrypted
  messages cannot be read without keys, which the bot does not keep.

The `next_batch` token is stored in Redis once a response's events were handled, so a
restarted reader (or the standby that takes the lease over) goes on where the last one
stopped: nothing is replayed, nothing lost. Without a token (the very first start)
the room history is skipped; pending invites are still handled.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

from nio import (
    AsyncClient,
    InviteInfo,
    InviteMemberEvent,
    JoinResponse,
    RoomGetStateEventResponse,
    RoomGetStateResponse,
    SyncResponse,
)
from redis.asyncio import Redis

from ..backoff import Backoff, Retrying
from ..channels.chat.commands import ChatCommands, Invocation, Surface
from ..channels.worker import ChannelWorker
from ..config.base import Access
from ..store import keys
from .channel import NO_THREAD, PLATFORM, MatrixChannel
from .client import Check, unfenced
from .presses import MatrixPresses

log = logging.getLogger("progresscast.matrix")

POLL_MS = 30_000
"""How long one /sync waits for news at the homeserver."""
PREFIX = "!pc"
MIN_POWER = 50
"""Power level needed to change what a room follows and how it looks (a room's moderators)."""
SURFACE = Surface(
    prefix=f"{PREFIX} ",
    noun="room",
    rich_name="rich drafts",
    rich_help="no other look in Matrix: a draft is always an HTML notice",
    rich_refused_note=" Matrix drafts have one look (an HTML notice), so nothing changes.",
)

ENCRYPTED_REFUSAL = (
    "This room is end-to-end encrypted. progresscast does not take part in encrypted rooms "
    "(it cannot read commands or post cards here), so it is leaving. Use a room without encryption."
)


def _posted(event: dict[str, Any], bot: str, types: tuple[str, ...]) -> tuple[dict[str, Any], str] | None:
    """(content, thread: its `m.thread` root or "0") of a new message someone else
    posted, or None: the bot's own, an edit (`m.replace`), a redacted one, another type."""
    if event.get("type") not in types or event.get("sender") == bot:
        return None
    content = event.get("content")
    if not isinstance(content, dict) or not content:
        return None
    relation = content.get("m.relates_to")
    relation = relation if isinstance(relation, dict) else {}
    if relation.get("rel_type") == "m.replace" or "m.new_content" in content:
        return None  # an edit changes a message in place: nothing new lands, no command runs again
    thread = NO_THREAD
    if relation.get("rel_type") == "m.thread" and isinstance(relation.get("event_id"), str):
        thread = relation["event_id"]
    return content, thread


def parse_command(event: dict[str, Any], bot: str) -> tuple[str, str, list[str]] | None:
    """(thread, word, args) of a `!pc` message, or None for any other event."""
    posted = _posted(event, bot, ("m.room.message",))
    if posted is None or posted[0].get("msgtype") != "m.text":
        return None
    content, thread = posted
    body = content.get("body")
    words = body.split() if isinstance(body, str) else []
    if not words or words[0].lower() != PREFIX:
        return None
    word = words[1].lower() if len(words) > 1 else "help"
    return thread, word, words[2:]


def heard_in(event: dict[str, Any], bot: str, now_ms: int) -> tuple[str, int] | None:
    """(thread, mark) of a message someone else posted (a command too: it is a message
    in the room like any other), or None. The mark is when it was posted, in ms: the
    homeserver's `origin_server_ts`, but never later than `now_ms`, when the bot hears
    it — with a homeserver clock ahead of the bot's, a message would otherwise look
    newer than the draft moved under it, and move it again. (A homeserver clock behind
    the bot's only makes a message posted just after a draft was sent look older than
    the draft: that one message does not move it.)"""
    posted = _posted(event, bot, ("m.room.message", "m.sticker"))
    if posted is None:
        return None
    stamp = event.get("origin_server_ts")
    at = stamp if isinstance(stamp, int) and not isinstance(stamp, bool) else now_ms
    return posted[1], min(at, now_ms)


def power_of(content: dict[str, Any], user: str) -> int:
    """A user's power level from a room's `m.room.power_levels` content."""
    users = content.get("users")
    level = users.get(user) if isinstance(users, dict) else None
    if level is None:
        level = content.get("users_default", 0)
    try:
        return int(level)
    except (TypeError, ValueError):
        return 0


def is_creator(create: dict[str, Any], user: str) -> bool:
    """Room versions 12 and later give a room's creators a power above every level and
    leave them out of `m.room.power_levels`: the sender of its `m.room.create` event
    and the event's `additional_creators`."""
    content = create.get("content")
    content = content if isinstance(content, dict) else {}
    version = str(content.get("room_version", ""))
    if not (version.isdigit() and int(version) >= 12) and "hydra" not in version:
        return False
    creators = content.get("additional_creators")
    return create.get("sender") == user or (isinstance(creators, list) and user in creators)


class FailedResponse(Exception):
    """An error response nio returned (it raises none), as the failure to retry."""


def _sources(events: list[Any]) -> list[dict[str, Any]]:
    return [e.source for e in events if isinstance(getattr(e, "source", None), dict)]


@dataclass
class MatrixSync:
    nio: AsyncClient
    redis: Redis
    channel: MatrixChannel
    worker: ChannelWorker
    commands: ChatCommands
    user_id: str
    _: KW_ONLY
    check: Check = unfenced
    poll_ms: int = POLL_MS
    backoff: Backoff = field(default_factory=Backoff)
    presses: MatrixPresses = field(init=False)

    def __post_init__(self) -> None:
        self.presses = MatrixPresses(
            self.nio, self.worker, self.user_id, self._may_change, check=self.check,
            templates_dir=self.channel.settings.templates.dir,
        )

    async def run(self) -> None:
        """Sync and handle until cancelled. A failing /sync (or Redis) is retried with
        backoff from the same position: nothing is skipped."""
        retry = Retrying("/sync failed", log=log, backoff=self.backoff)
        while True:
            await retry.run(self._sync_once)

    async def _sync_once(self) -> None:
        since = await self.redis.get(keys.mx_since(self.user_id))
        self.check()
        reply = await self.nio.sync(timeout=self.poll_ms if since else 0, since=since or None)
        if not isinstance(reply, SyncResponse):
            raise FailedResponse(reply)
        await self.handle(reply, history=since is not None)
        self.check()
        await self.redis.set(keys.mx_since(self.user_id), reply.next_batch)

    async def handle(self, reply: SyncResponse, *, history: bool) -> None:
        """One /sync response: invites, encrypted rooms, commands (`history` False: the
        first sync ever, whose timeline is the rooms' past)."""
        for room_id, invite in reply.rooms.invite.items():
            await self._guarded(self._invited(room_id, invite), "the invite to room %r", room_id)
        for room_id, info in reply.rooms.join.items():
            state = _sources(info.state)
            timeline = _sources(info.timeline.events)
            if any(e.get("type") == "m.room.encryption" for e in state + timeline):
                await self._guarded(self._encrypted(room_id), "leaving the encrypted room %r", room_id)
                continue
            if not history:
                continue
            if any(e.get("sender") != self.user_id for e in timeline):
                await self._guarded(self.worker.spoke(room_id), "room %r speaking again", room_id)
            for thread, mark in self._heard(timeline).items():
                await self._guarded(self.worker.heard(room_id, thread, mark), "a message in room %r", room_id)
            for event in timeline:
                if parse_command(event, self.user_id) is None:
                    await self._guarded(self.presses.handle(room_id, event), "an answer in room %r", room_id)
                await self._guarded(self._command(room_id, event), "a command in room %r", room_id)
                await self._guarded(self._redacted(room_id, event), "a redaction in room %r", room_id)

    def _heard(self, timeline: list[dict[str, Any]]) -> dict[str, int]:
        """The newest mark of someone else's messages in each thread (one note each)."""
        now_ms = int(self.worker.clock() * 1000)
        marks: dict[str, int] = {}
        for event in timeline:
            heard = heard_in(event, self.user_id, now_ms)
            if heard is not None:
                thread, mark = heard
                marks[thread] = max(mark, marks.get(thread, 0))
        return marks

    @staticmethod
    async def _guarded(work: Awaitable[None], what: str, room_id: str) -> None:
        """One room's business; its failure (a refused join, Redis down) is logged and
        the others go on."""
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception(what + " failed", room_id)

    async def _invited(self, room_id: str, invite: InviteInfo) -> None:
        self.check()
        access = self.channel.access
        granted = await access.grant_of(room_id) is not None
        if not granted and access.mode is Access.allowlist:
            await self.nio.room_leave(room_id)
            log.warning(
                "invited to room %r, which has no grant (access allowlist): declined "
                "(add it to [[channels.matrix.rooms]] to grant it)",
                room_id,
            )
            return
        reply = await self.nio.join(room_id)
        if not isinstance(reply, JoinResponse):
            log.warning("invited to room %r, but could not join it: %s", room_id, reply)
            return
        log.info("invited to room %r: joined%s", room_id, "" if granted else " (it has no grant yet)")
        await self.worker.spoke(room_id)  # a paused room that invites the bot back takes calls again
        if granted or await self._is_encrypted(room_id):
            return  # an encrypted room is told why the bot leaves, once its join is synced
        # A stranger's first word from the bot is what the shared handler answers it.
        inviter = next(
            (e.sender for e in invite.invite_state if isinstance(e, InviteMemberEvent) and e.state_key == self.user_id),
            "",
        )
        answer = await self.commands.handle(
            Invocation(platform=PLATFORM, destination=room_id, thread=NO_THREAD, user=inviter, word="help", group=True)
        )
        if answer is not None:
            self.worker.say(room_id, NO_THREAD, answer.text, urgent=answer.urgent)

    async def _is_encrypted(self, room_id: str) -> bool:
        self.check()
        reply = await self.nio.room_get_state_event(room_id, "m.room.encryption")
        return isinstance(reply, RoomGetStateEventResponse) and bool(reply.content)

    async def _encrypted(self, room_id: str) -> None:
        for key in await self.channel.state.follows.of(room_id):
            await self.channel.state.follows.remove(key)
            self.worker.touch(key)

        async def leave(_: object) -> None:
            self.check()
            await self.nio.room_leave(room_id)
            log.warning("room %r is encrypted: said so, and left it", room_id)

        self.worker.say(room_id, NO_THREAD, ENCRYPTED_REFUSAL, then=leave)

    async def _redacted(self, room_id: str, event: dict[str, Any]) -> None:
        """Someone redacted a live draft: the homeserver would still take edits of it,
        but nobody would see them, so the draft is shown again as a new message."""
        if event.get("type") != "m.room.redaction" or event.get("sender") == self.user_id:
            return
        content = event.get("content")
        redacts = (content.get("redacts") if isinstance(content, dict) else None) or event.get("redacts")
        if not isinstance(redacts, str):
            return
        for key in await self.channel.state.follows.of(room_id):
            if (await self.channel.state.drafts.of(key)).message_id == redacts:
                log.info("room %r: draft %r was redacted by someone; showing it again", room_id, redacts)
                self.worker.touch(key, fresh=True)

    async def _may_change(self, room_id: str, user: str) -> bool:
        """Is `user`'s power in the room at least MIN_POWER (a creator's always is, from
        room version 12 on)? Read from the room's state when the handler asks."""
        self.check()
        reply = await self.nio.room_get_state(room_id)
        if not isinstance(reply, RoomGetStateResponse):
            return False
        state = {e.get("type"): e for e in reply.events if isinstance(e, dict) and e.get("state_key") == ""}
        levels = state.get("m.room.power_levels", {}).get("content", {})
        if power_of(levels if isinstance(levels, dict) else {}, user) >= MIN_POWER:
            return True
        return is_creator(state.get("m.room.create", {}), user)

    async def _command(self, room_id: str, event: dict[str, Any]) -> None:
        parsed = parse_command(event, self.user_id)
        if parsed is None:
            return
        thread, word, args = parsed
        user = str(event.get("sender", ""))

        async def may_change() -> bool:
            return await self._may_change(room_id, user)

        reply = await self.commands.handle(
            Invocation(
                platform=PLATFORM, destination=room_id, thread=thread, user=user, word=word, args=tuple(args),
                group=True, may_change=may_change,
            )
        )
        if reply is not None:
            self.worker.say(room_id, thread, reply.text, urgent=reply.urgent)


__all__ = [
    "ENCRYPTED_REFUSAL",
    "MIN_POWER",
    "POLL_MS",
    "PREFIX",
    "SURFACE",
    "MatrixSync",
    "heard_in",
    "is_creator",
    "parse_command",
    "power_of",
]
