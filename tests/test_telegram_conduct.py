"""Drafts that behave like a teammate, over the Bot API emulator (real HTTP, real
Redis, pacing on the shared time scale): pings that notify as replies to the silent
draft, the line that ends every run, no flash for quick runs, and the draft kept at
the bottom of the chat."""

# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name
from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

import pytest

from a2a_updates import status, steps, ts
from progresscast.agents.a2a.apply import Source, UpdateApplier
from progresscast.agents.a2a.mapping import parse_update
from progresscast.model.view import RunState
from progresscast.testing import BotAPIEmulator, ShownMessage
from test_telegram_adapter import OWNER, PRIVATE, SCALE, Harness, api, harness, quiet, scaled  # noqa: F401 (fixtures)

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def bot_messages(api: BotAPIEmulator, chat: int, h: Harness) -> list[ShownMessage]:
    """The bot's messages besides command replies, oldest first."""
    return [m for m in api.chat(chat).visible() if (chat, m.message_id) not in h.replies]


def replies_to(api: BotAPIEmulator, chat: int, message_id: int) -> list[ShownMessage]:
    return [m for m in api.chat(chat).visible() if m.reply_to == message_id]


async def following(harness, **telegram: object) -> Harness:  # type: ignore[no-untyped-def]
    h: Harness = await harness(**telegram)
    await h.command(PRIVATE, "/follow t1")
    return h


# --- pings ---------------------------------------------------------------------------------


@pytest.mark.backends  # the pinged state is stored with the draft
async def test_a_blocked_step_pings_once_as_a_reply_that_notifies_while_the_draft_stays_silent(
    api: BotAPIEmulator, harness
) -> None:
    h = await following(harness)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Confirm access", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Confirm access")
    assert not draft.notified  # drafts are sent silently
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"))
    [ping] = await api.wait_for(lambda: replies_to(api, PRIVATE, draft.message_id), 5)
    assert ping.notified
    assert ping.text == "⛔ Needs you — t1: Confirm access"
    assert bot_messages(api, PRIVATE, h) == [api.chat(PRIVATE).messages[draft.message_id], ping]
    assert "⛔" in api.chat(PRIVATE).messages[draft.message_id].text  # the draft showed it first
    # The same card again, and another write with the step still blocked: no new ping.
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"))
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"), markdown="waiting on you")
    await api.wait_for(lambda: "waiting on you" in api.chat(PRIVATE).messages[draft.message_id].text, 5)
    await quiet(3)
    assert len(bot_messages(api, PRIVATE, h)) == 2
    sends = [c for c in api.calls_for(PRIVATE, "sendMessage") if c.ok and "reply_parameters" in c.params]
    assert len(sends) == 1 and sends[0].params.get("disable_notification") is None


async def test_blocked_then_unblocked_then_blocked_pings_again(api: BotAPIEmulator, harness) -> None:
    h = await following(harness)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Confirm access", "blocked"))
    [draft] = await api.wait_for(lambda: [m for m in bot_messages(api, PRIVATE, h) if not m.notified], 5)
    await api.wait_for(lambda: len(replies_to(api, PRIVATE, draft.message_id)) == 1, 5)
    await h.put(("Confirm access", "in_progress"))
    await api.wait_for(lambda: "▶" in api.chat(PRIVATE).messages[draft.message_id].text, 5)
    await h.put(("Confirm access", "blocked"))
    await api.wait_for(lambda: len(replies_to(api, PRIVATE, draft.message_id)) == 2, 5)


async def test_a_failed_run_pings_with_the_line_that_ends_it(api: BotAPIEmulator, harness) -> None:
    h = await following(harness)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"), ("Ship", "pending"))
    [draft] = await api.wait_for(lambda: [m for m in bot_messages(api, PRIVATE, h) if not m.notified], 5)
    await api.wait_for(lambda: replies_to(api, PRIVATE, draft.message_id), 5)
    await h.store.update_activity(OWNER, answer="I could not get access.")
    await h.store.end_run(OWNER, "r1", RunState.failed)

    def ended() -> list[ShownMessage]:
        return [m for m in bot_messages(api, PRIVATE, h) if m.text.startswith("❌")]

    [end] = await api.wait_for(ended, 5)
    assert end.notified
    assert end.text == "❌ t1 · failed · ⛔ Confirm access\n\nI could not get access."
    assert draft.message_id in api.chat(PRIVATE).deleted


async def test_a_failed_run_in_partial_mode_pings_as_a_reply_to_the_preview(api: BotAPIEmulator, harness) -> None:
    h = await following(harness, chats=[{"id": PRIVATE, "mode": "partial"}])
    await h.store.start_run(OWNER, "r1")
    await h.store.update_activity(OWNER, answer="Working on it.")
    await h.put(("Fetch", "in_progress"))
    [preview] = await h.shows(PRIVATE, "Working on it.")
    await h.store.end_run(OWNER, "r1", RunState.failed)
    [ping] = await api.wait_for(lambda: replies_to(api, PRIVATE, preview.message_id), 5)
    assert ping.notified and ping.text.startswith("❌ t1 · failed")
    assert preview.message_id in api.chat(PRIVATE).messages  # the preview is the answer: it stays


async def test_notify_per_chat_turns_pings_off(api: BotAPIEmulator, harness) -> None:
    h = await following(harness, chats=[{"id": PRIVATE, "notify": []}])
    await h.store.start_run(OWNER, "r1")
    await h.put(("Confirm access", "blocked"))
    await h.shows(PRIVATE, "Confirm access")
    await quiet(3)
    assert len(bot_messages(api, PRIVATE, h)) == 1


async def test_an_a2a_task_waiting_for_input_pings(api: BotAPIEmulator, harness) -> None:
    h = await following(harness)
    applier = UpdateApplier(h.redis, agent_id="main", known_agents=frozenset({"main"}), default_agent="main")

    async def update(data: dict[str, Any]) -> None:
        parsed = parse_update(data)
        assert parsed is not None
        await applier.apply(parsed, Source.stream)

    await update(status("task-1", at=ts(1), plan=steps(2, 0), text="Reading", context="t1"))
    [draft] = await h.shows(PRIVATE, "Step 0")
    await update(status("task-1", "TASK_STATE_INPUT_REQUIRED", at=ts(2), text="Which branch?", context="t1"))
    [ping] = await api.wait_for(lambda: replies_to(api, PRIVATE, draft.message_id), 5)
    assert ping.text == "⛔ Needs you — t1: Waiting for input: Which branch?" and ping.notified
    await update(status("task-1", "TASK_STATE_AUTH_REQUIRED", at=ts(3), text="Log in", context="t1"))
    await api.wait_for(lambda: "Log in" in api.chat(PRIVATE).messages[draft.message_id].text, 5)
    await quiet(2)
    assert len(replies_to(api, PRIVATE, draft.message_id)) == 1  # still waiting on the person: no news


async def test_agent_text_in_a_ping_mentions_nobody(api: BotAPIEmulator, harness) -> None:
    h = await following(harness)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Ask @alice_admin for the key", "blocked"))
    [ping] = await api.wait_for(lambda: [m for m in bot_messages(api, PRIVATE, h) if m.notified], 5)
    assert "@alice_admin" not in ping.text and ping.text.replace("\u2060", "").endswith("Ask @alice_admin for the key")
    assert not any(e.type in ("mention", "text_mention") for e in ping.entities)



# --- how a run ended -------------------------------------------------------------------------


async def hook(redis_url: str, event: dict[str, Any]) -> None:
    """`progresscast hook claude-code` in its own process, as Claude Code runs it."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast", "hook", "claude-code", "--redis", redis_url,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate(json.dumps(event).encode())
    assert proc.returncode == 0 and not err, err


async def test_a_claude_code_stop_without_an_answer_keeps_one_line_of_how_the_run_ended(
    api: BotAPIEmulator, harness, redis_url: str
) -> None:
    h = await following(harness)
    base = {"session_id": "t1", "transcript_path": "/tmp/x.jsonl", "cwd": "/tmp"}
    await hook(redis_url, {**base, "hook_event_name": "UserPromptSubmit", "prompt": "fix it"})
    todos = [
        {"content": "Reproduce", "status": "completed", "activeForm": "Reproducing"},
        {"content": "Fix", "status": "in_progress", "activeForm": "Fixing"},
    ]
    await hook(redis_url, {**base, "hook_event_name": "PostToolUse", "tool_name": "TodoWrite",
                           "tool_input": {"todos": todos}, "tool_response": {}})
    [draft] = await h.shows(PRIVATE, "Fix")
    await hook(redis_url, {**base, "hook_event_name": "Stop"})

    def ended() -> list[ShownMessage]:
        return [m for m in bot_messages(api, PRIVATE, h) if m.text.startswith("✅")]

    [end] = await api.wait_for(ended, 5)
    assert end.text == "✅ t1 · 1/2 done" and end.notified
    assert draft.message_id in api.chat(PRIVATE).deleted and bot_messages(api, PRIVATE, h) == [end]


async def test_a_completed_run_heads_its_answer_with_the_end_line(api: BotAPIEmulator, harness) -> None:
    h = await following(harness)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Fix", "in_progress"))
    await h.shows(PRIVATE, "Fix")
    await h.put(("Fetch", "completed"), ("Fix", "completed"))
    await h.store.update_activity(OWNER, answer="The pager was off by **one**.")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [answer] = await h.shows(PRIVATE, "The pager was off by one.")
    assert answer.text == "✅ t1 · 2/2 done\n\nThe pager was off by one."
    assert any(e.type == "bold" for e in answer.entities) and answer.notified


async def test_a_kept_draft_keeps_a_blocked_step_blocked_and_the_end_line_is_sent(
    api: BotAPIEmulator, harness
) -> None:
    h = await following(harness, keepOnComplete=True)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fetch", "completed"), ("Confirm access", "blocked"), ("Ship", "pending"))
    [draft] = await api.wait_for(lambda: [m for m in bot_messages(api, PRIVATE, h) if not m.notified], 5)
    await api.wait_for(lambda: replies_to(api, PRIVATE, draft.message_id), 5)
    await h.store.end_run(OWNER, "r1", RunState.failed)
    [end] = await api.wait_for(lambda: [m for m in bot_messages(api, PRIVATE, h) if m.text.startswith("❌")], 5)
    assert end.text == "❌ t1 · failed · ⛔ Confirm access"
    kept = await api.wait_for(lambda: "⏸" in api.chat(PRIVATE).messages[draft.message_id].text and
                              api.chat(PRIVATE).messages[draft.message_id], 5)
    assert "⛔ Confirm access" in kept.text and "⏸️ Ship" in kept.text


# --- no flash --------------------------------------------------------------------------------


async def test_a_run_shorter_than_the_start_delay_shows_no_draft_but_its_answer(api: BotAPIEmulator, harness) -> None:
    # startDelay 40 s of Telegram's time: 2 s here.
    h = await following(harness, streaming={"startDelay": 40})
    await h.store.start_run(OWNER, "r1")
    await h.put(("Look it up", "in_progress"))
    await h.store.update_activity(OWNER, headline="Reading")
    await quiet(10)  # long enough for a draft (one pacing interval is 1 s), shorter than the delay
    await h.put(("Look it up", "completed"))
    await h.store.update_activity(OWNER, answer="It is 42.")
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [answer] = await h.shows(PRIVATE, "It is 42.")
    assert answer.text == "✅ t1 · 1/1 done\n\nIt is 42."
    await quiet(50)  # past the delay: still nothing more
    assert bot_messages(api, PRIVATE, h) == [answer]
    assert not api.chat(PRIVATE).deleted and not api.calls_for(PRIVATE, "deleteMessage")


async def test_a_longer_run_shows_its_first_draft_after_the_start_delay(api: BotAPIEmulator, harness) -> None:
    h = await following(harness, streaming={"startDelay": 20})  # 1 s here
    await h.store.start_run(OWNER, "r1")
    began = asyncio.get_running_loop().time()
    await h.put(("Build", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Build", timeout=10)
    assert asyncio.get_running_loop().time() - began >= 20 * SCALE - 0.05
    assert not draft.notified


# --- at the bottom ---------------------------------------------------------------------------


@pytest.mark.backends  # what it notes and reads spans slots of a Cluster
async def test_a_message_under_the_draft_then_a_write_reposts_it_below_new_first(
    api: BotAPIEmulator, harness
) -> None:
    h = await following(harness, streaming={"repostInterval": 100})  # 5 s here
    await h.store.start_run(OWNER, "r1")
    await h.put(("Build", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Build")
    person = api.send_user_message(PRIVATE, "how is it going?")["message"]["message_id"]
    await quiet(2)  # the update reached the adapter; nothing moves until the next write
    assert api.chat(PRIVATE).messages.get(draft.message_id) is not None
    await h.put(("Build", "completed"), ("Test", "in_progress"))
    [moved] = await h.shows(PRIVATE, "Test")
    assert moved.message_id > person > draft.message_id and not moved.notified
    assert draft.message_id in api.chat(PRIVATE).deleted
    calls = [(c.method, c.params.get("message_id")) for c in api.calls_for(PRIVATE) if c.ok][-2:]
    assert calls == [("sendMessage", None), ("deleteMessage", draft.message_id)]  # the new one first
    # Another message at once: within the interval the draft is edited where it is.
    api.send_user_message(PRIVATE, "and now?")
    await quiet(2)
    await h.put(("Build", "completed"), ("Test", "completed"))
    [same] = await h.shows(PRIVATE, "2/2 complete")
    assert same.message_id == moved.message_id


async def test_the_bots_own_ping_under_the_draft_does_not_move_it(api: BotAPIEmulator, harness) -> None:
    h = await following(harness, streaming={"repostInterval": 0})
    await h.store.start_run(OWNER, "r1")
    await h.put(("Confirm access", "blocked"))
    [draft] = await api.wait_for(lambda: [m for m in bot_messages(api, PRIVATE, h) if not m.notified], 5)
    await api.wait_for(lambda: replies_to(api, PRIVATE, draft.message_id), 5)
    await h.put(("Confirm access", "in_progress"))
    await api.wait_for(lambda: "▶" in api.chat(PRIVATE).messages[draft.message_id].text, 5)
    assert not api.chat(PRIVATE).deleted


async def test_stay_at_bottom_off_edits_in_place(api: BotAPIEmulator, harness) -> None:
    h = await following(harness, streaming={"stayAtBottom": False, "repostInterval": 0})
    await h.put(("Build", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Build")
    api.send_user_message(PRIVATE, "hello")
    await quiet(2)
    await h.put(("Build", "completed"))
    [same] = await h.shows(PRIVATE, "1/1 complete")
    assert same.message_id == draft.message_id
