"""Access by grant in Matrix rooms, against a real Synapse (tests/synapse_server.py): a
stranger room pairs with the code the bot answers its invite with, approved and revoked
with the real `progresscast pairing` command line; only members with power level 50 change
what a room follows; a room that refuses the bot (it was kicked) is paused until it
invites it back. The commands are the shared handler's (`channels/chat/commands.py`)."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from urllib.parse import quote

import pytest

from matrix_room import CLIENT, Harness, Person, following, room_harness, until
from progresscast.channels.chat.access import CODE_ALPHABET
from progresscast.store import keys
from synapse_server import Synapse

CODE = re.compile(rf"Pairing code: ([{CODE_ALPHABET}]{{8}})\n")


@pytest.fixture
async def harness(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Harness]:
    async with room_harness(synapse, tmp_path / "home") as made:
        yield made


def pairing(h: Harness, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line: `progresscast pairing …` against the harness's Redis."""
    return subprocess.run(
        [sys.executable, "-m", "progresscast", "--redis", h.redis_url, "pairing", *args],
        capture_output=True, text=True, timeout=60,
    )


async def code_said(h: Harness, room: str, after: int = 0) -> str:
    """The pairing code the bot says in the room (among its messages after the first `after`)."""

    async def found() -> str | None:
        for body in (await h.said(room))[after:]:
            match = CODE.search(body + "\n")
            if match:
                return match.group(1)
        return None

    return str(await until(found, "a pairing code"))


async def test_a_stranger_room_pairs_with_the_code_its_invite_is_answered_with(harness: Harness) -> None:
    await harness.start()  # no room is granted; access is unset: pairing
    room = await harness.room(granted=False)
    await harness.invite(room)  # accepted: the room gets its code
    code = await code_said(harness, room)
    [greeting] = await harness.said(room)
    assert f"progresscast pairing approve matrix {code}" in greeting and "This room is not paired" in greeting
    await harness.person.say(room, "!pc follow shop")  # nothing until an operator approves it
    bad = pairing(harness, "approve", "matrix", "NOT-A-CODE")
    assert bad.returncode == 2 and "CODE: must be 8 characters" in bad.stderr
    approved = pairing(harness, "approve", "matrix", code, "--sessions", "shop*")
    assert approved.returncode == 0 and f"approved matrix chat {room}" in approved.stdout, approved.stderr
    reply = await harness.command(room, "!pc follow shop", "Following")
    assert reply == "Following agent:main:shop. Its progress card will show here when the agent writes one."
    assert await harness.said(room) == [greeting, reply]  # the follow typed before the approval ran nothing
    assert "may not follow agent:main:billing" in await harness.command(room, "!pc follow billing", "may not")
    await harness.put(("Pick the items", "in_progress"))
    await harness.shows(room, "Pick the items")
    listed = pairing(harness, "list", "matrix")
    assert f"matrix\tapproved\t{room}\tsessions shop*" in listed.stdout, listed


async def test_a_revoked_room_loses_its_drafts_and_its_first_command_gets_a_new_code(harness: Harness) -> None:
    await harness.start()
    room = await harness.room(granted=False)
    await harness.invite(room)
    first = await code_said(harness, room)
    assert pairing(harness, "approve", "matrix", first).returncode == 0
    await harness.command(room, "!pc follow shop", "Following")
    await harness.put(("Pick the items", "in_progress"))
    [draft] = await harness.shows(room, "Pick the items")
    bad = pairing(harness, "revoke", "matrix", "#shop:pc.test")
    assert bad.returncode == 2 and "a Matrix room id looks like" in bad.stderr
    revoked = pairing(harness, "revoke", "matrix", room)
    assert revoked.returncode == 0 and "agent:main:shop" in revoked.stdout, revoked.stderr

    async def redacted() -> bool:
        events = await harness.person.events(room)
        return any(e["event_id"] == draft["event_id"] and not e["content"] for e in events)

    await until(redacted, "the revoked room's draft to be redacted")
    # The bot is still in the room, which is a stranger again: its first command gets a code.
    before = len(await harness.said(room))
    await harness.person.say(room, "!pc follow shop")
    second = await code_said(harness, room, after=before)
    assert second != first


async def test_a_member_below_power_50_cannot_follow(harness: Harness) -> None:
    room = await harness.room(["shop*"])
    await harness.start()
    await harness.invite(room)
    # A server admin (for the rate limit exemption) has no power in a room of its own.
    guest = Person(harness.synapse, harness.synapse.register("guest", admin=True, exempt=True))
    try:
        await harness.person.invite(room, guest.account.user_id)
        await guest.call("POST", f"{CLIENT}/rooms/{quote(room)}/join", {})
        await guest.say(room, "!pc follow shop")
        refused = await harness.command(room, "!pc help", "Here: following nothing")
        said = await harness.said(room)
        assert any(b.startswith("Only the room's administrators can change what it follows") for b in said), said
        assert "Here: following nothing" in refused
        assert await harness.redis.smembers(keys.channel_follows(keys.MATRIX, room)) == set()
        # Raised to moderator (power 50): the same command now follows.
        levels = await harness.person.call("GET", f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/")
        levels["users"][guest.account.user_id] = 50
        await harness.person.call("PUT", f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/", levels)
        await guest.say(room, "!pc follow shop")
        await until(lambda: _follows(harness, room), "the moderator's follow")
    finally:
        await guest.close()


async def _follows(h: Harness, room: str) -> bool:
    return bool(await h.redis.smembers(keys.channel_follows(keys.MATRIX, room)))


async def test_a_room_that_kicked_the_bot_is_paused_until_it_invites_it_back(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"))
    [draft] = await harness.shows(room, "Pick the items")
    await harness.person.call("POST", f"{CLIENT}/rooms/{quote(room)}/kick", {"user_id": harness.bot.user_id})
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))

    async def paused() -> bool:
        return bool(await harness.redis.hexists(keys.channel_paused(keys.MATRIX), room))

    await until(paused, "the room that refused the bot (M_FORBIDDEN) to be paused")
    await harness.put(("Pick the items", "completed"), ("Pay", "completed"), ("Ship", "in_progress"))
    await harness.invite(room)  # back in: the room speaks again, its draft catches up
    drafts = await harness.shows(room, "▶️ Ship")
    assert drafts[0]["event_id"] == draft["event_id"]  # the same draft, edited
    assert not await paused()


async def test_a_room_where_the_bot_may_not_post_is_paused_until_someone_speaks(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"))
    [draft] = await harness.shows(room, "Pick the items")
    path = f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/"
    levels = await harness.person.call("GET", path)
    await harness.person.call("PUT", path, {**levels, "events_default": 50})  # the bot (power 0) may not post
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))

    async def paused() -> bool:
        return bool(await harness.redis.hexists(keys.channel_paused(keys.MATRIX), room))

    await until(paused, "the room that refused the bot's edit (M_FORBIDDEN) to be paused")
    await harness.put(("Pick the items", "completed"), ("Pay", "completed"), ("Ship", "in_progress"))
    await harness.person.call("PUT", path, levels)  # someone speaks in the room: calls go to it again
    drafts = await harness.shows(room, "▶️ Ship")  # long before the paused room's first probe (2 minutes)
    assert drafts[0]["event_id"] == draft["event_id"]
    assert not await paused()
