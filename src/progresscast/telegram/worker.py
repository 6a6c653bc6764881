"""From the change stream to paced draft updates.

One consumer in the `telegram` group reads change events; an event only says which
owner changed, so a batch is coalesced to its owners and every draft following them
is *touched*. Each chat has a lane (one task): it takes touched drafts in turn,
waits until the chat may be called, then reads the newest view, asks `drafts.plan`
for the next call and makes it. Reading the view only when the call can go out is
what keeps only the newest content queued per draft, however many writes came in.

Only the lane changes a draft's state (commands ask it to, through `touch`), so the
load–decide–call–store sequence of one draft never races with itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import html
import logging
import re
import socket
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from dataclasses import dataclass, replace
from typing import Any

from redis.asyncio import Redis
from telegram import Bot

from ..card import CardError
from ..config import RenderSettings, Settings, TelegramSettings
from ..drafts import (
    Delete,
    DraftState,
    Edit,
    Payload,
    Probe,
    Send,
    Situation,
    Step,
    Wait,
    absent,
    edited,
    foreign,
    found,
    gone,
    not_sent,
    on_follow,
    plan,
    sending,
    sent,
    skipped,
    unknown,
)
from ..events import EventGroup, coalesce
from ..owners import resolve_owner
from ..render import render_final_answer_messages, render_telegram, render_text
from ..store import CardStore
from ..view import View
from .follows import DraftKey, TelegramState, allowed, render_settings
from .options import AdapterOptions
from .pacing import Pacer
from .sender import Outcome, Reply, Sender

log = logging.getLogger("progresscast.telegram")

_TAG = re.compile(r"<[^>]*>")


def html_to_text(text: str) -> str:
    """Telegram HTML reduced to its visible text (a fallback when entities fail)."""
    return html.unescape(_TAG.sub("", text))


class Bounded:
    """A set that forgets its oldest members past `limit` (remembered refusals, log-once
    keys: a long-running adapter must not grow without bound)."""

    def __init__(self, limit: int = 1000) -> None:
        self.limit = limit
        self._items: OrderedDict[Hashable, None] = OrderedDict()

    def add(self, item: Hashable) -> None:
        self._items[item] = None
        self._items.move_to_end(item)
        while len(self._items) > self.limit:
            self._items.popitem(last=False)

    def discard(self, item: Hashable) -> None:
        self._items.pop(item, None)

    def __contains__(self, item: object) -> bool:
        return item in self._items

    def __len__(self) -> int:
        return len(self._items)


class DraftRenderers:
    """`drafts.Renderers` for one chat's settings: the renderers, wrapped as Payloads.

    `avoid_rich(digest)` names rich payloads the server refused for their content: the
    classic rendering of the same view is used instead (for that payload only)."""

    def __init__(
        self,
        settings: RenderSettings,
        templates_dir: str | None = None,
        avoid_rich: Callable[[str], bool] | None = None,
    ) -> None:
        self.settings = settings
        self.templates_dir = templates_dir
        self.avoid_rich = avoid_rich

    def draft(self, view: View) -> Payload | None:
        classic = self.settings.model_copy(update={"rich": False})
        rendered = render_telegram(view, self.settings, templates_dir=self.templates_dir)
        payload = Payload.of(rendered, lambda: render_text(view, classic, templates_dir=self.templates_dir))
        if payload is not None and payload.kind == "rich" and self.avoid_rich and self.avoid_rich(payload.digest):
            rendered = render_telegram(view, classic, templates_dir=self.templates_dir)
            payload = Payload.of(rendered, lambda: render_text(view, classic, templates_dir=self.templates_dir))
        return payload

    def answer(self, markdown: str) -> list[Payload]:
        if not markdown.strip():
            return []
        out = []
        for rendered in render_final_answer_messages(markdown, templates_dir=self.templates_dir):
            text = str(rendered["params"].get("text", ""))
            payload = Payload.of(rendered, functools.partial(html_to_text, text))
            assert payload is not None
            out.append(payload)
        return out


@dataclass(frozen=True)
class _Say:
    """A one-off message through the chat's lane: a command reply, or a card snapshot."""

    thread_id: int
    text: str | None = None
    payload: Payload | None = None


class ChatLane:
    """The one task that calls a chat: replies first, then touched drafts in turn."""

    def __init__(self, worker: DraftWorker, chat_id: int) -> None:
        self.worker = worker
        self.chat_id = chat_id
        self.pending: dict[DraftKey, None] = {}  # an ordered set
        self.outbox: deque[_Say] = deque()
        self.timers: dict[DraftKey, asyncio.TimerHandle] = {}
        self.wake = asyncio.Event()
        self.closed = False
        self.task = asyncio.create_task(self._run(), name=f"telegram-chat-{chat_id}")

    def touch(self, key: DraftKey) -> None:
        self.pending[key] = None
        self.wake.set()

    def later(self, key: DraftKey, delay: float) -> None:
        old = self.timers.pop(key, None)
        if old is not None:
            old.cancel()
        self.timers[key] = asyncio.get_running_loop().call_later(delay, self._due, key)

    def _due(self, key: DraftKey) -> None:
        self.timers.pop(key, None)
        self.touch(key)

    def say(self, item: _Say) -> None:
        self.outbox.append(item)
        self.wake.set()

    @property
    def idle(self) -> bool:
        return not self.pending and not self.outbox and not self.timers

    async def _run(self) -> None:
        while not self.closed:
            if not self.pending and not self.outbox:
                self.wake.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.wake.wait(), self.worker.options.lane_idle)
                if self.idle and not self.wake.is_set():
                    # Nothing for a while: end; `DraftWorker.lane` makes a new one on demand.
                    # No await between the check and the removal, so nothing is lost.
                    self.closed = True
                    self.worker.lane_ended(self)
                    return
                continue
            if self.outbox:
                try:
                    await self.worker.deliver(self, self.outbox.popleft())
                except asyncio.CancelledError:
                    raise
                except Exception:  # Redis down: drop the reply rather than stall the chat
                    log.exception("a message to chat %s failed", self.chat_id)
                continue
            key = next(iter(self.pending))
            del self.pending[key]
            try:
                delay = await self.worker.process(key)
            except asyncio.CancelledError:
                raise
            except Exception:  # Redis down, a renderer bug: log, and look again later
                log.exception("draft %s in chat %s failed", key.owner.display_key, key.chat_id)
                delay = self.worker.backoff(self.chat_id)
            if delay is None:
                continue
            if delay <= 0:
                self.pending.setdefault(key, None)  # after the chat's other drafts
            else:
                self.later(key, delay)

    async def close(self) -> None:
        # The flag as well as the cancel: a library call may swallow a CancelledError
        # (Python 3.11's wait_for race), and the loop must still end.
        self.closed = True
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
        self.wake.set()
        self.task.cancel()
        try:
            await self.task
        except asyncio.CancelledError:
            pass


class DraftWorker:
    def __init__(
        self,
        settings: Settings,
        redis: Redis,
        bot: Bot,
        *,
        options: AdapterOptions | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        telegram = settings.channels.telegram
        if telegram is None:
            raise ValueError("channels.telegram is not configured")
        self.settings = settings
        self.telegram: TelegramSettings = telegram
        self.redis = redis
        self.bot = bot
        self.options = options or AdapterOptions()
        self.clock = clock
        self.store = CardStore(redis)
        self.state = TelegramState(redis)
        self.sender = Sender(bot)
        self.pacer = Pacer(self.options.pace)
        self.rich_refused: str | None = None
        self._lanes: dict[int, ChatLane] = {}
        self._followed: set[DraftKey] = set()
        self._fresh: set[DraftKey] = set()
        self._plain = Bounded(self.options.remember)
        """(draft, digest) Telegram could not parse as HTML: sent as plain text."""
        self._rich_refused = Bounded(self.options.remember)
        """(draft, digest) of rich payloads the server refused for their content: the
        classic rendering is shown instead (rich messages stay on for the bot)."""
        self._refused: dict[DraftKey, str] = {}
        """The digest Telegram refused for good, per draft: not tried again until it changes."""
        self._failures: dict[int, int] = {}
        self._logged = Bounded(self.options.remember)
        self._events: asyncio.Task[None] | None = None
        self._closing = False

    @property
    def bot_id(self) -> int:
        return self.bot.id

    # --- life ----------------------------------------------------------------------------

    async def start(self) -> None:
        self.rich_refused = await self.state.rich_refused(self.bot_id)
        if self.rich_refused:
            log.info("rich messages were refused by this Bot API server (%s): classic HTML", self.rich_refused)
        group = EventGroup(
            self.redis, self.options.group, self.options.consumer or socket.gethostname()
        )
        await group.ensure()  # before reconciling, so no change falls between the two
        await self._config_follows()
        for key in await self.state.all_follows():
            self.touch(key)  # a restart catches up with what changed while it was down
        self._events = asyncio.create_task(self._consume(group), name="telegram-events")

    async def close(self) -> None:
        self._closing = True
        if self._events is not None:
            self._events.cancel()
            try:
                await self._events
            except asyncio.CancelledError:
                pass
            self._events = None
        lanes, self._lanes = list(self._lanes.values()), {}
        for lane in lanes:
            await lane.close()

    async def idle(self) -> None:
        """Wait until no chat has anything queued (tests; a graceful stop)."""
        while any(not lane.idle for lane in self._lanes.values()):
            await asyncio.sleep(0.05)

    async def _config_follows(self) -> None:
        """`channels.telegram.chats[].follow`: subscribe at start-up (idempotent)."""
        agents = self.settings.agents
        for chat in self.telegram.chats:
            if not chat.follow:
                continue
            if not allowed(self.telegram, chat.id):
                log.warning("chat %s follows sessions in the config but is not in allowedChats", chat.id)
                continue
            for session in chat.follow:
                try:
                    owner = resolve_owner(session, known_agents=agents.known_set, default_agent=agents.default)
                except CardError as exc:
                    log.warning("chat %s: cannot follow %r from the config: %s", chat.id, session, exc)
                    continue
                key = DraftKey(chat.id, 0, owner)
                if await self.state.follow(key):
                    self.touch(key, followed=True)

    async def _consume(self, group: EventGroup) -> None:
        failures = 0
        while not self._closing:
            try:
                events = await group.read(count=200, block_ms=1000)
                for owner in coalesce(events):
                    for key in await self.state.followers(owner):
                        self.touch(key)
                await group.ack(events)
                failures = 0
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                failures += 1
                if "NOGROUP" in str(exc) or "no longer exists" in str(exc):
                    # The stream or the group is gone (a flushed or restarted Redis without
                    # persistence): create them again and look at every draft once more,
                    # since the events in between are lost.
                    log.warning("the change stream or its consumer group is gone: recreating it")
                    with contextlib.suppress(Exception):
                        await group.ensure()
                        for key in await self.state.all_follows():
                            self.touch(key)
                    await asyncio.sleep(min(0.1 * failures, self.options.max_backoff))
                    continue
                log.exception("reading the change stream failed")
                await asyncio.sleep(min(0.5 * 2**failures, self.options.max_backoff))

    # --- what commands and events ask for ------------------------------------------------

    def lane(self, chat_id: int) -> ChatLane:
        lane = self._lanes.get(chat_id)
        if lane is None or lane.closed:
            lane = self._lanes[chat_id] = ChatLane(self, chat_id)
        return lane

    def lane_ended(self, lane: ChatLane) -> None:
        """An idle lane ended: forget it and what only it needed."""
        if self._lanes.get(lane.chat_id) is lane:
            del self._lanes[lane.chat_id]
            if self.pacer.ready_in(lane.chat_id) <= 0:
                self.pacer.forget(lane.chat_id)
            self._failures.pop(lane.chat_id, None)

    def allowed(self, chat_id: int) -> bool:
        """`allowedChats`, for drafts too: a chat removed from it after it followed gets
        nothing more (said once in the log)."""
        if allowed(self.telegram, chat_id):
            return True
        self._log_once(
            "not-allowed", chat_id, "chat %s follows sessions but is not in allowedChats: skipped", chat_id
        )
        return False

    def touch(self, key: DraftKey, *, followed: bool = False, fresh: bool = False) -> None:
        """Look at this draft again soon. `followed`: the chat just subscribed (a run
        that already ended is not announced); `fresh`: show it again at the bottom."""
        if not self.allowed(key.chat_id):
            return
        if followed:
            self._followed.add(key)
        if fresh:
            self._fresh.add(key)
        self.lane(key.chat_id).touch(key)

    def say(self, chat_id: int, thread_id: int, text: str) -> None:
        """Send a plain-text message (a command reply) before the chat's drafts."""
        self.lane(chat_id).say(_Say(thread_id, text=text))

    def send_once(self, chat_id: int, thread_id: int, payload: Payload) -> None:
        """Send a rendered payload as a one-off message (not a draft)."""
        self.lane(chat_id).say(_Say(thread_id, payload=payload))

    def renderers(self, chat_id: int, render: RenderSettings, key: DraftKey | None = None) -> DraftRenderers:
        avoid = None if key is None else (lambda digest: (key, digest) in self._rich_refused)
        return DraftRenderers(render, self.settings.templates.dir, avoid)

    async def render_settings(self, chat_id: int) -> RenderSettings:
        prefs = await self.state.prefs(chat_id)
        return render_settings(self.telegram, chat_id, prefs, rich_available=not self.rich_refused)

    # --- one draft -----------------------------------------------------------------------

    async def process(self, key: DraftKey) -> float | None:
        """Make the next call this draft needs, if any. Returns None when the chat shows
        what it should, else the delay before looking again (0: after the chat's
        other drafts)."""
        chat = key.chat_id
        if not self.allowed(chat):
            return None
        state, new, step, following = await self._plan(key)
        if isinstance(step, Send | Edit | Delete | Probe) and self.pacer.ready_in(chat) > 0:
            # Bookkeeping that needs no call is stored now; the call waits for the chat's
            # slot and is then decided again, with the newest content.
            if new != state:
                await self.state.save_draft(key, new)
            await self.pacer.ready(chat)
            state, new, step, following = await self._plan(key)
        if step is None:
            if not following:
                await self.state.forget_draft(key)
                self._refused.pop(key, None)
                self._followed.discard(key)
                self._fresh.discard(key)
            elif new != state:
                await self.state.save_draft(key, new)
            return None
        if new != state:
            await self.state.save_draft(key, new)
        if isinstance(step, Wait):
            return step.seconds
        await self.pacer.take(chat)
        return await self._call(key, new, step)

    async def _plan(self, key: DraftKey) -> tuple[DraftState, DraftState, Step | None, bool]:
        """Read everything about one draft and ask `drafts.plan`: (stored state, state
        after bookkeeping, next call, whether the chat still follows)."""
        chat = key.chat_id
        state = await self.state.draft(key)
        following = await self.state.is_following(key)
        view = await self.store.view(key.owner)
        run_id = view.run_id
        render = await self.render_settings(chat)
        loaded = state
        if key in self._followed:
            self._followed.discard(key)
            state = on_follow(state, view, run_id)
        if key in self._fresh:
            self._fresh.discard(key)
            state = replace(state, fresh=True)
        if state.intent is not None and state.intent.mark <= 0:
            log.warning(
                "chat %s: a send of %s may have landed but no message id is known to look from; "
                "sending again (a duplicate is possible)",
                chat,
                key.owner.display_key,
            )
        situation = Situation(
            following=following,
            mode=render.mode,
            run_id=run_id,
            keep_on_complete=self.telegram.keepOnComplete,
            block_chars=self.telegram.streaming.blockChars,
            now=self.clock(),
            settle=self.options.settle,
            max_probes=self.options.max_probes,
            known=await self.state.sent_after(chat, state.intent.mark) if state.intent else frozenset(),
        )
        new, step = plan(state, view, situation, self.renderers(chat, render, key))
        log.debug("draft %s in chat %s: %s → %s, %s", key.owner.display_key, chat, state, new, step)
        if isinstance(step, Send | Edit) and self._refused.get(key) == step.payload.digest:
            step = None  # refused for good: wait until the content changes
        return loaded, new, step, following

    async def _call(self, key: DraftKey, state: DraftState, step: Step) -> float | None:
        chat, thread = key.chat_id, key.thread_id
        if isinstance(step, Send):
            method, params = self._outgoing(key, step.payload)
            mark = await self.state.last_message(chat)
            state = sending(state, step, method, params, mark, self.clock())
            await self.state.save_draft(key, state)  # write-ahead: a crash now is an unsure send
            reply = await self.sender.send(chat, thread, method, params)
            return await self._after_send(key, state, step, reply)
        if isinstance(step, Edit):
            method, params = self._outgoing(key, step.payload)
            reply = await self.sender.edit(chat, step.message_id, method, params)
            return await self._after_edit(key, state, step, reply)
        if isinstance(step, Delete):
            reply = await self.sender.delete(chat, step.message_id)
            settled = (Outcome.ok, Outcome.missing, Outcome.not_editable, Outcome.forbidden, Outcome.rejected)
            if reply.outcome in settled:
                if not reply.delivered and reply.outcome is not Outcome.missing:
                    log.warning(
                        "chat %s: could not delete message %s (%s); forgetting it", chat, step.message_id, reply.detail
                    )
                await self.state.save_draft(key, gone(state))
                self._ok(chat)
                return 0
            return self._trouble(key, reply)
        if isinstance(step, Probe):
            intent = step.intent
            reply = await self.sender.edit(chat, step.message_id, intent.method, intent.params)
            if reply.outcome is Outcome.ok:
                # Only "not modified" proves the message already showed what we sent: an
                # edit that went through changed some other message of this bot (one we
                # did not know of). It cannot be restored; it is remembered as ours so
                # that no probe touches it again, and the next id is tried.
                log.warning(
                    "chat %s: probing for the unsure send of %s overwrote message %s, which was not it",
                    chat,
                    key.owner.display_key,
                    step.message_id,
                )
                await self.state.save_draft(key, foreign(state, intent, step.message_id))
                await self._saw(chat, step.message_id)
                return 0
            if reply.outcome is Outcome.not_modified:
                log.info(
                    "chat %s: the unsure send of %s landed as message %s", chat, key.owner.display_key, step.message_id
                )
                await self.state.save_draft(key, found(state, intent, step.message_id))
                await self._saw(chat, step.message_id)
                self._ok(chat)
                return 0
            if reply.outcome is Outcome.not_editable:
                await self.state.save_draft(key, foreign(state, intent, step.message_id))
                return 0
            if reply.outcome in (Outcome.flood, Outcome.retry, Outcome.unsure):
                return self._trouble(key, reply)
            # Not found, or content Telegram refuses: nothing of ours landed there.
            await self.state.save_draft(key, absent(state))
            return 0
        raise TypeError(f"unknown step {step!r}")

    def _outgoing(self, key: DraftKey, payload: Payload) -> tuple[str, dict[str, Any]]:
        """The method and parameters that show `payload`: plain text when Telegram could
        not parse its HTML before."""
        if (key, payload.digest) in self._plain and payload.fallback is not None:
            text = payload.fallback()
            if text:
                return "sendMessage", {"text": text}
        return payload.method, dict(payload.params)

    async def _after_send(self, key: DraftKey, state: DraftState, step: Send, reply: Reply) -> float | None:
        chat = key.chat_id
        outcome = reply.outcome
        if outcome is Outcome.ok and reply.message_id is not None:
            await self.state.save_draft(key, sent(state, step, reply.message_id))
            await self._saw(chat, reply.message_id)
            self._ok(chat)
            return 0
        if outcome is Outcome.unsure:
            # It may have landed: the intent stays, `plan` probes for it after `settle`.
            log.warning(
                "chat %s: send of %s may or may not have landed (%s)", chat, key.owner.display_key, reply.detail
            )
            # `settle` counts from now: the request may still be landing at the server.
            await self.state.save_draft(key, unknown(state, self.clock()))
            self._failures[chat] = self._failures.get(chat, 0) + 1
            return 0
        state = not_sent(state)
        if outcome in (Outcome.flood, Outcome.retry):
            await self.state.save_draft(key, state)
            return self._trouble(key, reply)
        if outcome is Outcome.bad_entities and self._fall_back_to_plain(key, step.payload, reply):
            await self.state.save_draft(key, state)
            return 0
        if outcome is Outcome.rich_rejected:
            await self.state.save_draft(key, state)
            await self._refuse_rich(reply.detail)
            return 0
        if outcome is Outcome.rich_refused and step.purpose == "draft":
            await self.state.save_draft(key, state)
            self._rich_content_refused(key, step.payload, reply)
            return 0
        self._refusal(key, reply)
        await self.state.save_draft(key, skipped(state, step))
        if step.purpose == "draft":
            self._refused[key] = step.payload.digest
        return 0

    async def _after_edit(self, key: DraftKey, state: DraftState, step: Edit, reply: Reply) -> float | None:
        chat = key.chat_id
        outcome = reply.outcome
        if reply.delivered:
            await self.state.save_draft(key, edited(state, step))
            self._ok(chat)
            return 0
        if outcome in (Outcome.missing, Outcome.not_editable):
            # Deleted by a user, or no longer editable: a new draft replaces it.
            log.info("chat %s: draft %s is gone (%s); sending a new one", chat, step.message_id, reply.detail)
            await self.state.save_draft(key, gone(state))
            return 0
        if outcome in (Outcome.flood, Outcome.retry, Outcome.unsure):
            return self._trouble(key, reply)  # edits are idempotent: retried with newest content
        if outcome is Outcome.bad_entities and self._fall_back_to_plain(key, step.payload, reply):
            return 0
        if outcome is Outcome.rich_rejected:
            await self._refuse_rich(reply.detail)
            return 0
        if outcome is Outcome.rich_refused:
            self._rich_content_refused(key, step.payload, reply)
            return 0
        self._refusal(key, reply)
        self._refused[key] = step.payload.digest
        return 0

    def _refusal(self, key: DraftKey, reply: Reply) -> None:
        if reply.outcome is Outcome.forbidden:  # blocked or removed: said once per chat
            self._log_once(
                "forbidden", key.chat_id, "chat %s: the bot may not write here: %s", key.chat_id, reply.detail
            )
        else:
            log.error("chat %s: Telegram refused a message of %s: %s", key.chat_id, key.owner.display_key, reply.detail)

    def _fall_back_to_plain(self, key: DraftKey, payload: Payload, reply: Reply) -> bool:
        """Mark this payload for plain text; False when it already was (or has none)."""
        if (key, payload.digest) in self._plain or payload.fallback is None:
            return False
        self._plain.add((key, payload.digest))
        self._log_once(
            "entities",
            key.chat_id,
            "chat %s: Telegram could not parse the HTML of a draft (%s); sending plain text",
            key.chat_id,
            reply.detail,
        )
        return True

    def _rich_content_refused(self, key: DraftKey, payload: Payload, reply: Reply) -> None:
        """The server refused this rich payload for its content: show its classic
        rendering instead; other payloads stay rich."""
        self._rich_refused.add((key, payload.digest))
        log.warning(
            "chat %s: the Bot API server refused a rich message of %s (%s); showing it as classic HTML",
            key.chat_id,
            key.owner.display_key,
            reply.detail,
        )

    async def _refuse_rich(self, reason: str) -> None:
        if self.rich_refused is None:
            log.warning(
                "the Bot API server rejected rich messages (%s): falling back to classic HTML for this bot",
                reason,
            )
        self.rich_refused = reason or "rejected"
        await self.state.refuse_rich(self.bot_id, self.rich_refused)

    def _trouble(self, key: DraftKey, reply: Reply) -> float:
        """A 429 holds the chat; network trouble backs off. Returns the delay to look again."""
        if reply.outcome is Outcome.flood:
            held = self.pacer.hold(key.chat_id, reply.retry_after)
            log.warning("chat %s: flood control, waiting %.0f s", key.chat_id, held)
            return 0  # `process` waits for the chat to be ready, with the newest content
        log.warning("chat %s: %s (%s); retrying", key.chat_id, reply.outcome, reply.detail)
        return self.backoff(key.chat_id)

    def backoff(self, chat_id: int) -> float:
        failures = self._failures.get(chat_id, 0)
        self._failures[chat_id] = failures + 1
        return min(0.5 * 2.0**failures, self.options.max_backoff)

    def _ok(self, chat_id: int) -> None:
        self._failures.pop(chat_id, None)

    async def _saw(self, chat_id: int, message_id: int) -> None:
        """Remember a message we sent (or found to be ours)."""
        if allowed(self.telegram, chat_id):
            await self.state.sent_message(chat_id, message_id)

    def _log_once(self, what: str, chat_id: int, message: str, *args: object) -> None:
        if (what, chat_id) not in self._logged:
            self._logged.add((what, chat_id))
            log.warning(message, *args)

    # --- one-off messages ----------------------------------------------------------------

    async def deliver(self, lane: ChatLane, item: _Say) -> None:
        """Send a one-off message taken from the lane's outbox. A reply is not worth a
        duplicate: it is retried (put back first) only when it surely never reached
        Telegram."""
        chat = lane.chat_id
        await self.pacer.ready(chat)
        await self.pacer.take(chat)
        if item.payload is not None:
            reply = await self.sender.send(chat, item.thread_id, item.payload.method, dict(item.payload.params))
        else:
            reply = await self.sender.say(chat, item.thread_id, item.text or "")
        if reply.outcome is Outcome.flood:
            self.pacer.hold(chat, reply.retry_after)
            lane.outbox.appendleft(item)
            return
        if reply.outcome is Outcome.retry:
            self.pacer.hold(chat, self.backoff(chat))
            lane.outbox.appendleft(item)
            return
        if reply.outcome is Outcome.ok and reply.message_id is not None:
            self._ok(chat)
            await self._saw(chat, reply.message_id)
        elif reply.outcome is Outcome.rich_rejected:
            await self._refuse_rich(reply.detail)
            log.warning("chat %s: a rich message was not delivered: %s", chat, reply.detail)
        else:
            log.warning("chat %s: a message was not delivered (%s): %s", chat, reply.outcome, reply.detail)
