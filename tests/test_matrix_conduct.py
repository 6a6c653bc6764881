"""The Matrix draft kept at the bottom of its room, against a real Synapse homeserver
(tests/synapse_server.py, tests/matrix_room.py): someone else's message below the
draft moves the draft's next update under it — a new event first, then the old one
redacted — at most once per `repostInterval`; the bot's own messages (its pings) do
not count."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from matrix_room import CLIENT, SHOP, Harness, Person, following, room_harness, until
from progresscast.store import keys
from synapse_server import Synapse


@pytest.fixture
async def harness(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Harness]:
    async with room_harness(synapse, tmp_path / "home") as made:
        yield made


async def heard(harness: Harness, room: str, thread: str = "0") -> str | None:
    """What the bot noted of someone else's newest message in the room's thread."""
    raw = await harness.redis.get(keys.channel_heard(keys.MATRIX, room, thread))
    return raw.decode() if isinstance(raw, bytes) else raw


async def noted(harness: Harness, room: str, before: str | None) -> str:
    """Wait until the bot's /sync noted a message newer than `before`."""
    return str(await until(lambda: _changed(harness, room, before), "the bot to note the message"))


async def _changed(harness: Harness, room: str, before: str | None) -> str | None:
    now = await heard(harness, room)
    return now if now != before else None


async def second_person(harness: Harness, room: str) -> Person:
    """Someone else in the room besides the one who set it up."""
    other = Person(harness.synapse, harness.synapse.register("other", admin=True, exempt=True))
    await harness.person.invite(room, other.account.user_id)
    await other.call("POST", f"{CLIENT}/join/{quote(room)}", {})
    return other


def position(events: list[dict[str, Any]], event_id: str) -> int:
    return next(i for i, e in enumerate(events) if e["event_id"] == event_id)


def redaction_of(events: list[dict[str, Any]], event_id: str) -> int:
    return next(
        i for i, e in enumerate(events)
        if e["type"] == "m.room.redaction" and (e.get("redacts") or e["content"].get("redacts")) == event_id
    )


async def test_a_message_under_the_draft_then_a_write_reposts_it_below_new_first(harness: Harness) -> None:
    harness.matrix = {"streaming": {"repostInterval": 60}}
    room = await following(harness)
    other = await second_person(harness, room)
    try:
        await harness.put(("Pick the items", "in_progress"))
        [draft] = await harness.shows(room, "Pick the items")
        before = await heard(harness, room)
        said = await other.say(room, "how is it going?")
        mark = await noted(harness, room, before)
        await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
        [moved] = await harness.shows(room, "▶️ Pay")
        assert moved["event_id"] != draft["event_id"]
        events = await harness.person.events(room)
        # Under the person's message, sent before the old draft went.
        assert position(events, draft["event_id"]) < position(events, said) < position(events, moved["event_id"])
        assert position(events, moved["event_id"]) < redaction_of(events, draft["event_id"])
        assert not next(e for e in events if e["event_id"] == draft["event_id"])["content"]  # redacted

        # Someone writes again at once: within the interval the draft is edited in place.
        await other.say(room, "and now?")
        await noted(harness, room, mark)
        await harness.put(("Pick the items", "completed"), ("Pay", "completed"))
        [same] = await harness.shows(room, "✅ Pay")
        assert same["event_id"] == moved["event_id"]
    finally:
        await other.close()


async def test_the_bots_own_ping_does_not_count(harness: Harness) -> None:
    harness.matrix = {"streaming": {"repostInterval": 0}}
    room = await following(harness)
    await harness.store.start_run(SHOP, "r1")
    await harness.put(("Confirm access", "blocked"))
    [draft] = await harness.shows(room, "Confirm access")

    async def pinged() -> list[dict[str, Any]]:
        shown = await harness.person.shown(room, harness.bot.user_id)
        return [e for e in shown if e["shown"]["msgtype"] == "m.text"]

    await until(pinged, "the ping")
    before = await heard(harness, room)
    await asyncio.sleep(2)  # /sync has brought the ping to the bot by now
    assert await heard(harness, room) == before
    await harness.put(("Confirm access", "in_progress"))
    [same] = await harness.shows(room, "▶️ Confirm access")
    assert same["event_id"] == draft["event_id"]
    assert not [e for e in await harness.person.events(room) if e["type"] == "m.room.redaction"]
