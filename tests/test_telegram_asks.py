"""Answering the agent from Telegram: an ask's inline keyboard, a press (`callback_query`
always answered), the message edited to the outcome, typed answers, Stop with its
confirmation — and the presses that must change nothing. Real python-telegram-bot against
the Bot API emulator, a real Redis."""
# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name

from __future__ import annotations

from typing import Any

import pytest
from redis.asyncio import Redis

from ask_cli import CLI_PROMPT, ask_and_press
from progresscast.model.asks import AskInput, AskState, option_control
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.testing import BotAPIEmulator, ShownMessage
from test_telegram_adapter import GROUP, GROUP_SENDER, OWNER, PRIVATE, Harness, api, harness, scaled  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

OTHER_CHAT = 5151


def ask_message(api: BotAPIEmulator, chat: int, prompt: str) -> ShownMessage | None:
    """The ask's own message (the draft names the prompt too: `Waiting for you: …`)."""
    return next((m for m in api.chat(chat).visible() if f"asks: {prompt}" in m.text), None)


async def answered(api: BotAPIEmulator, query_id: str) -> str | None:
    await api.wait_for(lambda: api.callback(query_id).answered, 5)
    return api.callback(query_id).text


async def followed(harness: Any, chat: int = PRIVATE) -> Harness:
    h: Harness = await harness()
    await h.command(chat, "/follow t1")
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    await h.shows(chat, "Build")
    return h


async def open_ask(h: Harness, **body: Any) -> str:
    made = await h.store.asks.open(OWNER, AskInput.parse({"kind": "approval", "prompt": "Run rm -rf build?", **body}))
    return made.ask_id


async def test_a_press_answers_the_ask_and_the_message_says_so(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h)
    msg = await api.wait_for(lambda: ask_message(api, PRIVATE, "Run rm -rf build?"), 5)
    buttons = [b["text"] for row in msg.reply_markup["inline_keyboard"] for b in row]
    assert buttons == ["Allow", "Deny"]
    assert msg.notified and msg.reply_to is not None  # a notifying reply to the live draft
    # The draft says at its top that the agent waits.
    await api.wait_for(lambda: "❓ Waiting for you: Run rm -rf build?" in h.drafts(PRIVATE)[0].text, 5)

    query = api.press(PRIVATE, msg.message_id, "Allow", first_name="Ana")
    assert await answered(api, query) == "Answered: Allow"
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.answered and ask.answer is not None
    assert ask.answer.options == ("Allow",) and ask.answer.by.name == "Ana" and ask.answer.by.platform == "telegram"

    def edited() -> ShownMessage | None:
        m = api.chat(PRIVATE).messages[msg.message_id]
        return m if "Ana answered: Allow" in m.text and not m.reply_markup else None

    await api.wait_for(edited, 5)
    # ... and the draft no longer waits.
    await api.wait_for(lambda: all("Waiting for you" not in m.text for m in api.chat(PRIVATE).visible()), 5)


async def test_two_people_press_at_once_one_wins(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness, GROUP)
    api.bot().set_admins(GROUP, GROUP_SENDER, 9001)
    await open_ask(h)
    msg = await api.wait_for(lambda: ask_message(api, GROUP, "Run rm -rf build?"), 5)
    first = api.press(GROUP, msg.message_id, "Allow", user_id=GROUP_SENDER, first_name="Ana")
    second = api.press(GROUP, msg.message_id, "Deny", user_id=9001, first_name="Ben")
    texts = sorted([str(await answered(api, first)), str(await answered(api, second))])
    assert texts == ["Already answered by Ana.", "Answered: Allow"]


async def test_a_bystander_in_a_group_changes_nothing(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness, GROUP)
    ask_id = await open_ask(h)
    msg = await api.wait_for(lambda: ask_message(api, GROUP, "Run rm -rf build?"), 5)
    query = api.press(GROUP, msg.message_id, "Allow", user_id=31337, first_name="Mallory")
    assert "administrators" in str(await answered(api, query))
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.open
    assert [b["text"] for row in api.chat(GROUP).messages[msg.message_id].reply_markup["inline_keyboard"]
            for b in row] == ["Allow", "Deny"]


async def test_a_listed_answerer_may_answer_in_a_group(api: BotAPIEmulator, harness: Any) -> None:
    h: Harness = await harness(chats=[{"id": GROUP, "answerers": [31337]}])
    await h.command(GROUP, "/follow t1")
    await h.put(("Build", "in_progress"))
    await h.shows(GROUP, "Build")
    await open_ask(h)
    msg = await api.wait_for(lambda: ask_message(api, GROUP, "Run rm -rf build?"), 5)
    query = api.press(GROUP, msg.message_id, "Deny", user_id=31337, first_name="Mallory")
    assert await answered(api, query) == "Answered: Deny"


async def test_a_forged_press_from_another_chat_changes_nothing(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    await h.command(OTHER_CHAT, "/follow t1")
    ask_id = await open_ask(h)
    mine = await api.wait_for(lambda: ask_message(api, PRIVATE, "Run rm -rf build?"), 5)
    theirs = await api.wait_for(lambda: ask_message(api, OTHER_CHAT, "Run rm -rf build?"), 5)
    # The other chat replays this chat's button data on its own message, and on a message
    # that is no ask at all: neither is the message the ask was sent there as.
    draft = await api.wait_for(lambda: next((m for m in api.chat(OTHER_CHAT).visible() if "Build" in m.text), None), 5)
    for target in (draft.message_id, theirs.message_id + 1000):
        if target not in api.chat(OTHER_CHAT).messages:
            continue
        query = api.press(OTHER_CHAT, target, option_control(ask_id, 0), forged=True)
        assert "does not belong" in str(await answered(api, query))
    # A control naming an ask this chat never got.
    query = api.press(OTHER_CHAT, theirs.message_id, option_control("x" * 22, 0), forged=True)
    assert "does not belong" in str(await answered(api, query))
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.open
    assert mine.reply_markup is not None


async def test_an_expired_ask_says_so_and_a_late_press_is_told(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, timeoutSeconds=1)
    msg = await api.wait_for(lambda: ask_message(api, PRIVATE, "Run rm -rf build?"), 5)
    data = option_control(ask_id, 0)

    def expired() -> ShownMessage | None:
        m = api.chat(PRIVATE).messages[msg.message_id]
        return m if "no answer in time" in m.text and not m.reply_markup else None

    await api.wait_for(expired, 8)
    query = api.press(PRIVATE, msg.message_id, data, forged=True)  # a press sent before the edit arrived
    assert await answered(api, query) == "This question expired."


async def test_a_typed_answer_is_a_reply_to_the_ask(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, kind="text", prompt="Which branch?")
    msg = await api.wait_for(lambda: ask_message(api, PRIVATE, "Which branch?"), 5)
    assert not msg.reply_markup and "Reply to this message" in msg.text
    api.send_user_message(PRIVATE, "release-2.4", reply_to=msg.message_id)
    await api.wait_for(lambda: any("Answered: release-2.4" in m.text for m in api.chat(PRIVATE).visible()), 5)
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.answer is not None and ask.answer.text == "release-2.4"
    # A reply to anything else is just chat.
    api.send_user_message(PRIVATE, "nice", reply_to=msg.message_id - 1)


async def test_stop_asks_to_confirm_then_stops_the_run(api: BotAPIEmulator, harness: Any) -> None:
    h: Harness = await harness()
    await h.command(PRIVATE, "/follow t1")
    await h.store.start_run(OWNER, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    draft = (await h.shows(PRIVATE, "Build"))[-1]
    assert [b["text"] for row in draft.reply_markup["inline_keyboard"] for b in row] == ["⏹ Stop"]

    first = api.press(PRIVATE, draft.message_id, "⏹ Stop", first_name="Ana")
    assert "again within 10 s" in str(await answered(api, first))
    assert (await h.store.view(OWNER)).stop is None

    def label() -> str:
        markup = api.chat(PRIVATE).messages[draft.message_id].reply_markup or {}
        return "".join(b["text"] for row in markup.get("inline_keyboard", []) for b in row)

    # The button asks for the second press for the window (10 s, on this test's time
    # scale), then reads Stop again.
    await api.wait_for(lambda: label() == "Press again to stop", 5)
    await api.wait_for(lambda: label() == "⏹ Stop", 5)
    again = api.press(PRIVATE, draft.message_id, "⏹ Stop", first_name="Ana")  # armed anew
    assert "again within 10 s" in str(await answered(api, again))
    await api.wait_for(lambda: label() == "Press again to stop", 5)
    second = api.press(PRIVATE, draft.message_id, "Press again to stop", first_name="Ana")
    assert await answered(api, second) == "Stopping t1."
    view = await h.store.view(OWNER)
    assert view.stop is not None and view.stop.by.name == "Ana"
    await h.shows(PRIVATE, "Stopping — Ana")
    assert not h.drafts(PRIVATE)[-1].reply_markup  # the button is gone

    await h.store.end_run(OWNER, "run-1", RunState.canceled)
    await api.wait_for(lambda: any("stopped by Ana" in m.text for m in api.chat(PRIVATE).visible()), 5)


async def test_the_cli_waits_for_the_press(api: BotAPIEmulator, harness: Any, redis_url: str) -> None:
    h = await followed(harness)

    async def press() -> None:
        msg = await api.wait_for(lambda: ask_message(api, PRIVATE, CLI_PROMPT), 10)
        await answered(api, api.press(PRIVATE, msg.message_id, "Later"))

    assert await ask_and_press(redis_url, press) == "Later\n"
    assert (await h.store.history(Owner("main", "t1")))[0].event["kind"] == "answer"  # type: ignore[index]


async def test_every_press_is_answered_even_when_it_changes_nothing(api: BotAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    draft = h.drafts(PRIVATE)[-1]
    query = api.press(PRIVATE, draft.message_id, "garbage-data", forged=True)
    assert "does not belong" in str(await answered(api, query))


async def test_the_emulator_refuses_callback_data_over_64_bytes(api: BotAPIEmulator, redis: Redis) -> None:
    import httpx

    async with httpx.AsyncClient() as client:
        reply = await client.post(f"{api.base_url}{api.token}/sendMessage", json={
            "chat_id": PRIVATE, "text": "x",
            "reply_markup": {"inline_keyboard": [[{"text": "a", "callback_data": "x" * 65}]]},
        })
    assert reply.status_code == 400 and "BUTTON_DATA_INVALID" in reply.text
