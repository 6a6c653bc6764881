"""The Matrix adapter's commands against a real Synapse homeserver: `!pc` messages read
from `/sync` (threads, power levels, a restart in between), invites, encrypted rooms,
and one reader per bot account behind its lease."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from matrix_room import CLIENT, Harness, HomeserverProxy, Person, following, room_harness, until
from progresscast.channels.worker import WorkerOptions
from progresscast.matrix.adapter import MatrixOptions
from synapse_server import Synapse


@pytest.fixture
async def harness(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Harness]:
    async with room_harness(synapse, tmp_path / "home") as made:
        yield made


async def test_a_follow_typed_in_a_thread_shows_the_draft_in_that_thread(harness: Harness) -> None:
    room = await harness.room(["shop*"])
    await harness.start()
    await harness.invite(room)
    root = await harness.person.say(room, "Shop release")
    thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": root}}
    await harness.person.say(room, "!pc follow shop", **thread)
    await harness.put(("Pick the items", "in_progress"))
    draft = (await harness.shows(room, "Pick the items"))[0]
    assert draft["content"]["m.relates_to"]["rel_type"] == "m.thread"
    assert draft["content"]["m.relates_to"]["event_id"] == root

    async def replied() -> list[dict[str, Any]]:
        return [
            e for e in await harness.person.events(room)
            if e["sender"] == harness.bot.user_id and "Following" in e["content"].get("body", "")
        ]

    replies = await until(replied, "the reply to the follow")
    assert replies[0]["content"]["m.relates_to"]["event_id"] == root  # answered in the thread


async def test_a_misspelt_command_names_the_nearest_one(harness: Harness) -> None:
    room = await following(harness)
    said = await harness.command(room, "!pc folow shop", "Unknown command")
    assert said == (
        "Unknown command !pc folow — did you mean !pc follow?\n"
        "!pc follow SESSION [AGENT] — show this session's progress card in this room"
    )


async def test_commands_typed_while_the_adapter_is_down_run_once_after_it_restarts(harness: Harness) -> None:
    room = await following(harness)
    await harness.stop()
    await harness.person.say(room, "!pc mode partial")
    await harness.start()
    await harness.command(room, "!pc help", "mode partial")
    events = await harness.person.events(room)
    bodies = [e["content"].get("body", "") for e in events if e["sender"] == harness.bot.user_id]
    assert sum("Following" in b for b in bodies) == 1  # the follow before the restart is not run again
    assert sum("Mode for this room: partial" in b for b in bodies) == 1  # the one typed meanwhile, once


async def test_only_moderators_change_what_a_room_follows(harness: Harness) -> None:
    room = await following(harness)
    guest = Person(harness.synapse, harness.synapse.register("guest", admin=True, exempt=True))
    try:
        await harness.person.invite(room, guest.account.user_id)
        await guest.call("POST", f"{CLIENT}/rooms/{quote(room)}/join", {})
        await guest.say(room, "!pc unfollow")
        await harness.command(room, "!pc help", "Here: following agent:main:shop")
        said = [e["content"].get("body", "") for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id]
        # The shared handler's refusal (power level 50 is what the room's administrators have).
        assert any(b.startswith("Only the room's administrators can change what it follows") for b in said)
    finally:
        await guest.close()


async def test_an_encrypted_room_is_told_once_and_left(harness: Harness) -> None:
    encryption = {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
    room = await harness.person.create_room(initial_state=[encryption])
    harness.rooms.append({"id": room, "sessions": ["shop*"]})
    await harness.start()
    await harness.person.invite(room, harness.bot.user_id)

    async def left() -> bool:
        return harness.bot.user_id not in await harness.person.members(room) and bool(
            [e for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id and e["type"] == "m.room.message"]
        )

    await until(left, "the bot to say why and leave")
    said = [e["content"]["body"] for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id and e["type"] == "m.room.message"]
    assert len(said) == 1 and "end-to-end encrypted" in said[0]


async def test_one_reader_per_account_and_a_standby_takes_over(harness: Harness) -> None:
    from progresscast.matrix.adapter import run_matrix
    from progresscast.store import keys

    room = await harness.room(["shop*"])
    harness.matrix = {"leaseSeconds": 1.0}
    settings = harness.settings()
    options = MatrixOptions(worker=WorkerOptions(group="matrix", consumer="test", settle=1.0), poll_ms=1000)
    lease = keys.mx_lease(harness.bot.user_id)
    first = asyncio.create_task(run_matrix(settings, harness.redis, options=options))
    await until(lambda: harness.redis.get(lease), "the first process to take the lease")
    second = asyncio.create_task(run_matrix(settings, harness.redis, options=options))
    try:
        await harness.invite(room)
        await harness.command(room, "!pc follow shop", "Following")
        await harness.put(("Pick the items", "in_progress"))
        draft = (await harness.shows(room, "Pick the items"))[0]
        await harness.command(room, "!pc help", "Here: following")
        said = [e["content"].get("body", "") for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id]
        assert sum("Following" in b for b in said) == 1  # one reader: one reply each
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
        drafts = await harness.shows(room, "▶️ Pay")
        # The standby goes on with the same draft: `!pc help` landed below it, so the
        # draft moves under it — the old one redacted, one draft shown.
        assert drafts[0]["event_id"] != draft["event_id"]
        assert not next(e for e in await harness.person.events(room) if e["event_id"] == draft["event_id"])["content"]
        await harness.command(room, "!pc card", "again below")
    finally:
        for task in (first, second):
            task.cancel()
        await asyncio.gather(first, second, return_exceptions=True)


async def test_a_failing_sync_is_retried_from_where_it_was(harness: Harness) -> None:
    proxy = HomeserverProxy(harness.synapse.url)
    await proxy.start()
    try:
        harness.matrix = {"homeserver": proxy.url}
        room = await following(harness)
        proxy.sync_down = True
        await until(lambda: asyncio.sleep(0, proxy.failed_syncs >= 2), "two failed syncs")
        await harness.person.say(room, "!pc mode block")
        proxy.sync_down = False
        await harness.command(room, "!pc help", "mode block")
        said = [e["content"].get("body", "") for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id]
        assert sum("Mode for this room: block" in b for b in said) == 1
    finally:
        await harness.stop()
        await proxy.stop()
