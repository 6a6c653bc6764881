"""The Matrix transport of presses and typed answers (`channels.asks`). Matrix has no
buttons: an ask's options are numbered (`render.matrix_payload.matrix_ask`), and a
person answers with a reaction or a reply, read from `/sync` (`MatrixSync`).

- A reaction (`m.reaction`, an `m.annotation`) on an ask's message whose key is a
  keycap `1️⃣`…`9️⃣`, `🔟` or a plain number `1`…`10` chooses that option.
- A reaction `⏹️` (or `🛑`) on a live draft is Stop; a second one by the same person
  within 10 s confirms it. A homeserver keeps one reaction per person and key on an
  event, so the second is the first removed and added again, or the other key.
- A message replying to an ask's message (`m.in_reply_to`; not the fallback a thread
  message carries) is a typed answer: a number or a label chooses that option, other
  text is the answer where the ask takes text. Its reply fallback (the quoted lines a
  client may put first) is left out.

Any other reaction, and a reaction or a reply to any other message, is chat: nothing
happens and nothing is said. Every room counts as a group, as for commands: a person
acts with power 50 or more in the room, or as a listed answerer. The presser is
answered with a short `m.notice` (it does not notify) in the thread of the message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import KW_ONLY, dataclass
from typing import Any

from nio import AsyncClient, RoomGetStateEventResponse

from ..channels.asks import Press
from ..channels.state.ids import DraftKey
from ..channels.worker import ChannelWorker
from ..model.asks import STOP_CONTROL, option_control
from ..render import asks as words
from ..render.templates import theme
from .channel import NO_THREAD, PLATFORM
from .client import Check, unfenced

VS16 = "\ufe0f"
"""The variation selector an emoji key may carry or not (`⏹️` and `⏹` are one key)."""
KEYCAP = "\u20e3"
STOP_KEYS = frozenset({"⏹", "🛑"})
MAX_NAME = 64
"""Characters of a display name kept for who answered (a name may be long)."""


def _key(key: str) -> str:
    return key.replace(VS16, "").strip()


def option_number(key: str) -> int | None:
    """The option a reaction's key names (1-based), or None."""
    k = _key(key)
    if k == "🔟":
        return 10
    if len(k) == 2 and k[1] == KEYCAP and k[0] in "123456789":
        return int(k[0])
    if k.isascii() and k.isdigit() and 1 <= int(k) <= 10:
        return int(k)
    return None


def is_stop(key: str) -> bool:
    return _key(key) in STOP_KEYS


def without_fallback(body: str) -> str:
    """A reply's body without the quoted lines (and the blank line after them) that
    clients put first for clients that do not know replies."""
    lines = body.split("\n")
    i = 0
    while i < len(lines) and lines[i].startswith(">"):
        i += 1
    if 0 < i < len(lines) and not lines[i].strip():
        i += 1
    return "\n".join(lines[i:])


def replied_to(content: dict[str, Any]) -> str | None:
    """The event a message replies to: its `m.in_reply_to`, unless that is only the
    fallback of a thread message (`is_falling_back`) or the message is an edit."""
    relation = content.get("m.relates_to")
    if not isinstance(relation, dict) or relation.get("rel_type") == "m.replace" or "m.new_content" in content:
        return None
    if relation.get("rel_type") == "m.thread" and relation.get("is_falling_back") is not False:
        return None
    reply = relation.get("m.in_reply_to")
    target = reply.get("event_id") if isinstance(reply, dict) else None
    return target if isinstance(target, str) else None


def thread_of(content: dict[str, Any]) -> str:
    relation = content.get("m.relates_to")
    relation = relation if isinstance(relation, dict) else {}
    root = relation.get("event_id")
    return root if relation.get("rel_type") == "m.thread" and isinstance(root, str) else NO_THREAD


@dataclass
class MatrixPresses:
    nio: AsyncClient
    worker: ChannelWorker
    user_id: str
    may_change: Callable[[str, str], Awaitable[bool]]
    """Is the user's power in the room at least 50 (`MatrixSync`)?"""
    _: KW_ONLY
    check: Check = unfenced
    templates_dir: str | None = None

    async def handle(self, room_id: str, event: dict[str, Any]) -> None:
        """One timeline event someone else sent (a `!pc` command is not given here)."""
        content = event.get("content")
        sender = event.get("sender")
        if sender == self.user_id or not isinstance(sender, str) or not isinstance(content, dict):
            return
        if event.get("type") == "m.reaction":
            await self._reacted(room_id, sender, content)
        elif event.get("type") == "m.room.message" and content.get("msgtype") == "m.text":
            await self._replied(room_id, sender, content)

    async def _reacted(self, room_id: str, sender: str, content: dict[str, Any]) -> None:
        relation = content.get("m.relates_to")
        if not isinstance(relation, dict) or relation.get("rel_type") != "m.annotation":
            return
        target, key = relation.get("event_id"), relation.get("key")
        if not isinstance(target, str) or not isinstance(key, str):
            return
        number = option_number(key)
        draft: DraftKey | None = None
        if number is not None:
            hit = await self.worker.asks.records.by_message(room_id, target)
            if hit is None:
                return  # a number on any other message is chat
            ask_id, record = hit
            control, thread = option_control(ask_id, number - 1), str(record.thread)
        elif is_stop(key):
            draft = await self._draft(room_id, target)
            if draft is None:
                return
            control, thread = STOP_CONTROL, str(draft.thread_id)
        else:
            return
        text = await self.worker.presses.press(await self._press(room_id, thread, sender, target, control=control))
        if draft is not None and text == words.word("confirm_stop", session=draft.owner.session_key):
            # The shared words say "press Stop again"; here Stop is a reaction.
            text = theme("matrix", self.templates_dir).word("stop_again", session=draft.owner.session_key)
        self.worker.say(room_id, thread, text)

    async def _replied(self, room_id: str, sender: str, content: dict[str, Any]) -> None:
        target = replied_to(content)
        body = content.get("body")
        if target is None or not isinstance(body, str):
            return
        text = without_fallback(body).strip()
        if not text:
            return
        thread = thread_of(content)
        answer = await self.worker.presses.typed(await self._press(room_id, thread, sender, target, text=text))
        if answer is not None:
            self.worker.say(room_id, thread, answer)

    async def _draft(self, room_id: str, event_id: str) -> DraftKey | None:
        """The draft that is this event, if it is one of the room's live drafts."""
        for key in await self.worker.state.follows.of(room_id):
            if str((await self.worker.state.drafts.of(key)).message_id) == event_id:
                return key
        return None

    async def _press(
        self, room_id: str, thread: str, sender: str, target: str, *, control: str = "", text: str | None = None
    ) -> Press:
        async def may_change() -> bool:
            return await self.may_change(room_id, sender)

        return Press(
            platform=PLATFORM, destination=room_id, thread=thread, user=sender, name=await self._name(room_id, sender),
            control=control, message_id=target, text=text, group=True, may_change=may_change,
        )

    async def _name(self, room_id: str, user: str) -> str:
        """The name the room shows for `user` (its member event's), else the user id."""
        self.check()
        reply = await self.nio.room_get_state_event(room_id, "m.room.member", user)
        name = reply.content.get("displayname") if isinstance(reply, RoomGetStateEventResponse) else None
        shown = " ".join(name.split())[:MAX_NAME] if isinstance(name, str) else ""
        return shown or user


__all__ = ["MatrixPresses", "is_stop", "option_number", "replied_to", "without_fallback"]
