"""The Bot API emulator, driven by real python-telegram-bot over loopback HTTP."""

from __future__ import annotations

import asyncio
import datetime as dtm
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import telegram
from telegram.error import (
    BadRequest,
    Conflict,
    EndPointNotFound,
    InvalidToken,
    NetworkError,
    RetryAfter,
    TimedOut,
)
from telegram.ext import Application, CommandHandler, ContextTypes
from telegram.request import HTTPXRequest

from progresscast.testing import BotAPIEmulator, Entity, Pace

PRIVATE = 1001
GROUP = -4001
SUPERGROUP = -1001234567890

NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are exactly "
    "the same as a current content and reply markup of the message"
)


def make_bot(api: BotAPIEmulator, token: str | None = None) -> telegram.Bot:
    def request() -> HTTPXRequest:
        return HTTPXRequest(connection_pool_size=8, read_timeout=3.0, connect_timeout=2.0)

    return telegram.Bot(token or api.token, base_url=api.base_url, request=request(), get_updates_request=request())


pytestmark = [
    # PTB 22 warns while it moves RetryAfter.retry_after from int to timedelta, and when
    # do_api_request calls a method it knows (editMessageText with rich_message is 10.1).
    pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:Please use 'Bot.editMessageText'"),
]


@pytest.fixture
async def api() -> AsyncIterator[BotAPIEmulator]:
    """Chats unpaced, so that tests of other behaviour may call in quick succession."""
    async with BotAPIEmulator(private_pace=None, group_pace=None) as emulator:
        yield emulator


@pytest.fixture
async def paced() -> AsyncIterator[BotAPIEmulator]:
    """Telegram's default pacing."""
    async with BotAPIEmulator() as emulator:
        yield emulator


@pytest.fixture
async def bot(api: BotAPIEmulator) -> AsyncIterator[telegram.Bot]:
    async with make_bot(api) as b:  # initialize() calls getMe
        yield b


@pytest.fixture
async def paced_bot(paced: BotAPIEmulator) -> AsyncIterator[telegram.Bot]:
    async with make_bot(paced) as b:
        yield b


def seconds(error: RetryAfter) -> float:
    value = error.retry_after
    return value.total_seconds() if isinstance(value, dtm.timedelta) else float(value)


def last(api: BotAPIEmulator, chat_id: int) -> Any:
    return api.calls_for(chat_id)[-1]


async def wait_for(condition: Any, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        await asyncio.sleep(0.01)


async def rich(bot: telegram.Bot, method: str, **kwargs: Any) -> Any:
    return await bot.do_api_request(method, api_kwargs=kwargs)


def checklist(*items: tuple[str, bool]) -> dict[str, Any]:
    return {
        "blocks": [
            {"type": "paragraph", "text": "Plan"},
            {
                "type": "list",
                "items": [
                    {"blocks": [{"type": "paragraph", "text": t}], "has_checkbox": True, "is_checked": done}
                    for t, done in items
                ],
            },
        ]
    }


# --- HTTP surface ----------------------------------------------------------------------------


async def test_initialize_calls_get_me(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    assert bot.username == "progresscast_test_bot"
    assert bot.id == 123456
    assert [c.method for c in api.calls] == ["getMe"]


async def test_wrong_token_is_401_unauthorized(api: BotAPIEmulator) -> None:
    other = make_bot(api, token="999:WRONG")
    with pytest.raises(InvalidToken):
        await other.initialize()
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{api.base_url}999:WRONG/getMe")
    assert answer.status_code == 401
    assert answer.json() == {"ok": False, "error_code": 401, "description": "Unauthorized"}


async def test_unknown_method_is_404_not_found(api: BotAPIEmulator) -> None:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{api.base_url}{api.token}/sendTeleport", data={"chat_id": "1"})
    assert answer.status_code == 404
    assert answer.json() == {"ok": False, "error_code": 404, "description": "Not Found"}


async def test_json_multipart_and_query_bodies_are_all_read(api: BotAPIEmulator) -> None:
    url = f"{api.base_url}{api.token}"
    async with httpx.AsyncClient() as client:
        by_json = await client.post(f"{url}/sendMessage", json={"chat_id": PRIVATE, "text": "json"})
        by_multipart = await client.post(
            f"{url}/sendMessage", files={"chat_id": (None, str(PRIVATE)), "text": (None, "multi")}
        )
        by_query = await client.get(f"{url}/sendmessage", params={"chat_id": PRIVATE, "text": "query"})
    for answer in (by_json, by_multipart, by_query):
        assert answer.status_code == 200 and answer.json()["ok"] is True
    assert api.chat(PRIVATE).texts() == ["json", "multi", "query"]
    assert by_query.json()["result"]["from"]["is_bot"] is True


async def test_a_request_cut_off_by_its_client_is_no_call(api: BotAPIEmulator) -> None:
    """A client killed mid-request: the emulator heard no whole call, so it records none
    (and it is no error of the emulator's, which would answer 500)."""
    head = (
        f"POST {api.base_url.removeprefix(api.url)}{api.token}/sendMessage HTTP/1.1\r\n"
        f"Host: x\r\nContent-Type: application/json\r\nContent-Length: 500\r\n\r\n"
    )
    host, port = api.url.removeprefix("http://").split(":")
    _, writer = await asyncio.open_connection(host, int(port))
    writer.write(head.encode() + b'{"chat_id": 1001, "te')
    await writer.drain()
    await wait_for(lambda: api.calls)  # the emulator has begun to read it
    writer.close()
    await wait_for(lambda: not api.calls)
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{api.base_url}{api.token}/sendMessage", json={"chat_id": PRIVATE, "text": "x"})
    assert answer.status_code == 200 and [c.status for c in api.calls] == [200]


# --- messages ----------------------------------------------------------------------------------


async def test_send_edit_delete_show_in_the_chat(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    first = await bot.send_message(PRIVATE, "<b>Plan</b>\n☐ step", parse_mode="HTML")
    assert first.text == "Plan\n☐ step"
    assert first.entities[0].type == "bold" and first.chat.type == "private"
    second = await bot.send_message(PRIVATE, "other")

    edited = await bot.edit_message_text("<b>Plan</b>\n☑ step", PRIVATE, first.message_id, parse_mode="HTML")
    assert isinstance(edited, telegram.Message)
    assert edited.text == "Plan\n☑ step" and edited.edit_date is not None
    shown = api.chat(PRIVATE).messages[first.message_id]
    assert (shown.text, shown.entities, shown.edits) == ("Plan\n☑ step", [Entity("bold", 0, 4)], 1)
    assert shown.source == "<b>Plan</b>\n☑ step" and shown.parse_mode == "HTML"

    assert await bot.delete_message(PRIVATE, second.message_id) is True
    assert [m.message_id for m in api.chat(PRIVATE).visible()] == [first.message_id]
    assert api.chat(PRIVATE).deleted[second.message_id].text == "other"
    assert [c.method for c in api.calls_for(PRIVATE)] == [
        "sendMessage", "sendMessage", "editMessageText", "deleteMessage",
    ]


async def test_identical_edit_is_not_modified(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    sent = await bot.send_message(PRIVATE, "<b>same</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="(?i)not modified"):
        # different markup, same result after parsing: still "not modified", as on Telegram
        await bot.edit_message_text("<strong>same</strong>", PRIVATE, sent.message_id, parse_mode="HTML")
    assert last(api, PRIVATE).description == NOT_MODIFIED
    assert last(api, PRIVATE).status == 400
    assert api.chat(PRIVATE).messages[sent.message_id].edits == 0


async def test_html_telegram_refuses_is_400_with_its_description(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    with pytest.raises(BadRequest, match="(?i)unsupported start tag"):
        await bot.send_message(PRIVATE, "<b>Plan</b> <br>next", parse_mode="HTML")
    assert last(api, PRIVATE).description == (
        "Bad Request: can't parse entities: Unsupported start tag \"br\" at byte offset 12"
    )
    assert api.chat(PRIVATE).visible() == []


async def test_empty_texts(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    for text, parse_mode, description in [
        ("", None, "Bad Request: message text is empty"),
        ("<b></b>", "HTML", "Bad Request: text must be non-empty"),
        (" \n ", None, "Bad Request: text must be non-empty"),
    ]:
        with pytest.raises(BadRequest):
            await bot.send_message(PRIVATE, text, parse_mode=parse_mode)
        assert last(api, PRIVATE).description == description
    assert api.chat(PRIVATE).visible() == []


async def test_4096_visible_characters_is_the_limit(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    # markup does not count, visible text does
    await bot.send_message(PRIVATE, "<b>" + "a" * 4096 + "</b>", parse_mode="HTML")
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(PRIVATE, "a" * 4097)
    assert last(api, PRIVATE).description == "Bad Request: message is too long"
    assert len(api.chat(PRIVATE).visible()) == 1


async def test_astral_emoji_count_twice(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    await bot.send_message(PRIVATE, "😀" * 2048)
    with pytest.raises(BadRequest, match="(?i)message is too long"):
        await bot.send_message(PRIVATE, "😀" * 2049)


async def test_missing_messages(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    sent = await bot.send_message(PRIVATE, "draft")
    with pytest.raises(BadRequest):
        await bot.edit_message_text("x", PRIVATE, 999)
    assert last(api, PRIVATE).description == "Bad Request: message to edit not found"
    with pytest.raises(BadRequest):
        await bot.delete_message(PRIVATE, 999)
    assert last(api, PRIVATE).description == "Bad Request: message to delete not found"

    api.delete_by_user(PRIVATE, sent.message_id)
    assert api.chat(PRIVATE).visible() == []
    with pytest.raises(BadRequest, match="(?i)message to edit not found"):
        await bot.edit_message_text("x", PRIVATE, sent.message_id)


# --- pacing ------------------------------------------------------------------------------------


async def test_private_chat_gets_a_burst_of_3_then_429(paced: BotAPIEmulator, paced_bot: telegram.Bot) -> None:
    api, bot = paced, paced_bot
    for n in range(3):
        await bot.send_message(PRIVATE, f"m{n}")
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(PRIVATE, "too fast")
    assert seconds(info.value) == 1
    refused = last(api, PRIVATE)
    assert (refused.status, refused.description) == (429, "Too Many Requests: retry after 1")
    assert refused.limit == "chat"
    assert api.chat(PRIVATE).texts() == ["m0", "m1", "m2"]
    await bot.send_message(PRIVATE + 1, "another chat is not slowed")

    await asyncio.sleep(seconds(info.value))
    await bot.send_message(PRIVATE, "after waiting")  # the refused call did not use up the token
    assert api.chat(PRIVATE).texts()[-1] == "after waiting"


async def test_429_envelope_carries_retry_after(api: BotAPIEmulator) -> None:
    api.fail_next("sendMessage", status=429, retry_after=7)
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{api.base_url}{api.token}/sendMessage", data={"chat_id": 1, "text": "x"})
    assert answer.status_code == 429
    assert answer.json() == {
        "ok": False,
        "error_code": 429,
        "description": "Too Many Requests: retry after 7",
        "parameters": {"retry_after": 7},
    }


async def test_group_gets_20_then_429(paced: BotAPIEmulator, paced_bot: telegram.Bot) -> None:
    api, bot = paced, paced_bot
    for n in range(20):
        await bot.send_message(GROUP, f"m{n}")
    with pytest.raises(RetryAfter) as info:
        await bot.send_message(GROUP, "21st")
    assert seconds(info.value) == 3  # 20 per minute: the next token in 3 s
    assert len(api.chat(GROUP).visible()) == 20


async def test_rejected_calls_give_their_token_back(paced: BotAPIEmulator, paced_bot: telegram.Bot) -> None:
    api, bot = paced, paced_bot
    for _ in range(5):
        with pytest.raises(BadRequest):
            await bot.send_message(PRIVATE, "<p>", parse_mode="HTML")
    for n in range(3):
        await bot.send_message(PRIVATE, f"m{n}")
    assert api.chat(PRIVATE).texts() == ["m0", "m1", "m2"]


async def test_pacing_is_configurable() -> None:
    async with BotAPIEmulator(private_pace=Pace(burst=10, per_second=1)) as api, make_bot(api) as bot:
        for n in range(10):
            await bot.send_message(PRIVATE, f"m{n}")
        with pytest.raises(RetryAfter):
            await bot.send_message(PRIVATE, "11th")
        assert len(api.chat(PRIVATE).visible()) == 10


async def test_the_whole_bot_is_paced_too() -> None:
    async with BotAPIEmulator(bot_pace=Pace(burst=4, per_second=1)) as api, make_bot(api) as bot:
        for chat in range(4):
            await bot.send_message(PRIVATE + chat, "x")
        with pytest.raises(RetryAfter):
            await bot.send_message(PRIVATE + 10, "fifth chat, fifth call")
        assert last(api, PRIVATE + 10).limit == "bot"


# --- fault injection ---------------------------------------------------------------------------


async def test_fail_next_500_then_recovers(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.fail_next("sendMessage", times=2)
    for _ in range(2):
        with pytest.raises(NetworkError) as info:
            await bot.send_message(PRIVATE, "x")
        assert not isinstance(info.value, BadRequest)
    assert api.chat(PRIVATE).visible() == []
    assert [(c.status, c.injected) for c in api.calls_for(PRIVATE)] == [(500, True), (500, True)]
    await bot.send_message(PRIVATE, "x")
    assert api.chat(PRIVATE).texts() == ["x"]


async def test_fail_next_can_target_one_chat_and_any_description(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.fail_next("editMessageText", status=400, description="Bad Request: message can't be edited", chat_id=GROUP)
    mine = await bot.send_message(PRIVATE, "a")
    theirs = await bot.send_message(GROUP, "a")
    await bot.edit_message_text("b", PRIVATE, mine.message_id)
    with pytest.raises(BadRequest, match="(?i)can't be edited"):
        await bot.edit_message_text("b", GROUP, theirs.message_id)
    assert api.chat(GROUP).texts() == ["a"]


async def test_fail_next_429(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.fail_next("editMessageText", status=429, retry_after=12)
    sent = await bot.send_message(PRIVATE, "a")
    with pytest.raises(RetryAfter) as info:
        await bot.edit_message_text("b", PRIVATE, sent.message_id)
    assert seconds(info.value) == 12


async def test_timeout_that_reached_the_server(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.timeout_next("sendMessage", delay=1.0)
    started = time.monotonic()
    with pytest.raises(TimedOut):
        await bot.send_message(PRIVATE, "arrived anyway", read_timeout=0.3)
    assert time.monotonic() - started < 0.9
    assert api.chat(PRIVATE).texts() == ["arrived anyway"]
    assert last(api, PRIVATE).timed_out and last(api, PRIVATE).applied


async def test_timeout_that_was_dropped(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.timeout_next("sendMessage", apply=False, delay=1.0)
    with pytest.raises(TimedOut):
        await bot.send_message(PRIVATE, "lost", read_timeout=0.3)
    assert api.chat(PRIVATE).visible() == []
    await bot.send_message(PRIVATE, "next one arrives")
    assert api.chat(PRIVATE).texts() == ["next one arrives"]


# --- rich messages -----------------------------------------------------------------------------


async def test_send_rich_message_with_checkbox_list(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    result = await rich(bot, "sendRichMessage", chat_id=PRIVATE, rich_message=checklist(("a", True), ("b", False)))
    items = result["rich_message"]["blocks"][1]["items"]
    assert [(i["has_checkbox"], i["is_checked"]) for i in items] == [(True, True), (True, False)]
    shown = api.chat(PRIVATE).messages[result["message_id"]]
    assert shown.is_rich and shown.text == "Plan\n☑ a\n☐ b"
    assert shown.rich == checklist(("a", True), ("b", False))


async def test_edit_to_rich_and_not_modified(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    sent = await bot.send_message(PRIVATE, "classic")
    card = checklist(("a", True))
    edited = await rich(bot, "editMessageText", chat_id=PRIVATE, message_id=sent.message_id, rich_message=card)
    assert edited["message_id"] == sent.message_id
    assert api.chat(PRIVATE).messages[sent.message_id].is_rich
    with pytest.raises(BadRequest, match="(?i)not modified"):
        await rich(bot, "editMessageText", chat_id=PRIVATE, message_id=sent.message_id, rich_message=card)


@pytest.mark.parametrize(
    ("rich_message", "description"),
    [
        ({}, "Bad Request: rich message must be non-empty"),
        ({"html": "<p>x</p>", "blocks": [{"type": "paragraph", "text": "x"}]},
         "Bad Request: exactly one of html, markdown or blocks must be specified"),
        ({"blocks": [{"type": "paragraph", "text": "x"}] * 501}, "Bad Request: too many blocks in the rich message"),
        ({"blocks": [{"type": "paragraph", "text": "x" * 32_769}]}, "Bad Request: message is too long"),
        ({"blocks": [{"type": "marquee", "text": "x"}]}, 'Bad Request: unsupported rich block type "marquee"'),
    ],
)
async def test_rich_message_limits(
    api: BotAPIEmulator, bot: telegram.Bot, rich_message: dict[str, Any], description: str
) -> None:
    with pytest.raises(BadRequest):
        await rich(bot, "sendRichMessage", chat_id=GROUP, rich_message=rich_message)
    assert last(api, GROUP).description == description


async def test_rich_limits_count_list_items_as_blocks(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    items = [(f"s{n}", False) for n in range(250)]  # 2 blocks + 250 items + 250 paragraphs = 502
    with pytest.raises(BadRequest, match="(?i)too many blocks"):
        await rich(bot, "sendRichMessage", chat_id=GROUP, rich_message=checklist(*items))
    await rich(bot, "sendRichMessage", chat_id=GROUP, rich_message=checklist(*items[:249]))


async def test_rich_unsupported(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.rich_supported = False
    with pytest.raises(EndPointNotFound):  # how do_api_request reports Telegram's 404
        await rich(bot, "sendRichMessage", chat_id=PRIVATE, rich_message=checklist(("a", True)))
    assert (last(api, PRIVATE).status, last(api, PRIVATE).description) == (404, "Not Found")

    sent = await bot.send_message(PRIVATE, "classic")
    with pytest.raises(BadRequest, match="(?i)message text is empty"):
        await rich(bot, "editMessageText", chat_id=PRIVATE, message_id=sent.message_id,
                   rich_message=checklist(("a", True)))
    assert api.chat(PRIVATE).texts() == ["classic"]


# --- updates -----------------------------------------------------------------------------------


async def test_get_updates_delivers_an_injected_follow(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    await bot.delete_webhook()
    poll = asyncio.create_task(bot.get_updates(timeout=5))
    await asyncio.sleep(0.2)  # the long poll is waiting
    started = time.monotonic()
    api.send_user_message(PRIVATE, "/follow ticket-4821 main")
    updates = await poll
    assert time.monotonic() - started < 1.0  # woken by the message, not by the timeout
    (update,) = updates
    message = update.message
    assert message is not None and message.from_user is not None
    assert message.text == "/follow ticket-4821 main"
    assert message.chat.id == PRIVATE and message.chat.type == "private"
    assert message.from_user.id == PRIVATE and not message.from_user.is_bot
    assert message.entities[0].type == "bot_command" and message.entities[0].length == len("/follow")
    assert message.parse_entities(["bot_command"]) == {message.entities[0]: "/follow"}

    # the offset confirms it: it is not delivered again
    assert await bot.get_updates(offset=update.update_id + 1, timeout=0) == ()


async def test_forum_topic_message_in_a_supergroup(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    api.send_user_message(SUPERGROUP, "/card@progresscast_test_bot", message_thread_id=77, user_id=5)
    (update,) = await bot.get_updates(timeout=1)
    message = update.message
    assert message is not None and message.from_user is not None
    assert message.chat.type == "supergroup" and message.chat.is_forum
    assert message.message_thread_id == 77 and message.is_topic_message
    assert message.from_user.id == 5
    assert message.entities[0].length == len("/card@progresscast_test_bot")
    sent = await bot.send_message(SUPERGROUP, "draft", message_thread_id=77)
    assert api.chat(SUPERGROUP).messages[sent.message_id].message_thread_id == 77


async def test_an_application_polls_and_answers_a_command(api: BotAPIEmulator) -> None:
    async def follow(update: telegram.Update, context: ContextTypes.DEFAULT_TYPE) -> None:
        assert update.effective_message is not None and context.args
        await update.effective_message.reply_text(f"Following {context.args[0]}")

    app = Application.builder().token(api.token).base_url(api.base_url).build()
    app.add_handler(CommandHandler("follow", follow))
    async with app:
        await app.start()
        assert app.updater is not None
        await app.updater.start_polling(timeout=1)
        api.send_user_message(PRIVATE, "/follow ticket-4821")
        await api.wait_for(lambda: api.chat(PRIVATE).texts() == ["Following ticket-4821"], timeout=5)
        await app.updater.stop()
        await app.stop()
    assert "deleteWebhook" in [c.method for c in api.calls]


async def test_long_poll_honours_its_timeout(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    started = time.monotonic()
    assert await bot.get_updates(timeout=1) == ()
    assert 0.9 <= time.monotonic() - started < 2.0


async def test_a_second_poller_ends_the_first_with_conflict(api: BotAPIEmulator) -> None:
    first, second = make_bot(api), make_bot(api)
    async with first, second:
        poll = asyncio.create_task(first.get_updates(timeout=5))
        await asyncio.sleep(0.2)
        later = asyncio.create_task(second.get_updates(timeout=1))
        with pytest.raises(Conflict, match="(?i)terminated by other getUpdates"):
            await poll
        await later


async def test_webhook_blocks_get_updates_until_deleted(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    await bot.set_webhook("http://127.0.0.1:9/telegram/hook")  # loopback: nothing leaves the machine
    with pytest.raises(Conflict, match="(?i)webhook is active"):
        await bot.get_updates(timeout=0)
    api.send_user_message(PRIVATE, "hi")
    await bot.delete_webhook(drop_pending_updates=True)
    assert await bot.get_updates(timeout=0) == ()


async def test_set_my_commands_is_accepted(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    assert await bot.set_my_commands([("follow", "Follow a session")]) is True
    assert api.telegram.commands == [{"command": "follow", "description": "Follow a session"}]


# --- test helpers ------------------------------------------------------------------------------


async def test_wait_for_wakes_on_a_call_and_times_out(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    async def later() -> None:
        await asyncio.sleep(0.2)
        await bot.send_message(PRIVATE, "done")

    task = asyncio.create_task(later())
    shown = await api.wait_for(lambda: api.chat(PRIVATE).texts(), timeout=3)
    assert shown == ["done"]
    await task
    with pytest.raises(TimeoutError):
        await api.wait_for(lambda: len(api.chat(PRIVATE).visible()) > 1, timeout=0.2)


async def test_calls_record_params_as_decoded(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    await rich(bot, "sendRichMessage", chat_id=PRIVATE, rich_message=checklist(("a", False)))
    call = last(api, PRIVATE)
    assert call.method == "sendRichMessage" and call.ok and call.applied
    assert call.params["chat_id"] == PRIVATE
    assert call.params["rich_message"] == checklist(("a", False))
    assert json.dumps(call.result)  # a plain JSON result


async def test_fault_for_a_misspelt_method_is_refused(api: BotAPIEmulator) -> None:
    with pytest.raises(ValueError, match="sendMesage"):
        api.fail_next("sendMesage")


async def test_restart_keeps_port_and_chats(api: BotAPIEmulator, bot: telegram.Bot) -> None:
    await bot.send_message(PRIVATE, "before")
    base_url = api.base_url
    await api.stop()
    with pytest.raises(NetworkError):  # Telegram unreachable
        await bot.send_message(PRIVATE, "while down", connect_timeout=0.5)
    await api.start()
    assert api.base_url == base_url
    await bot.send_message(PRIVATE, "after")
    assert api.chat(PRIVATE).texts() == ["before", "after"]


async def test_stop_does_not_wait_for_a_pending_long_poll() -> None:
    api = await BotAPIEmulator().start()
    bot = make_bot(api)
    await bot.initialize()
    poll = asyncio.create_task(bot.get_updates(timeout=30, read_timeout=35))
    await asyncio.sleep(0.2)
    started = time.monotonic()
    await api.stop()
    assert time.monotonic() - started < 3
    assert await poll == ()
    await bot.shutdown()
