"""The Matrix adapter's drafts against a real Synapse homeserver (tests/synapse_server.py,
tests/matrix_room.py): a person creates a room, invites the bot and types `!pc follow
shop`; cards are written through the store (the one write path every input uses).
The bot account keeps Synapse's default rate limits.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pytest

from matrix_room import CLIENT, SHOP, Harness, HomeserverProxy, following, room_harness, until
from progresscast.model.owners import Owner
from synapse_server import Synapse


@pytest.fixture
async def harness(synapse: Synapse, tmp_path: Path) -> AsyncIterator[Harness]:
    async with room_harness(synapse, tmp_path / "home") as made:
        yield made


def test_synapse_registers_users(synapse: Synapse) -> None:
    bot = synapse.register("bot")
    assert synapse.request(bot, "GET", f"{CLIENT}/account/whoami")["user_id"] == bot.user_id



async def test_a_followed_card_is_one_draft_edited_to_the_newest_card(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"), ("Pay", "pending"))
    first = (await harness.shows(room, "▶️ Pick the items"))[0]
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
    drafts = await harness.shows(room, "✅ Pick the items", "▶️ Pay")
    assert drafts[0]["event_id"] == first["event_id"]  # edited in place, not sent again
    shown, edit = drafts[0]["shown"], drafts[0]["edit"]
    assert shown["msgtype"] == "m.notice" and shown["format"] == "org.matrix.custom.html"
    assert "<strong>Pay</strong>" in shown["formatted_body"]
    assert edit["content"]["m.relates_to"] == {"rel_type": "m.replace", "event_id": first["event_id"]}
    assert edit["content"]["m.mentions"] == {} and shown["m.mentions"] == {}


async def test_clear_redacts_and_a_restart_edits_the_same_draft(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"))
    first = (await harness.shows(room, "Pick the items"))[0]
    await harness.stop()
    await harness.put(("Pick the items", "completed"), ("Ship", "in_progress"))
    await harness.start()
    drafts = await harness.shows(room, "▶️ Ship")
    assert drafts[0]["event_id"] == first["event_id"]
    await harness.store.clear(SHOP)

    async def redacted() -> bool:
        events = await harness.person.events(room)
        draft = next(e for e in events if e["event_id"] == first["event_id"])
        return not draft["content"] and "redacted_because" in draft.get("unsigned", {})

    await until(redacted, "the draft to be redacted")
    assert await harness.drafts(room) == []


async def test_a_burst_under_the_default_rate_limit_ends_on_the_newest_card(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Faster than Synapse lets one user send (0.2 events a second after a burst of
    # 10): the homeserver's M_LIMIT_EXCEEDED paces the bot, and edits coalesce.
    harness.matrix = {"callsPerSecond": 20, "roomInterval": 0.05}
    room = await following(harness)
    caplog.set_level(logging.WARNING, logger="progresscast.matrix")
    for i in range(1, 31):
        await harness.put((f"Item {i}", "in_progress"))
        await asyncio.sleep(0.05)
    drafts = await harness.shows(room, "Item 30")
    assert len(drafts) == 1
    assert any("flood control" in r.getMessage() for r in caplog.records), "the homeserver never said M_LIMIT_EXCEEDED"
    edits = [e for e in await harness.person.events(room) if e["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"]
    assert len(edits) < 29  # coalesced: not one edit per write


async def test_agent_text_neither_pings_nor_injects(harness: Harness) -> None:
    room = await following(harness)
    person = harness.person
    # The bot may notify the room (power 50), and notices notify the person too.
    levels = await person.call("GET", f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/")
    levels["users"][harness.bot.user_id] = 50
    await person.call("PUT", f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/", levels)
    await person.call("PUT", f"{CLIENT}/pushrules/global/override/.m.rule.suppress_notices/enabled", {"enabled": False})
    me = person.account.user_id
    await harness.put(
        ("@room look now", "in_progress"), (f"<script>alert(1)</script> {me}", "pending"),
        markdown=f"@room **hey** {me} <script>steal()</script> <img src=x onerror=alert(1)>",
    )
    draft = (await harness.shows(room, "@room look now"))[0]
    await harness.put(("@room look again", "in_progress"), (f"<script>alert(2)</script> {me}", "pending"))
    draft = (await harness.shows(room, "@room look again"))[0]
    for content in (draft["content"], draft["shown"], draft["edit"]["content"]):
        assert content["m.mentions"] == {}
    html = draft["shown"]["formatted_body"]
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html

    # A message of the bot that does not say whom it mentions does ping @room: the
    # check below can see a ping.
    control = harness.synapse.request(
        harness.bot, "PUT", f"{CLIENT}/rooms/{quote(room)}/send/m.room.message/control1",
        {"msgtype": "m.text", "body": "@room control"},
    )["event_id"]

    async def highlights() -> list[str]:
        reply = await person.call("GET", f"{CLIENT}/notifications")
        return [
            n["event"]["event_id"] for n in reply["notifications"]
            if any(isinstance(a, dict) and a.get("set_tweak") == "highlight" and a.get("value", True) for a in n["actions"])
        ]

    pinged = await until(highlights, "the control message to ping the person")
    assert pinged == [control]


async def test_rooms_not_granted_or_not_following_get_nothing(harness: Harness) -> None:
    harness.matrix = {"access": "allowlist"}  # strangers are declined (under pairing they get a code)
    room = await following(harness, ["shop*"])
    quiet = await harness.room(["shop*"])  # granted, follows nothing
    stranger = await harness.room(granted=False)
    await harness.stop()
    await harness.start()  # with the new rooms in its settings
    await harness.invite(quiet)
    await harness.person.invite(stranger, harness.bot.user_id)
    reply = await harness.command(room, "!pc follow billing", "may not follow")
    assert "main:billing" in reply or "billing" in reply
    await harness.person.say(stranger, "!pc follow shop")
    await harness.put(("Pick the items", "in_progress"))
    await harness.put(("Pick", "in_progress"), owner=Owner("main", "billing"))
    await harness.shows(room, "Pick the items")

    async def declined() -> bool:
        state = await harness.person.call("GET", f"{CLIENT}/rooms/{quote(stranger)}/state/m.room.member/{quote(harness.bot.user_id)}")
        return state.get("membership") == "leave"

    await until(declined, "the bot to decline the invite to a room not granted")
    assert harness.bot.user_id not in await harness.person.members(stranger)
    assert await harness.drafts(quiet) == []
    said = [e for e in await harness.person.events(stranger) if e["sender"] == harness.bot.user_id]
    assert [e["type"] for e in said] == ["m.room.member"]  # declining the invite, nothing more
    assert len(await harness.drafts(room)) == 1  # billing is not granted here: no draft of it


async def test_an_unsure_send_is_repeated_with_its_transaction_id_and_lands_once(harness: Harness) -> None:
    proxy = HomeserverProxy(harness.synapse.url, drop_first_draft=True)
    await proxy.start()
    try:
        harness.matrix = {"homeserver": proxy.url}
        room = await following(harness)
        await harness.put(("Pick the items", "in_progress"))
        drafts = await harness.shows(room, "Pick the items")
        await until(lambda: asyncio.sleep(0, proxy.dropped), "the proxy to drop the first send")
        assert drafts[0]["event_id"] == proxy.dropped[0]
        await until(lambda: asyncio.sleep(0, len(set(proxy.sends)) == 1 and len(proxy.sends) > 2), "a repeat")
        assert len(set(proxy.sends)) == 1  # the same transaction every time, so the same event
        await harness.put(("Pick the items", "completed"))
        drafts = await harness.shows(room, "✅ Pick the items")  # one draft: the one that landed, edited
        assert drafts[0]["event_id"] == proxy.dropped[0]
        assert len(set(proxy.sends)) == 1, proxy.sends
    finally:
        await harness.stop()
        await proxy.stop()


async def test_run_end_redacts_the_draft_and_sends_the_answer_once(harness: Harness) -> None:
    from progresscast.model.view import RunState

    room = await following(harness)
    await harness.store.start_run(SHOP, "r1")
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
    await harness.store.update_activity(SHOP, answer="Paid with **card** — @room <script>x()</script>")
    draft = (await harness.shows(room, "Pay"))[0]
    await harness.put(("Pick the items", "completed"), ("Pay", "completed"))
    await harness.store.end_run(SHOP, "r1", RunState.completed)

    async def answered() -> list[dict[str, Any]]:
        shown = await harness.person.shown(room, harness.bot.user_id)
        return [e for e in shown if e["shown"]["msgtype"] == "m.text"]

    [answer] = await until(answered, "the final answer")
    content = answer["content"]
    assert content["m.mentions"] == {} and "<strong>card</strong>" in content["formatted_body"]
    assert "<script" not in content["formatted_body"]
    await until(lambda: _redacted(harness, room, draft["event_id"]), "the draft to be redacted at the run's end")
    await harness.command(room, "!pc help", "Here: following")  # later: still one answer
    assert len(await answered()) == 1


async def _redacted(harness: Harness, room: str, event_id: str) -> bool:
    events = await harness.person.events(room)
    return any(e["event_id"] == event_id and not e["content"] for e in events)



async def test_a_draft_a_person_redacted_is_replaced_by_a_new_one(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"))
    first = (await harness.shows(room, "Pick the items"))[0]
    await harness.person.call(
        "PUT", f"{CLIENT}/rooms/{quote(room)}/redact/{quote(first['event_id'])}/r1", {"reason": "noise"}
    )
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
    drafts = await harness.shows(room, "▶️ Pay")
    assert drafts[0]["event_id"] != first["event_id"]


async def test_a_blocked_step_pings_once_as_a_notifying_reply_to_the_silent_draft(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Check stock", "completed"), ("Confirm access", "in_progress"))
    draft = (await harness.shows(room, "▶️ Confirm access"))[0]
    assert draft["shown"]["msgtype"] == "m.notice"  # the draft itself notifies no one

    async def pings() -> list[dict[str, Any]]:
        shown = await harness.person.shown(room, harness.bot.user_id)
        return [e for e in shown if e["shown"]["msgtype"] == "m.text"]

    await harness.put(("Check stock", "completed"), ("Confirm access", "blocked"))
    [ping] = await until(pings, "the ping")
    content = ping["content"]
    assert "Needs you" in content["body"] and "Confirm access" in content["body"]
    assert content["m.mentions"] == {}  # it notifies the room's members, mentions nobody
    assert content["m.relates_to"]["m.in_reply_to"]["event_id"] == draft["event_id"]
    # The same card written again is no news; blocked → working → blocked is.
    await harness.put(("Check stock", "completed"), ("Confirm access", "blocked"), ("Ship", "pending"))
    await harness.shows(room, "Ship")
    assert len(await pings()) == 1
    await harness.put(("Check stock", "completed"), ("Confirm access", "in_progress"), ("Ship", "pending"))
    await harness.shows(room, "▶️ Confirm access")
    await harness.put(("Check stock", "completed"), ("Confirm access", "blocked"), ("Ship", "pending"))
    await until(lambda: _count(pings, 2), "the second ping")


async def _count(pings: Any, n: int) -> bool:
    return len(await pings()) == n
