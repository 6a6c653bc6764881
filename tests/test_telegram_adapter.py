"""The Telegram adapter end to end: real python-telegram-bot over HTTP against the Bot
API emulator, a real Redis, `run_adapter` as `progresscast serve` runs it.

Pacing is Telegram's (1 call/s in a private chat, 20/min in a group), run at 1/20 of
real time on both sides (`PROGRESSCAST_TIME_SCALE`, read by the adapter's pacer and by
the emulator's); tests marked `realtime` keep real time. Only the timeouts a test
provokes are shortened (they are not pacing, so they are not scaled).
"""

from __future__ import annotations

import asyncio
import itertools
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from redis.asyncio import Redis

from conftest import all_keys
from progresscast.channels.draft.state import DraftState
from progresscast.channels.state.ids import DraftKey
from progresscast.config.settings import Settings
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.timing import Usage
from progresscast.model.view import RunState
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.sharding import layout_of
from progresscast.telegram.bot import run_adapter
from progresscast.telegram.follows import TelegramState
from progresscast.telegram.options import AdapterOptions
from progresscast.telegram.pacing import Pace
from progresscast.testing import BotAPIEmulator, ShownMessage
from progresscast.timescale import ENV as TIME_SCALE_ENV
from progresscast.timescale import time_scale

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")  # PTB's own RetryAfter

PRIVATE = 4242
OTHER = 777
GROUP = -1001234567890
OWNER = Owner("main", "t1")
GROUP_SENDER = 424242
"""Who writes in a group when a test does not say (the emulator's default)."""


SCALE = 0.05
"""The time scale of most tests here: Telegram's pacing at 1/20 of real time."""


@pytest.fixture(autouse=True)
def scaled(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> float:
    """Scale pacing (the adapter's and the emulator's) unless the test is `realtime`."""
    if request.node.get_closest_marker("realtime") is None:
        monkeypatch.setenv(TIME_SCALE_ENV, str(SCALE))
    else:
        monkeypatch.delenv(TIME_SCALE_ENV, raising=False)
    return time_scale()


def pacing(seconds: float) -> float:
    """`seconds` of Telegram's time, in this test's real seconds."""
    return seconds * time_scale()


async def quiet(seconds: float) -> None:
    """Let `seconds` of Telegram's time pass: for checks that nothing more happens."""
    await asyncio.sleep(pacing(seconds))


@pytest.fixture
async def api(scaled: float):
    async with BotAPIEmulator() as emulator:
        yield emulator


def open_access(config: dict[str, Any], allow_list: str = "allowedChats") -> dict[str, Any]:
    """`config` with `access = "open"` unless it says who may follow (these tests are about
    commands and drafts; access by grant is tested in test_access.py)."""
    if "access" in config or config.get(allow_list):
        return config
    return {"access": "open", **config}


class Harness:
    """One adapter (restartable) on one emulator and one Redis."""

    def __init__(self, api: BotAPIEmulator, redis: Redis, **telegram: Any) -> None:
        self.api = api
        self.redis = redis
        self.store = CardStore(redis)
        self.settings = Settings.model_validate(
            {
                "agents": {"default": "main", "known": ["main", "research"]},
                "channels": {"telegram": {"token": api.token, "apiBaseUrl": api.base_url, **open_access(telegram)}},
            }
        )
        self.options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0)
        # In groups only administrators change what the chat follows: the emulator's
        # default group sender is one here (test_access.py tries the others).
        api.bot().set_admins(GROUP, GROUP_SENDER)
        self.task: asyncio.Task[None] | None = None
        self.replies: set[tuple[int, int]] = set()

    async def start(self) -> None:
        def polls() -> int:
            return sum(c.method == "getUpdates" for c in self.api.calls)

        before = polls()
        task = self.task = asyncio.create_task(run_adapter(self.settings, self.redis, options=self.options))
        await self.api.wait_for(lambda: task.done() or polls() > before, 5)
        if task.done():
            task.result()

    async def stop(self) -> None:
        assert self.task is not None
        self.task.cancel()
        try:
            await asyncio.wait_for(asyncio.shield(self.task), 15)  # a stop that hangs fails
        except asyncio.CancelledError:
            pass

    async def command(self, chat: int, text: str, **kw: Any) -> ShownMessage:
        """A user sends `text`; returns the bot's reply (the first bot message after it)."""
        update = self.api.send_user_message(chat, text, **kw)
        sent_id = update["message"]["message_id"]

        def reply() -> ShownMessage | None:
            return next((m for m in self.api.chat(chat).visible() if m.message_id > sent_id), None)

        message = await self.api.wait_for(reply, 5)
        self.replies.add((chat, message.message_id))
        return message

    def drafts(self, chat: int) -> list[ShownMessage]:
        """The bot's messages in the chat that are not command replies."""
        return [m for m in self.api.chat(chat).visible() if (chat, m.message_id) not in self.replies]

    async def shows(self, chat: int, *needles: str, count: int = 1, timeout: float = 6.0) -> list[ShownMessage]:
        """Wait until the chat shows exactly `count` drafts and the last contains every needle."""

        def ok() -> tuple[list[ShownMessage]] | None:
            drafts = self.drafts(chat)
            if len(drafts) == count and (count == 0 or all(n in drafts[-1].text for n in needles)):
                return (drafts,)  # truthy even when empty
            return None

        try:
            return (await self.api.wait_for(ok, timeout))[0]
        except TimeoutError:
            raise AssertionError(f"chat {chat} shows {[m.text for m in self.drafts(chat)]}") from None

    async def put(self, *steps: tuple[str, str], markdown: str | None = None, owner: Owner = OWNER) -> None:
        plan = [{"step": s, "status": st} for s, st in steps] or None
        await self.store.put(owner, CardInput.parse({"plan": plan, "markdown": markdown}))

    def draft_sends(self, chat: int) -> list[Any]:
        """Successful sends to the chat that were not command replies."""
        return [
            c
            for c in self.api.calls_for(chat)
            if c.method in ("sendMessage", "sendRichMessage")
            and c.ok
            and (chat, c.result["message_id"]) not in self.replies
        ]


@pytest.fixture
async def harness(api: BotAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**telegram: Any) -> Harness:
        h = Harness(api, redis, **telegram)
        made.append(h)
        await h.start()
        return h

    yield make
    for h in made:
        if h.task and not h.task.done():
            await h.stop()


def errors(api: BotAPIEmulator, chat: int) -> list[tuple[str, int, str | None]]:
    return [(c.method, c.status, c.description) for c in api.calls_for(chat) if not c.ok and not c.injected]


# --- the headline behaviour ---------------------------------------------------------


@pytest.mark.realtime
async def test_follow_then_30_writes_in_a_second(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    reply = await h.command(PRIVATE, "/follow t1")
    assert "Following agent:main:t1" in reply.text
    start = time.monotonic()
    for i in range(30):
        await h.put(("Reproduce", "completed"), (f"Fix part {i}", "in_progress"))
        await asyncio.sleep(max(0.0, start + (i + 1) / 31 - time.monotonic()))
    assert time.monotonic() - start < 1.0
    last_write = time.monotonic()
    drafts = await h.shows(PRIVATE, "Fix part 29", timeout=2.5)
    assert time.monotonic() - last_write <= 2.0 + 0.3  # one pacing interval + 1 s (+ test slack)
    assert "1/2 complete" in drafts[0].text
    calls = api.calls_for(PRIVATE)
    assert len(calls) <= 4, [(c.method, c.at - start) for c in calls]
    assert errors(api, PRIVATE) == []
    await quiet(1.2)  # nothing more is sent once the chat shows the last card
    assert len(api.calls_for(PRIVATE)) == len(calls)


@pytest.mark.realtime
async def test_group_topic_is_paced_at_20_per_minute(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    reply = await h.command(GROUP, "/follow t1", message_thread_id=7)
    assert reply.message_thread_id == 7
    for i in range(8):
        await h.put((f"Step {i}", "in_progress"))
        await quiet(0.5)
    last_write = time.monotonic()
    drafts = await h.shows(GROUP, "Step 7", timeout=5)
    assert time.monotonic() - last_write <= pacing(3.0 + 1.0) + 0.3
    assert drafts[0].message_thread_id == 7
    calls = [c for c in api.calls_for(GROUP) if c.method != "getChatMember"]  # asked before /follow; not paced
    gaps = [b.at - a.at for a, b in itertools.pairwise(calls)]
    assert len(gaps) >= 2, calls  # the reply, the first draft and at least one edit
    assert all(gap >= pacing(2.9) for gap in gaps), gaps
    assert errors(api, GROUP) == []


# --- clear, run end, modes --------------------------------------------------------------


async def test_clear_in_progress_mode_deletes_the_draft(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    await h.store.clear(OWNER)
    await h.shows(PRIVATE, count=0)
    assert draft.message_id in api.chat(PRIVATE).deleted


async def test_clear_in_progress_mode_keeps_other_activity(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.store.update_activity(OWNER, headline="Reading the logs")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce", "Reading the logs")
    await h.store.clear(OWNER)

    def reduced() -> bool:
        [now] = h.drafts(PRIVATE)
        return "Reproduce" not in now.text and "Reading the logs" in now.text

    await api.wait_for(reduced, 5)
    assert h.drafts(PRIVATE)[0].message_id == draft.message_id
    await h.store.update_activity(OWNER, headline="")
    await h.shows(PRIVATE, count=0)


@pytest.mark.parametrize("mode", ["partial", "block"])
async def test_clear_in_preview_modes_keeps_the_answer(api: BotAPIEmulator, harness, mode: str) -> None:
    h = await harness(chats=[{"id": PRIVATE, "mode": mode}])
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.store.update_activity(OWNER, answer="The answer so far.\n\nStill writing")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [draft] = await h.shows(PRIVATE, "The answer so far.", "Fix")
    await h.store.clear(OWNER)

    def reduced() -> bool:
        [now] = h.drafts(PRIVATE)
        return "Fix" not in now.text and "complete" not in now.text and "The answer so far." in now.text

    await api.wait_for(reduced, 5)
    assert h.drafts(PRIVATE)[0].message_id == draft.message_id
    await h.store.update_activity(OWNER, answer="")
    await h.shows(PRIVATE, count=0)


@pytest.mark.backends
async def test_run_end_in_progress_mode_sends_the_answer_once(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="The bug was an **off-by-one** in the pager.")
    [draft] = await h.shows(PRIVATE, "Fix")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [answer] = await h.shows(PRIVATE, "off-by-one in the pager")
    assert draft.message_id in api.chat(PRIVATE).deleted
    assert answer.entities  # the answer is formatted (bold), a normal message
    sends = len(h.draft_sends(PRIVATE))
    # A restart, and another change of the finished session: nothing is sent again.
    await h.stop()
    await h.store.update_activity(OWNER, headline="idle")
    await h.start()
    await quiet(2.0)
    assert len(h.draft_sends(PRIVATE)) == sends
    assert [m.message_id for m in h.drafts(PRIVATE)] == [answer.message_id]


async def run_began_earlier(redis: Any, ms: int) -> None:
    """Move the owner's current run's start `ms` back on the store's clock."""
    layout = await layout_of(redis)
    started = int(await redis.hget(layout.run(OWNER), "startedAt"))
    await redis.hset(layout.run(OWNER), "startedAt", started - ms)


async def test_the_line_that_ends_a_run_says_how_long_it_took_and_what_it_used(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    # The run began four minutes ago (on the store's clock): a run's time shows from its
    # first whole minute, and a test does not wait that long.
    await run_began_earlier(h.redis, 4 * 60_000)
    await h.put(("Reproduce", "in_progress"), ("Fix", "pending"))
    await h.shows(PRIVATE, "Reproduce")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.store.update_activity(OWNER, answer="Fixed the pager.")
    await h.store.end_run(OWNER, "r1", RunState.completed, usage=Usage(1000, 234))
    [answer] = await h.shows(PRIVATE, "Fixed the pager")
    head = answer.text.splitlines()[0]
    assert re.fullmatch(r"✅ t1 · 2/2 done · 4 m · 1.2k tokens", head), head
    view = await h.store.view(OWNER)
    assert view.started_at is not None and view.ended_at is not None
    assert [bool(t and t.took is not None) for t in view.step_times] == [True, False]  # Fix was never active


async def test_a_live_draft_shows_its_run_time_turning_a_minute_without_a_write(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    # The run began 58 s ago on the store's clock: its first whole minute comes in 2 s.
    await run_began_earlier(h.redis, 58_000)
    await h.put(("Reproduce", "in_progress"), ("Fix", "pending"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    assert "· 1 m" not in draft.text
    # Nothing is written: the draft is looked at again at the run's next minute, alone.
    [shown] = await h.shows(PRIVATE, "0/2 complete · 1 m", timeout=8)
    assert shown.message_id == draft.message_id


async def test_a_card_shown_again_after_its_run_ended_is_deleted_by_a_clear(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.store.update_activity(OWNER, headline="Reading the logs", tool="grep error app.log")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="Fixed the pager.")
    await h.shows(PRIVATE, "Fix")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [answer] = await h.shows(PRIVATE, "Fixed the pager.")
    assert (await h.command(PRIVATE, "/card")).text == "Showing agent:main:t1 again below."
    [_, again] = await h.shows(PRIVATE, "Fix", count=2)
    await h.store.clear(OWNER)
    # The card shown again goes; nothing new holds the ended run's headline or tool line.
    await api.wait_for(lambda: again.message_id in api.chat(PRIVATE).deleted, 5)
    await quiet(3.0)
    assert [m.message_id for m in h.drafts(PRIVATE)] == [answer.message_id], [m.text for m in h.drafts(PRIVATE)]


async def test_keep_on_complete_keeps_the_finished_checklist(api: BotAPIEmulator, harness) -> None:
    h = await harness(keepOnComplete=True)
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="Fixed.")
    [draft] = await h.shows(PRIVATE, "Fix")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    kept, _answer = await h.shows(PRIVATE, "Fixed.", count=2)
    assert kept.message_id == draft.message_id and "2/2 complete" in kept.text
    # The next run gets a new draft; the finished one stays as the record of its run.
    await h.store.start_run(OWNER, "r2")
    await h.put(("Ship", "in_progress"))
    drafts = await h.shows(PRIVATE, "Ship", count=3)
    assert drafts[0].message_id == draft.message_id and "2/2 complete" in drafts[0].text


async def test_block_mode_rotates_past_block_chars(api: BotAPIEmulator, harness) -> None:
    h = await harness(chats=[{"id": PRIVATE, "mode": "block"}], streaming={"blockChars": 200})
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    first = "First paragraph " + "a" * 130 + "."
    second = "Second paragraph " + "b" * 130 + "."
    await h.store.update_activity(OWNER, answer=f"{first}\n\n{second}\n\nThird")
    drafts = await h.shows(PRIVATE, "Second paragraph", count=2)
    assert "First paragraph" in drafts[0].text and "Second" not in drafts[0].text
    assert "First" not in drafts[1].text
    await h.store.update_activity(OWNER, answer=f"{first}\n\n{second}\n\nThird and last.")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    drafts = await h.shows(PRIVATE, "Third and last.", count=2)
    assert errors(api, PRIVATE) == []


# --- restarts -------------------------------------------------------------------------


@pytest.mark.backends
async def test_restart_edits_the_same_message(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    await h.stop()
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.start()
    [now] = await h.shows(PRIVATE, "Fix")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    [now] = await h.shows(PRIVATE, "2/2 complete")
    assert now.message_id == draft.message_id
    assert len(h.draft_sends(PRIVATE)) == 1
    assert errors(api, PRIVATE) == []


async def stored_draft(redis: Redis) -> DraftState:
    """What Redis itself holds of the private chat's draft (no process's memory)."""
    return DraftState.from_json(await redis.get(keys.channel_draft(keys.TG, OWNER, PRIVATE, 0)))


async def stored_once(redis: Redis, ok: Callable[[DraftState], bool], within: float, what: str) -> DraftState:
    """The stored state once `ok` holds of it (the chat may show a call's effect a moment
    before its answer is stored)."""
    deadline = time.monotonic() + within
    while not ok(state := await stored_draft(redis)):
        assert time.monotonic() < deadline, f"{what}: {state}"
        await asyncio.sleep(0.01)
    return state


async def first_draft_stored(harness) -> tuple[Harness, DraftState]:
    """An adapter whose private chat follows t1 and shows its first draft, and that
    draft's stored state once the send's answer is stored too."""
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    await h.shows(PRIVATE, "Reproduce")
    sent = await stored_once(
        h.redis, lambda s: s.message_id is not None and s.intent is None, 5, "the send's answer never stored"
    )
    return h, sent


@pytest.mark.backends
async def test_an_edits_bookkeeping_is_stored_behind_and_at_the_stop(api: BotAPIEmulator, harness, redis: Redis) -> None:
    h, sent = await first_draft_stored(harness)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.shows(PRIVATE, "Fix")
    assert await stored_draft(redis) == sent  # the edit is held in the process for now
    await h.stop()
    stopped = await stored_draft(redis)
    assert stopped.revision == sent.revision + 1 and stopped.digest != sent.digest  # stored at the stop
    edits = len(api.calls_for(PRIVATE, "editMessageText"))
    await h.start()
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"), markdown="same steps, a note")
    await h.shows(PRIVATE, "a note")
    # The restart knew what the message showed: the one edit since is the new write's.
    assert len(api.calls_for(PRIVATE, "editMessageText")) == edits + 1
    assert errors(api, PRIVATE) == []


async def test_an_edit_that_also_changes_the_drafts_bookkeeping_is_stored_at_once(
    api: BotAPIEmulator, harness, redis: Redis
) -> None:
    h, _ = await first_draft_stored(harness)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.shows(PRIVATE, "Fix")
    # The run this draft saw start is bookkeeping a restart needs (to end it): stored
    # with the edit's answer, not held back for the 10 s an edit alone may be.
    await stored_once(redis, lambda s: s.seen_run == "r1", 3, "the run's start was held back")


async def test_an_edit_a_crash_left_unstored_costs_one_edit_telegram_finds_unchanged(
    api: BotAPIEmulator, harness, redis: Redis
) -> None:
    h, sent = await first_draft_stored(harness)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [edited] = await h.shows(PRIVATE, "Fix")
    await h.stop()
    # What a crash before the edit was stored leaves: the state of the first send.
    await TelegramState(redis).drafts.save(DraftKey(PRIVATE, 0, OWNER), sent)
    edits = len(api.calls_for(PRIVATE, "editMessageText"))
    await h.start()

    def looked_again() -> list[Any]:
        return api.calls_for(PRIVATE, "editMessageText")[edits:]

    [again] = await api.wait_for(looked_again, 5)
    assert again.description and "not modified" in again.description  # taken as shown: no loop
    await quiet(3)
    assert len(api.calls_for(PRIVATE, "editMessageText")) == edits + 1
    [now] = h.drafts(PRIVATE)
    assert now.message_id == edited.message_id and now.text == edited.text
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.shows(PRIVATE, "2/2 complete")


async def test_killed_during_a_send_leaves_no_duplicate(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    # The send reaches Telegram but its answer never comes back: the adapter dies waiting.
    api.timeout_next("sendMessage", delay=30, apply=True, chat_id=PRIVATE)
    await h.put(("Reproduce", "in_progress"))
    await api.wait_for(lambda: h.drafts(PRIVATE), 5)
    await h.stop()
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.start()
    [_now] = await h.shows(PRIVATE, "Fix", timeout=8)
    assert len(api.chat(PRIVATE).messages) == 3  # the command, the reply, one draft
    assert len(api.calls_for(PRIVATE, "sendMessage")) == 2  # the reply, the draft (once)


async def test_timed_out_first_send_is_adopted_not_repeated(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    # The send takes effect, but its answer comes after python-telegram-bot gave up (1 s).
    api.timeout_next("sendMessage", delay=3, apply=True, chat_id=PRIVATE)
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows(PRIVATE, "Fix", timeout=8)
    assert now.message_id == draft.message_id
    sends = api.calls_for(PRIVATE, "sendMessage")
    assert len(sends) == 2 and sends[1].timed_out  # the reply and the draft, never a second draft
    probe = api.calls_for(PRIVATE, "editMessageText")[0]
    assert probe.description and "not modified" in probe.description  # how it was found


@pytest.mark.backends
async def test_a_lost_change_stream_is_recreated(api: BotAPIEmulator, harness, redis: Redis) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    for stream in (await layout_of(redis)).streams:  # one by one: on a Cluster they live apart
        await redis.delete(stream)  # as after a flushed Redis: the streams and the group are gone
    await h.put(("Reproduce", "completed"))
    [now] = await h.shows(PRIVATE, "1/1 complete")
    assert now.message_id == draft.message_id


async def test_bot_api_calls_and_pacing_are_counted(api: BotAPIEmulator, harness) -> None:
    from prometheus_client import REGISTRY

    def sends() -> dict[str, float]:
        return {
            s.labels["outcome"]: s.value
            for m in REGISTRY.collect()
            if m.name == "progresscast_bot_api_calls"
            for s in m.samples
            if s.name.endswith("_total") and s.labels.get("method") == "sendMessage"
        }

    def waits() -> float:
        return REGISTRY.get_sample_value("progresscast_pacing_wait_seconds_count") or 0.0

    before, waited = sends(), waits()
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    await h.shows(PRIVATE, "Reproduce")
    made = len(api.calls_for(PRIVATE, "sendMessage"))
    after = sends()
    assert made and 1 <= after.get("ok", 0) - before.get("ok", 0) <= made
    assert waits() >= waited + 1


# --- errors ---------------------------------------------------------------------------


async def test_429_storm_ends_with_the_latest_card(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows(PRIVATE, "Step 0")
    api.fail_next("editMessageText", status=429, retry_after=2, times=3, chat_id=PRIVATE)
    for i in range(1, 6):
        await h.put((f"Step {i}", "in_progress"))
        await quiet(0.2)
    await h.shows(PRIVATE, "Step 5", timeout=12)
    edits = api.calls_for(PRIVATE, "editMessageText")
    refused = [c for c in edits if c.status == 429]
    assert len(refused) == 3
    for before, after in itertools.pairwise(edits):
        if before.status == 429:
            assert after.at - before.at >= pacing(2.0) * 0.95  # retry_after honoured
    assert errors(api, PRIVATE) == []


async def test_5xx_on_edits_and_first_send(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    api.fail_next("sendMessage", status=500, chat_id=PRIVATE)  # not applied: looked for, then sent
    await h.put(("Step 0", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Step 0", timeout=8)
    api.fail_next("editMessageText", status=502, times=2, chat_id=PRIVATE)
    await h.put(("Step 1", "in_progress"))
    [now] = await h.shows(PRIVATE, "Step 1", timeout=8)
    assert now.message_id == draft.message_id
    assert len(h.draft_sends(PRIVATE)) == 1
    assert errors(api, PRIVATE) == [("editMessageText", 400, "Bad Request: message to edit not found")]


async def test_probing_for_a_lost_send_never_touches_another_draft(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.command(PRIVATE, "/follow t2")
    api.fail_next("sendMessage", status=500, chat_id=PRIVATE)  # t1's first send: unsure
    await h.put(("Alpha", "in_progress"))
    await asyncio.sleep(0.1)
    await h.put(("Beta", "in_progress"), owner=Owner("main", "t2"))
    drafts = await h.shows(PRIVATE, count=2, timeout=8)
    texts = sorted(m.text for m in drafts)
    assert "Alpha" in texts[0] and "Beta" in texts[1]
    assert all(c.params.get("message_id") != drafts[0].message_id for c in api.calls_for(PRIVATE, "editMessageText"))


async def test_message_deleted_by_user_is_replaced(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Step 0", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Step 0")
    api.delete_by_user(PRIVATE, draft.message_id)
    await h.put(("Step 1", "in_progress"))
    [second] = await h.shows(PRIVATE, "Step 1")
    assert second.message_id != draft.message_id
    await h.put(("Step 2", "in_progress"))
    [third] = await h.shows(PRIVATE, "Step 2")
    assert third.message_id == second.message_id  # the new id was remembered
    assert len(h.draft_sends(PRIVATE)) == 2


async def test_unparsable_html_is_resent_as_plain_text(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    api.fail_next(
        "sendMessage",
        status=400,
        description='Bad Request: can\'t parse entities: Unsupported start tag "br" at byte offset 3',
        chat_id=PRIVATE,
    )
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    assert draft.parse_mode is None and "[>]" in draft.text  # the text renderer's markers


async def test_rich_messages(api: BotAPIEmulator, harness) -> None:
    h = await harness(richMessages=True)
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Fix")
    assert draft.is_rich and "☑" in draft.text
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    [now] = await h.shows(PRIVATE, "2/2 complete")
    assert now.message_id == draft.message_id and now.is_rich
    edit = api.calls_for(PRIVATE, "editMessageText")[-1]
    assert "rich_message" in edit.params and "text" not in edit.params


async def test_rich_unsupported_falls_back_to_classic_and_remembers(
    api: BotAPIEmulator, harness, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    api.rich_supported = False
    h = await harness(richMessages=True)
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    assert not draft.is_rich and draft.parse_mode == "HTML"
    assert await redis.get(keys.channel_no_rich(keys.TG, api.bot_user["id"]))
    assert sum("rejected rich messages" in r.getMessage() for r in caplog.records) == 1
    await h.stop()
    rich_calls = len(api.calls_for(PRIVATE, "sendRichMessage"))
    await h.start()
    await h.command(OTHER, "/follow t1")
    await h.put(("Reproduce", "completed"))
    await h.shows(OTHER, "1/1 complete")
    await h.shows(PRIVATE, "1/1 complete")
    assert len(api.calls_for(PRIVATE, "sendRichMessage")) + len(api.calls_for(OTHER, "sendRichMessage")) == rich_calls


# --- commands -------------------------------------------------------------------------


async def test_chat_not_allowed_cannot_follow(api: BotAPIEmulator, harness, redis: Redis) -> None:
    h = await harness(allowedChats=[PRIVATE])
    reply = await h.command(OTHER, "/follow t1")
    assert "not enabled for this chat" in reply.text
    await h.put(("Reproduce", "in_progress"))
    await quiet(1.0)
    assert h.drafts(OTHER) == []
    assert [k for k in await all_keys(redis, "pc:*tg*")] == []
    reply = await h.command(PRIVATE, "/follow t1")
    assert "Following" in reply.text
    await h.shows(PRIVATE, "Reproduce")


async def test_follow_errors_are_polite(api: BotAPIEmulator, harness, redis: Redis) -> None:
    h = await harness()
    reply = await h.command(PRIVATE, "/follow t1 nobody")
    assert reply.text == "Sorry, I can't follow t1: agentId 'nobody' is not a configured agent."
    reply = await h.command(PRIVATE, "/follow")
    assert reply.text == "Usage: /follow SESSION [AGENT]"
    reply = await h.command(PRIVATE, "/follow agent:research:x main")
    assert "conflicts" in reply.text
    # What the bot echoes is cleaned: no U+202E turning its own words around.
    reply = await h.command(PRIVATE, "/follow evil\u202eknat\u2066 nob\u200body")
    assert reply.text == "Sorry, I can't follow evilknat: sessionKey must not contain spaces, control characters or braces."
    # A lone surrogate (the emulator sends it as the JSON escape `\ud800`) is echoed as its
    # escape: the reply must be sendable, and say what was wrong.
    rule = "must be valid Unicode text (no lone surrogates)"
    for typed, text in [
        ("/follow a\ud800b", f"Sorry, I can't follow a\\ud800b: sessionKey {rule}."),
        ("/follow t1 m\udc80ain", f"Sorry, I can't follow t1: agentId {rule}."),
        ("/unfollow a\ud800b", f"Sorry, a\\ud800b is not a session I can follow: sessionKey {rule}."),
        ("/mode \ud800", "\\ud800 is not a mode"),
        # and control characters are dropped (no escape sequence reaches the chat)
        ("/follow ev\x1b[31mil\x07", "Sorry, I can't follow ev[31mil: sessionKey must not contain"),
    ]:
        reply = await h.command(PRIVATE, typed)
        assert reply.text.startswith(text), (typed, reply.text)
    assert await redis.smembers(keys.channel_follows(keys.TG, PRIVATE)) == set()


@pytest.mark.backends
async def test_follow_shows_the_current_card_and_unfollow_removes_it(api: BotAPIEmulator, harness, redis: Redis) -> None:
    h = await harness()
    await h.put(("Reproduce", "in_progress"), owner=Owner("research", "t2"))
    reply = await h.command(PRIVATE, "/follow t2 research")
    assert reply.text == "Following agent:research:t2."
    [draft] = await h.shows(PRIVATE, "Reproduce")
    reply = await h.command(PRIVATE, "/help")
    assert "following agent:research:t2; mode progress; rich messages off" in reply.text
    reply = await h.command(PRIVATE, "/unfollow")
    assert reply.text == "Stopped following agent:research:t2."
    await h.shows(PRIVATE, count=0)
    assert draft.message_id in api.chat(PRIVATE).deleted
    assert await redis.smembers(keys.channel_followers(keys.TG, Owner("research", "t2"))) == set()

    async def forgotten() -> bool:
        return await redis.get(keys.channel_draft(keys.TG, Owner("research", "t2"), PRIVATE, 0)) is None

    await api.wait_for(forgotten, 2)


async def test_a_misspelt_command_names_the_nearest_one(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    reply = await h.command(PRIVATE, "/folow shop")
    assert reply.text == (
        "Unknown command /folow — did you mean /follow?\n"
        "/follow SESSION [AGENT] — show this session's progress card in this chat"
    )
    reply = await h.command(PRIVATE, "/xyzzy")
    assert reply.text.startswith("Unknown command /xyzzy. The commands are /follow, /unfollow")


@pytest.mark.backends
async def test_mode_override_wins_over_config_and_persists(api: BotAPIEmulator, harness, redis: Redis) -> None:
    # (The /mode commands land below the draft; kept in place here, to follow one message.)
    h = await harness(chats=[{"id": PRIVATE, "mode": "partial"}], streaming={"stayAtBottom": False})
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    assert "main · t1" not in draft.text  # partial: no label line
    reply = await h.command(PRIVATE, "/mode progress")
    assert reply.text == "Mode for this chat: progress."
    await api.wait_for(lambda: "main · t1" in h.drafts(PRIVATE)[0].text, 5)
    assert await redis.hget(keys.channel_prefs(keys.TG, PRIVATE), "mode") == "progress"
    await h.stop()
    await h.put(("Reproduce", "completed"))
    await h.start()
    [now] = await h.shows(PRIVATE, "1/1 complete")
    assert "main · t1" in now.text and now.message_id == draft.message_id
    reply = await h.command(PRIVATE, "/mode fast")
    assert reply.text == (
        "fast is not a mode; the modes are progress, partial, block, off. "
        "Usage: /mode progress|partial|block|off (now: progress)."
    )
    reply = await h.command(PRIVATE, "/mode")
    assert reply.text == "Usage: /mode progress|partial|block|off (now: progress)."


async def test_rich_command_switches_the_draft_kind(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    assert not draft.is_rich
    reply = await h.command(PRIVATE, "/rich on")
    assert reply.text == "Rich messages on for this chat."
    await api.wait_for(lambda: [m.is_rich for m in h.drafts(PRIVATE)] == [True], 5)
    assert draft.message_id in api.chat(PRIVATE).deleted


async def test_card_command_moves_the_draft_down(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    api.send_user_message(PRIVATE, "some chatter")
    # The reply is the same on every platform now: it says what is shown again.
    assert (await h.command(PRIVATE, "/card")).text == "Showing agent:main:t1 again below."
    await api.wait_for(lambda: draft.message_id in api.chat(PRIVATE).deleted, 5)
    [now] = await h.shows(PRIVATE, "Reproduce")
    assert now.message_id > draft.message_id + 2
    await h.put(("Reproduce", "completed"))
    [last] = await h.shows(PRIVATE, "1/1 complete")
    assert last.message_id == now.message_id


async def test_config_follow_subscribes_at_start_up(api: BotAPIEmulator, harness, redis: Redis) -> None:
    await CardStore(redis).put(OWNER, CardInput.parse({"plan": [{"step": "Reproduce", "status": "in_progress"}]}))
    h = await harness(chats=[{"id": PRIVATE, "follow": ["t1"]}])
    [draft] = await h.shows(PRIVATE, "Reproduce")
    await h.put(("Reproduce", "completed"))
    [now] = await h.shows(PRIVATE, "1/1 complete")
    assert now.message_id == draft.message_id


# --- review fixes ----------------------------------------------------------------------


async def test_a_rich_content_error_falls_back_for_that_payload_only(
    api: BotAPIEmulator, harness, redis: Redis
) -> None:
    h = await harness(richMessages=True)
    await h.command(PRIVATE, "/follow t1")
    api.fail_next(
        "sendRichMessage", status=400, description="Bad Request: too many blocks in the rich message", chat_id=PRIVATE
    )
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    assert not draft.is_rich and draft.parse_mode == "HTML"  # this payload: classic
    assert await redis.get(keys.channel_no_rich(keys.TG, api.bot_user["id"])) is None  # the bot keeps rich
    await h.put(("Reproduce", "completed"))
    [now] = await h.shows(PRIVATE, "1/1 complete")
    assert now.is_rich  # the next payload is rich again (a classic message is replaced)
    # A content error on an edit: that payload is shown classic, rich stays on.
    api.fail_next(
        "editMessageText", status=400, description="Bad Request: rich message must be non-empty", chat_id=PRIVATE
    )
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows(PRIVATE, "Fix")
    assert not now.is_rich
    assert await redis.get(keys.channel_no_rich(keys.TG, api.bot_user["id"])) is None
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    [now] = await h.shows(PRIVATE, "2/2 complete")
    assert now.is_rich


async def test_a_send_landing_after_the_timeout_is_adopted_after_settle(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    h.options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.5)
    await h.stop()
    await h.start()
    await h.command(PRIVATE, "/follow t1")
    # The client gives up after 1 s; the message lands 0.8 s later, before settle (1.5 s
    # after the timeout) ends — but after a settle counted from the send.
    api.timeout_next("sendMessage", delay=4, land_after=1.8, chat_id=PRIVATE)
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce", timeout=8)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows(PRIVATE, "Fix", timeout=8)
    assert now.message_id == draft.message_id
    assert len(api.chat(PRIVATE).visible()) == 2  # the reply and one draft: no duplicate
    [probe, *_] = api.calls_for(PRIVATE, "editMessageText")
    assert probe.description and "not modified" in probe.description


async def test_a_probe_that_changes_a_message_does_not_adopt_it(
    api: BotAPIEmulator, harness, redis: Redis, caplog: pytest.LogCaptureFixture
) -> None:
    h = await harness()
    reply = await h.command(PRIVATE, "/follow t1")

    async def recorded() -> bool:  # command replies are known as ours
        return str(reply.message_id) in await redis.zrange(keys.channel_sent(keys.TG, PRIVATE), 0, -1)

    await api.wait_for(recorded, 2)
    # A reply whose answer is lost lands unrecorded, and the adapter's look for it comes
    # up empty (as when a restart forgot it): a bot message nobody knows of.
    api.timeout_next("sendMessage", delay=3, chat_id=PRIVATE)
    api.fail_next("editMessageText", status=400, description="Bad Request: message to edit not found", chat_id=PRIVATE)
    lost = await h.command(PRIVATE, "/help")
    await api.wait_for(lambda: api.calls_for(PRIVATE, "editMessageText"), 10)  # looked for, not found
    api.fail_next("sendMessage", status=500, chat_id=PRIVATE)  # the draft's send: unsure, not applied
    await h.put(("Reproduce", "in_progress"))
    drafts = await h.shows(PRIVATE, "Reproduce", timeout=10)
    probes = [
        c for c in api.calls_for(PRIVATE, "editMessageText")
        if c.params.get("message_id") == lost.message_id and not c.injected
    ]
    assert probes and probes[0].ok  # the draft's probe went through: it was not our message
    [draft] = drafts
    assert draft.message_id > lost.message_id  # sent anew, the overwritten reply not adopted
    assert any("was not it" in r.getMessage() for r in caplog.records)
    await h.put(("Reproduce", "completed"))
    [now] = await h.shows(PRIVATE, "1/1 complete")
    assert now.message_id == draft.message_id


async def test_a_new_run_before_the_ending_delete_leaves_one_draft(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="The old answer.")
    [draft] = await h.shows(PRIVATE, "Fix")
    api.fail_next("deleteMessage", status=429, retry_after=2, chat_id=PRIVATE)
    await h.put(("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    await api.wait_for(lambda: api.calls_for(PRIVATE, "deleteMessage"), 5)
    await h.store.start_run(OWNER, "r2")  # before the held Delete goes out
    await h.put(("Ship", "in_progress"))
    answer, _ = await h.shows(PRIVATE, "Ship", count=2, timeout=10)
    assert draft.message_id in api.chat(PRIVATE).deleted
    assert "The old answer." in answer.text
    assert errors(api, PRIVATE) == []


async def test_a_chat_removed_from_allowed_chats_gets_no_more_drafts(
    api: BotAPIEmulator, harness, caplog: pytest.LogCaptureFixture
) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.command(OTHER, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    await h.shows(PRIVATE, "Reproduce")
    await h.shows(OTHER, "Reproduce")
    await h.stop()
    h2 = await harness(allowedChats=[PRIVATE])
    h2.replies = h.replies
    calls = len(api.calls_for(OTHER))
    await h2.put(("Reproduce", "completed"))
    await h2.shows(PRIVATE, "1/1 complete")
    await h2.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h2.shows(PRIVATE, "Fix")
    await quiet(1.0)
    assert len(api.calls_for(OTHER)) == calls
    assert sum("not in allowedChats" in r.getMessage() for r in caplog.records) == 1


def workers_made(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Every `ChannelWorker` made from now on, in order (the harness makes one per start)."""
    from progresscast.channels import worker as worker_module

    workers: list[Any] = []
    original = worker_module.ChannelWorker.__init__

    def spy(self: Any, *args: Any, **kw: Any) -> None:
        original(self, *args, **kw)
        workers.append(self)

    monkeypatch.setattr(worker_module.ChannelWorker, "__init__", spy)
    return workers


async def test_idle_lanes_end_and_come_back(
    api: BotAPIEmulator, harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    workers = workers_made(monkeypatch)
    h = await harness()
    h.options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0, lane_idle=0.3)
    await h.stop()
    await h.start()
    worker = workers[-1]
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    await api.wait_for(lambda: PRIVATE not in worker._lanes, 3)  # ended when idle
    await h.put(("Reproduce", "completed"))
    [now] = await h.shows(PRIVATE, "1/1 complete")  # a new lane on demand
    assert now.message_id == draft.message_id


async def test_an_idle_lane_holds_no_task(api: BotAPIEmulator, harness, monkeypatch: pytest.MonkeyPatch) -> None:
    """10,000 followed chats wait at once: a lane's task runs while the lane has work and
    ends when it has none; the next touch starts another in the same lane (what it
    remembers of its drafts kept)."""
    workers = workers_made(monkeypatch)
    h = await harness()
    worker = workers[-1]
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    lane = worker._lanes[PRIVATE]
    await api.wait_for(lambda: lane.task is None, 3)
    await h.put(("Reproduce", "completed"))
    [now] = await h.shows(PRIVATE, "1/1 complete")
    assert now.message_id == draft.message_id
    assert worker._lanes[PRIVATE] is lane and lane.seen
    await api.wait_for(lambda: lane.task is None, 3)


def test_log_once_keys_forget_the_oldest() -> None:
    from progresscast.failure_log import Once

    seen = Once(3)
    assert [seen.first(i) for i in range(5)] == [True] * 5
    assert seen.first(4) is False and len(seen) == 3
    assert seen.first(0) is True  # forgotten: the oldest went first


# --- the shared lifecycle ------------------------------------------------------------------


async def test_a_run_that_ends_while_the_adapter_does_not_look_still_gets_its_answer_once(
    api: BotAPIEmulator, harness
) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="The old answer.")
    [draft] = await h.shows(PRIVATE, "Fix")
    # r1 ends and r2 starts (clearing the activity, answer included) before the adapter
    # looks again: here it is down meanwhile, so it surely sees only r2.
    await h.stop()
    await h.put(("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    await h.store.start_run(OWNER, "r2")
    await h.put(("Ship", "in_progress"))
    await h.start()
    answer, _now = await h.shows(PRIVATE, "Ship", count=2)
    assert "The old answer." in answer.text and draft.message_id in api.chat(PRIVATE).deleted
    await quiet(2.0)
    assert sum("The old answer." in m.text for m in h.drafts(PRIVATE)) == 1
    assert errors(api, PRIVATE) == []


async def test_a_run_that_ends_and_a_next_that_starts_within_one_pacing_interval(
    api: BotAPIEmulator, harness
) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="The first answer.")
    await h.shows(PRIVATE, "Fix")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    await h.store.start_run(OWNER, "r2")
    await h.put(("Ship", "in_progress"))
    answer, _ = await h.shows(PRIVATE, "Ship", count=2)
    assert "The first answer." in answer.text
    await quiet(2.0)
    assert sum("The first answer." in m.text for m in h.drafts(PRIVATE)) == 1


async def test_an_unsure_first_send_in_a_chat_with_no_known_message_never_duplicates(
    api: BotAPIEmulator, redis: Redis, harness
) -> None:
    # A config follow before anyone spoke: no message id is known in the chat. The first
    # send lands, but its answer comes after the client gave up.
    await CardStore(redis).put(OWNER, CardInput.parse({"plan": [{"step": "Reproduce", "status": "in_progress"}]}))
    api.timeout_next("sendMessage", delay=3, apply=True, chat_id=PRIVATE)
    h = await harness(chats=[{"id": PRIVATE, "follow": ["t1"]}])
    [draft] = await h.shows(PRIVATE, "Reproduce")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows(PRIVATE, "Fix", timeout=8)
    assert now.message_id == draft.message_id
    assert len(api.calls_for(PRIVATE, "sendMessage")) == 1  # found by probing, never sent again


async def test_writes_after_a_run_ended_show_paused_in_every_chat_the_same_way(api: BotAPIEmulator, harness) -> None:
    h = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.command(OTHER, "/follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.store.update_activity(OWNER, tool="Running the test suite", answer="Done for now.")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.shows(PRIVATE, "Running the test suite")
    await h.shows(OTHER, "Running the test suite")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    for chat in (PRIVATE, OTHER):
        await h.shows(chat, "Done for now.")
    # The agent writes on after its run ended: that is what it says now.
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"), ("Ship", "pending"))
    await h.put(("Reproduce", "completed"), ("Fix", "completed"), ("Ship", "pending"))
    late = [(await h.shows(chat, "Ship", "2/3", count=2))[-1] for chat in (PRIVATE, OTHER)]
    # A chat that follows afterwards shows the same.
    await h.command(GROUP, "/follow t1")
    [third] = await h.shows(GROUP, "Ship", "2/3")
    texts = {m.text for m in [*late, third]}
    assert len(texts) == 1, texts
    [text] = texts
    assert "⏸" in text  # the unfinished step is paused: no run is active
    assert "Running the test suite" not in text  # the finished run's tool lines are not shown
    assert all(errors(api, chat) == [] for chat in (PRIVATE, OTHER, GROUP))


# --- freshness at the bot-wide limit ----------------------------------------------------------


def _shown_rev(call: Any) -> str:
    return str(call.params.get("text", ""))


async def test_a_newer_card_written_while_calls_wait_for_the_bot_slot_is_all_that_is_sent(
    api: BotAPIEmulator, harness
) -> None:
    chats = [PRIVATE + n for n in range(5)]
    h = await harness(allowedChats=chats)
    # The bot-wide budget binds: one call per 10 s of Telegram's time across all chats.
    h.options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0, pace=Pace(bot_rate=0.1))
    await h.stop()
    await h.start()
    for chat in chats:
        await h.command(chat, "/follow t1")
    start = len(api.calls)
    await h.put(("Version one", "in_progress"))
    await api.wait_for(lambda: any("Version one" in _shown_rev(c) for c in api.calls[start:] if c.ok), 5)
    await h.put(("Version two", "in_progress"))  # while the other chats wait for the bot slot
    for chat in chats:
        await h.shows(chat, "Version two", timeout=10)
    sent = [c for c in api.calls[start:] if c.method in ("sendMessage", "editMessageText") and c.chat_id in chats]
    ones = [c.chat_id for c in sent if "Version one" in _shown_rev(c)]
    assert len(ones) == 1, ones  # only the call that had its slot before the newer card


async def test_under_a_scaled_down_bot_budget_state_changes_go_first_and_no_chat_starves(
    api: BotAPIEmulator, harness
) -> None:
    chats = [PRIVATE + n for n in range(6)]
    owners = {chat: Owner("main", f"s{chat}") for chat in chats}
    h = await harness(allowedChats=chats)
    h.options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0, pace=Pace(bot_rate=1.0))
    await h.stop()
    await h.start()
    for chat, owner in owners.items():
        await h.command(chat, f"/follow {owner.session_key}")
        await h.put(("Build", "in_progress"), ("Ship", "pending"), owner=owner)
    for chat in chats:
        await h.shows(chat, "Build", timeout=10)
    # Every change is made while the adapter is down, so that at its start all six chats
    # want a call at once and queue for the bot-wide slot (one per 5 s of Telegram's time).
    await h.stop()
    h.options = AdapterOptions(consumer="test", read_timeout=1.0, settle=1.0, pace=Pace(bot_rate=0.2))
    start = len(api.calls)
    tools, states = chats[:3], chats[3:]
    for chat in tools:  # looked at first (they wait longest), but only their tool lines change
        await h.store.update_activity(owners[chat], tool="Compiling module 7")
    for chat in states:  # a step changes state
        await h.put(("Build", "completed"), ("Ship", "in_progress"), owner=owners[chat])
    await h.start()
    for chat in tools:
        await h.shows(chat, "Compiling module 7", timeout=15)
    for chat in states:
        await h.shows(chat, "1/2", timeout=15)
    edits = [c.chat_id for c in api.calls[start:] if c.method == "editMessageText" and c.ok]
    assert sorted(edits) == sorted(chats)  # every chat served once: none starved, none twice
    # State changes first; at most one tool-line edit took the slot that was free at once.
    first_state = min(edits.index(chat) for chat in states)
    last_state = max(edits.index(chat) for chat in states)
    assert sum(edits.index(chat) < last_state for chat in tools) <= 1, edits
    assert first_state <= 1, edits


async def test_following_a_finished_session_is_remembered_before_the_chat_is_looked_at(
    api: BotAPIEmulator, harness
) -> None:
    # The session's run ended before the chat followed: its answer is not announced —
    # also when the lane looks at the draft before the follow command is done (the
    # adapter reads the run's events late, as it does on a slower Redis), and when the
    # adapter restarts before the chat's lane looked at the new follow (here the lane is
    # stuck sending the reply when the adapter stops).
    h = await harness()
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "completed"))
    await h.store.update_activity(OWNER, answer="An answer given before this chat followed.")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    api.timeout_next("sendMessage", delay=30, chat_id=PRIVATE)
    before = len(api.calls)
    api.send_user_message(PRIVATE, "/follow t1")
    await api.wait_for(lambda: any(c.method == "sendMessage" for c in api.calls[before:]), 5)
    await h.stop()
    await h.start()

    def shown() -> list[ShownMessage]:
        return [m for m in api.chat(PRIVATE).visible() if not m.text.startswith("Following")]

    # (a restart first settles the unsure reply, about 3 s, then catches up on its follows)
    await api.wait_for(lambda: any("Fix" in m.text for m in shown()), 15)
    await quiet(2.0)
    assert [m.text for m in shown() if "An answer given" in m.text] == []
    assert len(shown()) == 1
