"""Asks in chat, written once for every platform: the ask messages a destination is sent
(and edited to their outcome), and the presses and typed answers that come back.

How a platform plugs in
-----------------------
- Its renderer adds `ask(owner, ask) -> Payload | None`: the ask's message with its
  controls while it is open (buttons whose ids are `model.asks.option_control` /
  `text_control`), without them once it ended; and, on a live run the agent can stop
  (`view.stoppable`), a Stop control (`STOP_CONTROL`) on the draft.
- Its transport turns a press into a `Press` and hands it to `worker.presses.press`,
  a typed answer (a reply to the ask message) to `worker.presses.typed`, and shows the
  short text they return to the person (a callback answer, an ephemeral message, a reply).
  A transport that answers a press by changing the pressed message itself (Discord's
  `UPDATE_MESSAGE`) calls `take`/`take_typed` instead: their `Pressed` also says whose
  message the press changed, for the transport to render with the destination's renderer.

Everything else is here: an ask reaches every destination following its owner (as a
notifying message replying to the live draft, through the destination's lane, paced
like any call), its message is edited to say how it ended, and a press is taken only
from a destination granted the session, for an ask sent *there* as the message pressed,
from its paired person (a private chat), an administrator (`may_change`) or a listed
answerer — anything else changes nothing and is told why, briefly.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from ..failure_log import FailureLog
from ..model.asks import Actor, Ask, AskState, parse_control
from ..model.card import CardError
from ..model.owners import Owner
from ..model.view import View
from ..render import asks as words
from ..store import keys
from ..store.cards import CardStore
from .channel import Channel
from .chat.invocation import ChatAct
from .draft.outcome import MessageId
from .lane.lane import Lane, OneOff
from .pacing import Pacer
from .state.holder import ChannelState
from .state.ids import DraftKey, Id

STOP_CONFIRM_SECONDS = 10.0
"""A first press of Stop asks for a second within this long (on the time scale)."""


@dataclass(frozen=True)
class Press(ChatAct):
    """A person acting on an ask or a draft, as a platform's transport received it."""

    name: str
    control: str = ""
    """The pressed control's opaque id (`pc:a:…`, `pc:stop`); "" for a typed answer."""
    message_id: MessageId | None = None
    """The message the control is on (the ask's, or the draft's for Stop); for a typed
    answer, the message it replies to."""
    text: str | None = None
    confirmed: bool = False
    """Stop pressed on the platform's own control, which asks no second press (Slack's
    agent session stop); `message_id` None: the draft followed in `thread`."""

    @property
    def actor(self) -> Actor:
        return Actor(self.platform, str(self.destination), self.user, self.name)


@dataclass(frozen=True)
class Pressed:
    """What a press or a typed answer did: the short text for the person, and, when
    this press changed what the pressed message shows, whose message that is."""

    text: str
    shows: DraftKey | None = None
    """The destination and owner whose message this press changed: the ask's (`ask`)
    or, for Stop armed or recorded, the draft's. None: it changed nothing (a loser)."""
    ask: Ask | None = None
    """The ask this press ended, as it now stands (its message shows the outcome)."""


class AskHost(Protocol):
    """What of the channel worker asks use."""

    redis: Any
    store: CardStore
    state: ChannelState
    channel: Channel
    pacer: Pacer
    failures: FailureLog

    def lane(self, destination: Id) -> Lane: ...

    def touch(self, key: DraftKey) -> bool: ...


@dataclass(frozen=True)
class Record:
    """An ask message sent to a destination."""

    owner: str
    message_id: MessageId
    thread: Id
    shown: str
    """The state the message shows (`open` until it is edited to the outcome)."""

    def dumps(self) -> str:
        return json.dumps({"o": self.owner, "m": self.message_id, "t": self.thread, "s": self.shown})

    @classmethod
    def loads(cls, raw: str) -> Record | None:
        try:
            d = json.loads(raw)
            return cls(str(d["o"]), d["m"], d["t"], str(d["s"]))
        except (ValueError, KeyError, TypeError):
            return None


class AskRecords:
    """What ask messages a destination was sent (`keys.channel_asks`)."""

    def __init__(self, redis: Any, channel: str) -> None:
        self.redis = redis
        self.channel = channel

    def _key(self, destination: Id) -> str:
        return keys.channel_asks(self.channel, destination)

    async def all(self, destination: Id) -> dict[str, Record]:
        raw = await self.redis.hgetall(self._key(destination))
        out = {}
        for name, value in raw.items():
            if not name.startswith("m:"):
                record = Record.loads(value)
                if record is not None:
                    out[name] = record
        return out

    async def get(self, destination: Id, ask_id: str) -> Record | None:
        raw = await self.redis.hget(self._key(destination), ask_id)
        return Record.loads(raw) if raw else None

    async def by_message(self, destination: Id, message_id: MessageId) -> tuple[str, Record] | None:
        key = self._key(destination)
        ask_id = await self.redis.hget(key, f"m:{message_id}")
        if not ask_id:
            return None
        record = await self.get(destination, ask_id)
        return (ask_id, record) if record is not None else None

    async def put(self, destination: Id, ask_id: str, record: Record) -> None:
        key = self._key(destination)
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(key, mapping={ask_id: record.dumps(), f"m:{record.message_id}": ask_id})
            pipe.expire(key, keys.ASK_MESSAGES_TTL)
            await pipe.execute()

    async def drop(self, destination: Id, gone: dict[str, Record]) -> None:
        if gone:
            fields = [*gone, *(f"m:{r.message_id}" for r in gone.values())]
            await self.redis.hdel(self._key(destination), *fields)


class AskMessages:
    """Keeps each destination's ask messages in step with its owners' asks. Looked at
    whenever a draft is read (`DraftProcessor`), so it costs a round trip only when
    the asks of an owner changed since this process last looked."""

    def __init__(self, worker: AskHost) -> None:
        self.worker = worker
        self.records = AskRecords(worker.redis, worker.state.channel)
        self._seen: dict[tuple[Id, Owner], tuple[tuple[str, AskState], ...]] = {}
        self._busy: set[tuple[Id, str]] = set()
        """Ask messages being sent or edited now (not queued twice)."""
        self._timers: dict[Owner, asyncio.TimerHandle] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    async def saw(self, key: DraftKey, view: View, renderer: Any, draft_message: MessageId | None) -> None:
        """The view `key`'s lane just read: send what is new, edit what ended."""
        destination, owner = key.chat_id, key.owner
        seen = tuple((a.ask_id, a.state) for a in view.asks)
        if self._seen.get((destination, owner)) == seen or not hasattr(renderer, "ask"):
            return
        self._seen[destination, owner] = seen
        if len(self._seen) > 100_000:
            self._seen.clear()  # a bound, not a policy: the next reads look again
        records = await self.records.all(destination)
        lane = self.worker.lane(destination)
        for ask in view.asks:
            busy = (destination, ask.ask_id)
            record = records.get(ask.ask_id)
            if busy in self._busy:
                continue
            if record is None and ask.state is AskState.open:
                payload = renderer.ask(owner, ask)
                if payload is None:
                    continue
                self._busy.add(busy)
                lane.say(OneOff(key.thread_id, payload=payload, reply_to=draft_message,
                                then=self._sent(key, ask.ask_id)))
            elif record is not None and record.shown == AskState.open.value and ask.state is not AskState.open:
                payload = renderer.ask(owner, ask)
                if payload is None:
                    continue
                self._busy.add(busy)
                lane.say(OneOff(record.thread, payload=payload, edit=record.message_id,
                                then=self._edited(destination, owner, ask, record)))
        shown = {a.ask_id for a in view.asks}
        await self.records.drop(
            destination, {i: r for i, r in records.items() if i not in shown and r.owner == owner.display_key}
        )
        self._expire_later(owner, view)

    async def settled(self, destination: Id, ask_id: str, timeout: float = 5.0) -> None:
        """Until an ask message being sent or edited here is settled (its id stored): a
        press can come as soon as the message shows, before its send has returned."""
        deadline = time.monotonic() + timeout
        while (destination, ask_id) in self._busy and time.monotonic() < deadline:
            await asyncio.sleep(0.02)

    def _sent(self, key: DraftKey, ask_id: str) -> Callable[[MessageId | None], Awaitable[None]]:
        async def then(message_id: MessageId | None) -> None:
            try:
                if message_id is None:  # not delivered: looked at again with the next read
                    self._seen.pop((key.chat_id, key.owner), None)
                    return
                record = Record(key.owner.display_key, message_id, key.thread_id, AskState.open.value)
                await self.records.put(key.chat_id, ask_id, record)
            finally:
                # Settled once its record is stored: a press that came as the message
                # showed (`settled`) reads the record, not its absence.
                self._busy.discard((key.chat_id, ask_id))
            # The ask may have ended while its message was on its way: the next look edits it.
            self._seen.pop((key.chat_id, key.owner), None)
            self.worker.touch(key)

        return then

    def _edited(
        self, destination: Id, owner: Owner, ask: Ask, record: Record
    ) -> Callable[[MessageId | None], Awaitable[None]]:
        async def then(message_id: MessageId | None) -> None:
            try:
                if message_id is None:
                    self._seen.pop((destination, owner), None)
                    return
                shown = Record(record.owner, record.message_id, record.thread, ask.state.value)
                await self.records.put(destination, ask.ask_id, shown)
            finally:
                self._busy.discard((destination, ask.ask_id))  # as `_sent`: once stored

        return then

    def _expire_later(self, owner: Owner, view: View) -> None:
        """At the earliest open ask's expiry, mark it expired (on the store's clock),
        which every chat then shows: one timer per owner in this process."""
        due = [a.expires_ms for a in view.open_asks]
        old = self._timers.pop(owner, None)
        if old is not None:
            old.cancel()
        if not due:
            return
        delay = max(0.2, min(due) / 1000 - time.time() + 0.05)
        loop = asyncio.get_running_loop()

        def fire() -> None:
            self._timers.pop(owner, None)
            task = loop.create_task(self._settle(owner))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

        self._timers[owner] = loop.call_later(delay, fire)

    async def _settle(self, owner: Owner) -> None:
        try:
            await self.worker.store.asks.settle(owner)
        except Exception as exc:  # the next read schedules it again
            self.worker.failures.warning("asks: expiry", "marking expired asks failed: %s", exc)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        self._timers.clear()


class Presses:
    """What a press or a typed answer does, and the short text the person is shown."""

    def __init__(self, worker: AskHost, messages: AskMessages, *, noun: str = "chat") -> None:
        self.worker = worker
        self.noun = noun
        self.messages = messages
        self.records = messages.records
        self._later: set[asyncio.Task[None]] = set()

    async def press(self, p: Press) -> str:
        return (await self.take(p)).text

    async def typed(self, p: Press) -> str | None:
        """A message replying to `p.message_id`: the answer to the ask sent as that
        message (None: it is no ask of ours, and the message is someone's chat)."""
        taken = await self.take_typed(p)
        return taken.text if taken is not None else None

    async def take(self, p: Press) -> Pressed:
        """`press`, saying too whose message the press changed."""
        parsed = parse_control(p.control)
        if parsed is None:
            return Pressed(words.word("not_here"))
        kind, ask_id, index = parsed
        if kind == "stop":
            return await self._stop(p)
        assert ask_id is not None
        found = await self._ask_here(p, ask_id)
        if isinstance(found, str):
            return Pressed(found)
        owner, ask = found
        if kind == "t":
            return Pressed(words.word("reply_hint"))
        if index is None or not 0 <= index < len(ask.options):
            return Pressed(words.word("not_here"))
        return await self._answer(p, owner, ask, options=[ask.options[index]])

    async def take_typed(self, p: Press) -> Pressed | None:
        """`typed`, saying too whose message the answer changed."""
        if p.message_id is None or not p.text:
            return None
        hit = await self.records.by_message(p.destination, p.message_id)
        if hit is None:
            return None
        found = await self._ask_here(p, hit[0])
        if isinstance(found, str):
            return Pressed(found)
        owner, ask = found
        text = p.text.strip()
        if not ask.allow_text and ask.options:
            # A number or a label typed in reply chooses that option (channels without buttons).
            chosen = _chosen(text, ask)
            if chosen is None:
                return Pressed(words.word("bad_answer", rule="answer with one of the options"))
            return await self._answer(p, owner, ask, options=chosen)
        chosen = _chosen(text, ask) if ask.options else None
        if chosen is not None:
            return await self._answer(p, owner, ask, options=chosen)
        return await self._answer(p, owner, ask, text=text)

    async def _ask_here(self, p: Press, ask_id: str) -> tuple[Owner, Ask] | str:
        """The ask, when it was sent here as the message pressed and `p` may answer it;
        else why not, in a few words."""
        await self.messages.settled(p.destination, ask_id)
        record = await self.records.get(p.destination, ask_id)
        if record is None or (p.message_id is not None and str(record.message_id) != str(p.message_id)):
            return words.word("not_here")
        owner = Owner.from_display_key(record.owner)
        if owner is None:
            return words.word("not_here")
        refused = await self._may_act(p, owner)
        if refused is not None:
            return refused
        ask, _ = await self.worker.store.asks.get(owner, ask_id)
        if ask is None:
            return words.word("already_expired")
        return owner, ask

    async def _may_act(self, p: Press, owner: Owner) -> str | None:
        """None when `p`'s person may answer or stop `owner` here, else why not."""
        access = self.worker.channel.access
        grant = await access.grant_of(p.destination)
        if grant is None or not grant.covers(owner):
            return words.word("not_granted", noun=self.noun, session=owner.display_key)
        if not p.group:
            return None  # a private chat: its paired person
        table = self.worker.channel.platform.table_of(p.destination)
        if table is not None and table.answerers and p.user in {str(a) for a in table.answerers}:
            return None
        if await p.may_change():
            return None
        return words.word("not_allowed", noun=self.noun)

    async def _answer(self, p: Press, owner: Owner, ask: Ask, *, options: list[str] | None = None,
                      text: str | None = None) -> Pressed:
        try:
            closing = await self.worker.store.asks.answer(owner, ask.ask_id, p.actor, options=options, text=text)
        except CardError as exc:
            return Pressed(words.word("bad_answer", rule=exc.rule))
        await self._touch_owner(p.destination, owner)
        done = closing.ask
        if closing.outcome == "ok" and done is not None and done.answer is not None:
            said = words.word("answered_now", answer=done.answer.words)
            return Pressed(said, DraftKey(p.destination, p.thread, owner), done)
        return Pressed(_ended(done))

    async def _stop(self, p: Press) -> Pressed:
        owner = await self._draft_owner(p)
        if owner is None:
            return Pressed(words.word("not_here"))
        refused = await self._may_act(p, owner)
        if refused is not None:
            return Pressed(refused)
        draft = DraftKey(p.destination, p.thread, owner)
        session = owner.session_key
        asks = self.worker.store.asks
        armed = None if p.confirmed else await asks.armed_by(owner)
        if not p.confirmed and (armed is None or (armed.platform, armed.user) != (p.platform, p.user)):
            # A first press: the Stop control reads "Press again to stop" for the window
            # (armed in the store, so every chat shows it and any process takes the second).
            window = STOP_CONFIRM_SECONDS * self.worker.pacer.budgets.scale
            armed_now = await asks.arm_stop(owner, p.actor, window)
            if armed_now:
                self._shown_again_after(p.destination, owner, window)
            return Pressed(words.word("confirm_stop", session=session), draft if armed_now else None)
        await asks.disarm(owner)
        outcome, mark = await self.worker.store.asks.stop(owner, p.actor)
        await self._touch_owner(p.destination, owner)
        if outcome == "ok":
            return Pressed(words.word("stop_recorded", session=session), draft)
        if outcome == "already" and mark is not None:
            return Pressed(words.word("stop_already", name=mark.by.shown))
        return Pressed(words.word("no_run", session=session))

    async def _draft_owner(self, p: Press) -> Owner | None:
        """Whose draft the pressed message is (a confirmed stop without one: whose
        draft the thread holds, when it holds one)."""
        follows = await self.worker.state.follows.of(p.destination)
        if p.message_id is None:
            here = {key.owner for key in follows if p.confirmed and str(key.thread_id) == str(p.thread)}
            return next(iter(here)) if len(here) == 1 else None
        for key in follows:
            state = await self.worker.state.drafts.of(key)
            if state.message_id is not None and str(state.message_id) == str(p.message_id):
                return key.owner
        return None

    def _shown_again_after(self, destination: Id, owner: Owner, window: float) -> None:
        """When the window has passed, the drafts read again: the control reads Stop again."""

        async def later() -> None:
            await asyncio.sleep(window + 0.05)
            await self._touch_owner(destination, owner)

        task = asyncio.get_running_loop().create_task(later())
        self._later.add(task)
        task.add_done_callback(self._later.discard)

    async def _touch_owner(self, destination: Id, owner: Owner) -> None:
        """Look again at once (the change event comes too; this is sooner for the presser)."""
        for key in await self.worker.state.follows.of(destination):
            if key.owner == owner:
                self.worker.touch(key)


def _chosen(text: str, ask: Ask) -> list[str] | None:
    """The options a typed answer names: numbers (`2`, `1, 3` for a multiple choice) or a label."""
    for label in ask.options:
        if text.casefold() == label.casefold():
            return [label]
    parts = [t for t in text.replace(",", " ").split() if t]
    if parts and all(t.isdigit() and 1 <= int(t) <= len(ask.options) for t in parts):
        picked = list(dict.fromkeys(ask.options[int(t) - 1] for t in parts))
        if len(picked) == 1 or ask.multi:
            return picked
    return None


def _ended(ask: Ask | None) -> str:
    if ask is None:
        return words.word("already_expired")
    if ask.state is AskState.answered and ask.answer is not None:
        return words.word("already_answered", name=ask.answer.by.shown)
    if ask.state is AskState.withdrawn:
        return words.word("already_withdrawn")
    return words.word("already_expired")


__all__ = ["AskMessages", "AskRecords", "Press", "Pressed", "Presses", "Record"]
