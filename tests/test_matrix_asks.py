"""Answering the agent from Matrix, against a real Synapse: an ask's numbered options, an
answer by reaction (`1️⃣`) or by reply (`2`, or text), the ask's event edited to the
outcome, Stop by two `⏹️` reactions on the live draft — and what must change nothing:
a member without power, a reply in another room naming this room's ask, a reaction on
a message that is no ask, a late reaction after expiry."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from matrix_room import CLIENT, SHOP, Harness, Person, room_harness, until
from progresscast.matrix.presses import is_stop, option_number, replied_to, without_fallback
from progresscast.model.asks import Ask, AskInput, AskState
from progresscast.model.view import RunState
from synapse_server import Synapse

PROMPT = "Run rm -rf build?"


@pytest.fixture
async def harness(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Harness]:
    async with room_harness(synapse, tmp_path / "home") as made:
        # The bot answers every press: Synapse's default limits would make these tests wait.
        path = f"/_synapse/admin/v1/users/{quote(made.bot.user_id)}/override_ratelimit"
        synapse.request(made.person.account, "POST", path, {"messages_per_second": 0, "burst_count": 0})
        # Nor need its own pace be a real homeserver's (an event a second): these tests
        # are about what a press does, and at that pace each waited seconds per message.
        made.matrix = {"callsPerSecond": 20, "roomInterval": 0.05}
        yield made


async def react(person: Person, room: str, event_id: str, key: str) -> str:
    path = f"{CLIENT}/rooms/{quote(room)}/send/m.reaction/r{secrets.token_hex(6)}"
    body = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": key}}
    return str((await person.call("PUT", path, body))["event_id"])


async def redact(person: Person, room: str, event_id: str) -> None:
    await person.call("PUT", f"{CLIENT}/rooms/{quote(room)}/redact/{quote(event_id)}/x{secrets.token_hex(6)}", {})


async def reply(person: Person, room: str, event_id: str, text: str) -> str:
    """A reply as clients send it: the quoted fallback first, then the text."""
    body = f"> <@bot:pc.test> {PROMPT}\n\n{text}"
    return await person.say(room, body, **{"m.relates_to": {"m.in_reply_to": {"event_id": event_id}}})


async def ask_event(h: Harness, room: str, prompt: str) -> dict[str, Any] | None:
    """The ask's own event as the room shows it (the draft names the prompt too)."""
    shown = await h.person.shown(room, h.bot.user_id)
    return next((e for e in shown if f"asks: {prompt}" in e["content"]["body"]), None)


async def open_ask(h: Harness, **body: Any) -> str:
    return (await h.store.asks.open(SHOP, AskInput.parse({"kind": "approval", "prompt": PROMPT, **body}))).ask_id


async def ended(h: Harness, ask_id: str) -> Ask:
    async def check() -> Ask | None:
        ask, _ = await h.store.asks.get(SHOP, ask_id)
        return ask if ask is not None and ask.state is not AskState.open else None

    found: Ask = await until(check, f"ask {ask_id} to end")
    return found


async def told(h: Harness, room: str, text: str, count: int = 1) -> None:
    """The bot said `text` (a notice to a presser) `count` times in the room."""

    async def check() -> bool:
        return sum(text in body for body in await h.said(room)) >= count

    await until(check, f"the bot to say {text!r}")


async def shows(h: Harness, room: str, prompt: str, needle: str) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        event = await ask_event(h, room, prompt)
        return event if event is not None and needle in event["shown"]["body"] else None

    found: dict[str, Any] = await until(check, f"the ask {prompt!r} to show {needle!r}")
    return found


async def two_rooms(h: Harness) -> tuple[str, str]:
    rooms = [await h.room(["shop*"]), await h.room(["shop*"])]
    await h.start()
    for room in rooms:
        await h.invite(room)
        await h.command(room, "!pc follow shop", "Following")
    return rooms[0], rooms[1]


async def test_an_ask_is_answered_by_a_reaction_and_by_replies(harness: Harness) -> None:
    h = harness
    room = (await two_rooms(h))[0]
    await h.put(("Build", "in_progress"))
    draft = (await h.shows(room, "Build"))[0]
    ask_id = await open_ask(h)
    event = await until(lambda: ask_event(h, room, PROMPT), "the ask's message")
    content = event["content"]
    assert content["msgtype"] == "m.text" and content["m.mentions"] == {}  # it notifies, and pings nobody
    assert content["body"].splitlines()[1:] == ["1. Allow", "2. Deny", "Answer with the number (reply or react), e.g. 1."]
    assert content["m.relates_to"]["m.in_reply_to"]["event_id"] == draft["event_id"]
    await h.shows(room, "❓ Waiting for you: Run rm -rf build?")

    await react(h.person, room, event["event_id"], "1️⃣")
    ask = await ended(h, ask_id)
    assert ask.answer is not None and ask.answer.options == ("Allow",)
    by = ask.answer.by
    assert (by.platform, by.destination, by.user) == ("matrix", room, h.person.account.user_id)
    await told(h, room, "Answered: Allow")
    done = await shows(h, room, PROMPT, "answered: Allow")
    assert "1. Allow" not in done["shown"]["body"] and done["edit"]["content"]["m.relates_to"]["rel_type"] == "m.replace"

    async def not_waiting() -> bool:
        return "Waiting for you" not in (await h.drafts(room))[0]["shown"]["body"]

    await until(not_waiting, "the draft without its waiting line")

    # A reply naming the number (its quoted fallback left out).
    second = await open_ask(h, prompt="Deploy now?")
    event = await until(lambda: ask_event(h, room, "Deploy now?"), "the second ask")
    await reply(h.person, room, event["event_id"], "2")
    ask = await ended(h, second)
    assert ask.answer is not None and ask.answer.options == ("Deny",)
    await shows(h, room, "Deploy now?", "🚫 Deploy now? — ")  # refused: not marked ✅

    # A text ask takes the reply's words.
    third = await open_ask(h, kind="text", prompt="Which branch?")
    event = await until(lambda: ask_event(h, room, "Which branch?"), "the text ask")
    assert "Reply to this message" in event["content"]["body"] and "1." not in event["content"]["body"]
    await reply(h.person, room, event["event_id"], "release-2.4")
    ask = await ended(h, third)
    assert ask.answer is not None and ask.answer.text == "release-2.4"
    await told(h, room, "Answered: release-2.4")


async def test_no_power_another_room_or_a_late_reaction_changes_nothing(harness: Harness) -> None:
    h = harness
    room, other = await two_rooms(h)
    await h.put(("Build", "in_progress"))
    other_draft = (await h.shows(other, "Build"))[0]
    ask_id = await open_ask(h)
    event = await until(lambda: ask_event(h, room, PROMPT), "the ask's message")
    await until(lambda: ask_event(h, other, PROMPT), "the ask in the other room")

    guest = Person(h.synapse, h.synapse.register("guest", admin=True, exempt=True))
    try:
        await h.person.invite(room, guest.account.user_id)
        await guest.call("POST", f"{CLIENT}/rooms/{quote(room)}/join", {})
        await react(guest, room, event["event_id"], "1️⃣")
        await told(h, room, "Only this room's administrators")
        await reply(guest, room, event["event_id"], "1")
        await told(h, room, "Only this room's administrators", count=2)
    finally:
        await guest.close()

    # From the other room: a reply naming this room's ask, a number on its draft, and
    # (if the homeserver takes it at all) a reaction naming this room's ask.
    await reply(h.person, other, event["event_id"], "1")
    await react(h.person, other, other_draft["event_id"], "1️⃣")
    path = f"{CLIENT}/rooms/{quote(other)}/send/m.reaction/f{secrets.token_hex(6)}"
    relation = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event["event_id"], "key": "2️⃣"}}
    await h.person.http.put(path, json=relation)
    await h.command(other, "!pc help", "Here: following")  # everything before it was read
    assert not any("Answered" in body for body in await h.said(other))
    ask, _ = await h.store.asks.get(SHOP, ask_id)
    assert ask is not None and ask.state is AskState.open

    # An ask that expires says so; a reaction that comes later is told.
    late = await open_ask(h, prompt="Ship it?", timeoutSeconds=3)
    shown = await until(lambda: ask_event(h, room, "Ship it?"), "the expiring ask")
    await shows(h, room, "Ship it?", "no answer in time")
    assert (await ended(h, late)).state is AskState.expired
    await react(h.person, room, shown["event_id"], "1️⃣")
    await told(h, room, "This question expired.")


async def test_two_stop_reactions_stop_the_run(harness: Harness) -> None:
    h = harness
    room = (await two_rooms(h))[0]
    await h.store.start_run(SHOP, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"))
    draft = (await h.shows(room, "Build", "React ⏹️ to stop"))[0]
    assert "<em>React ⏹️ to stop</em>" in draft["shown"]["formatted_body"]

    first = await react(h.person, room, draft["event_id"], "⏹️")
    await told(h, room, "React ⏹️ again within 10 s to stop shop")
    assert (await h.store.view(SHOP)).stop is None
    # The homeserver keeps one ⏹️ of a person on an event: the second is the first taken back and added again.
    await redact(h.person, room, first)
    await react(h.person, room, draft["event_id"], "⏹️")
    await told(h, room, "Stopping shop.")
    stop = (await h.store.view(SHOP)).stop
    assert stop is not None and stop.by.user == h.person.account.user_id and stop.by.platform == "matrix"
    drafts = await h.shows(room, f"Stopping — {stop.by.name}")
    assert "React ⏹️" not in drafts[0]["shown"]["body"]

    await h.store.end_run(SHOP, "run-1", RunState.canceled)
    await told(h, room, f"stopped by {stop.by.name}")


@pytest.mark.parametrize(
    ("key", "number"),
    [("1️⃣", 1), ("1⃣", 1), ("9️⃣", 9), ("🔟", 10), ("2", 2), ("10", 10), ("0", None), ("11", None), ("²", None),
     ("👍", None), ("⏹️", None)],
)
def test_a_reaction_key_names_an_option(key: str, number: int | None) -> None:
    assert option_number(key) == number


def test_stop_keys() -> None:
    assert is_stop("⏹️") and is_stop("⏹") and is_stop("🛑") and not is_stop("⏸️") and not is_stop("1️⃣")


def test_a_reply_is_read_without_its_fallback_and_only_when_it_is_one() -> None:
    assert without_fallback("> <@bot:pc.test> Run it?\n> 1. Allow\n\n2") == "2"
    assert without_fallback("2") == "2" and without_fallback("a\n> b") == "a\n> b"
    reply = {"m.in_reply_to": {"event_id": "$ask"}}
    assert replied_to({"m.relates_to": reply}) == "$ask"
    # In a thread, the reply a message carries is only the fallback unless it says otherwise.
    thread = {"rel_type": "m.thread", "event_id": "$root", **reply}
    assert replied_to({"m.relates_to": {**thread, "is_falling_back": True}}) is None
    assert replied_to({"m.relates_to": {**thread, "is_falling_back": False}}) == "$ask"
    assert replied_to({"m.relates_to": {"rel_type": "m.replace", "event_id": "$x"}, "m.new_content": {}}) is None
    assert replied_to({}) is None
