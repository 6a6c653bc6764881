"""Access on Discord, tried as a stranger would: a channel without a grant pairs (the
code answered ephemerally in the interaction), an operator approves it with
`progresscast pairing approve discord CODE` and revokes it; only members with Manage
Channels change what a channel follows; `allowlist` refuses once an hour; a channel
that refuses the bot (Missing Access, Unknown Channel) is paused until someone uses
the command there.

Real parts: the adapter's httpx client against the Discord emulator, interactions
signed like Discord POSTed to the gateway's route, a real Redis, the real
`progresscast` command line in a subprocess.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.channels.chat.commands import Invocation
from progresscast.discord.client import classify
from progresscast.discord.interactions import invocation
from progresscast.discord.register import register
from progresscast.discord.rest import DiscordHTTPError
from progresscast.store import keys
from progresscast.testing import DiscordAPIEmulator
from progresscast.timescale import ENV
from test_access import code_in, pairing, stranger_keys
from test_discord_adapter import OTHER, SCALE, C, Harness, message_calls

STRANGER = "200000000000000009"
VIEW_CHANNEL, SEND_MESSAGES = 1 << 10, 1 << 11
ADMINISTRATOR, MANAGE_CHANNELS = 1 << 3, 1 << 4
MEMBER = VIEW_CHANNEL | SEND_MESSAGES
"""A member who may read and write, nothing more."""
NOT_ADMIN = "Only the channel's administrators can change what it follows or how it looks"


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(SCALE))


@pytest.fixture
async def discord():
    async with DiscordAPIEmulator(channels=[C, OTHER, STRANGER]) as emulator:
        yield emulator


@pytest.fixture
async def harness(discord: DiscordAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**config: Any) -> Harness:
        h = Harness(discord, redis, **config)  # `access` unset: the default
        made.append(h)
        await register(h.settings.channels.discord, guild=discord.guild_id)  # type: ignore[arg-type]
        await h.start()
        return h

    yield make
    for h in made:
        await h.stop()


async def silent(discord: DiscordAPIEmulator, text: str, channel: str) -> None:
    """The command is answered with nothing (204: Discord shows the person only that
    the app did not respond)."""
    response = await discord.slash_command(None, text, channel_id=channel)
    assert (response.status_code, response.content) == (204, b""), response.text


async def quiet(seconds: float) -> None:
    """Let `seconds` of Discord's time pass: for checks that nothing more happens."""
    await asyncio.sleep(seconds * SCALE)


async def paused(redis: Redis) -> int:
    return int(await redis.hlen(keys.channel_paused(keys.DISCORD)))


async def test_a_strangers_channel_pairs_and_follows_once_approved(
    discord: DiscordAPIEmulator, harness, redis: Redis, redis_url: str
) -> None:
    h = await harness()
    first = await h.command("follow t1", channel=STRANGER)
    code = code_in(first)
    assert first.startswith("This channel is not paired with progresscast yet. Pairing code: ")
    assert f"progresscast pairing approve discord {code}" in first
    await silent(discord, "help", STRANGER)  # one code an hour; nothing else meanwhile
    assert await stranger_keys(redis) == sorted([keys.access_pending("discord"), keys.access_issued("discord")])
    assert message_calls(discord) == []  # the code went only to the person, in the interaction
    listed = pairing(redis_url, "list", "discord")
    assert listed.returncode == 0 and f"discord\tpending\t{code}\tchat {STRANGER}" in listed.stdout, listed.stderr
    approved = pairing(redis_url, "approve", "discord", code, "--sessions", "t*")
    assert approved.returncode == 0 and f"approved discord chat {STRANGER}" in approved.stdout, approved.stderr
    await h.put(("Reproduce", "in_progress"))
    assert await h.command("follow t1", channel=STRANGER) == "Following agent:main:t1."
    [draft] = await h.shows("Reproduce", channel=STRANGER)
    assert await h.command("follow t1", channel=STRANGER) == "This channel already follows agent:main:t1."
    assert await h.command("follow secret", channel=STRANGER) == "Sorry, this channel may not follow agent:main:secret."
    # Revoked: its follows end, the adapter deletes its drafts, and it is a stranger again.
    revoked = pairing(redis_url, "revoke", "discord", STRANGER)
    assert revoked.returncode == 0 and "agent:main:t1" in revoked.stdout, revoked.stderr
    await discord.wait_for(lambda: draft.id in discord.channel(STRANGER).deleted, 10)
    assert "Pairing code: " in await h.command("card", channel=STRANGER)
    bad = pairing(redis_url, "revoke", "discord", "general")
    assert bad.returncode == 2 and "CHAT: a Discord channel id is 15-21 digits" in bad.stderr


async def test_a_member_without_manage_channels_cannot_follow(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.put(("Fix", "in_progress"))
    for words in ("follow t1", "unfollow", "mode off", "rich off"):
        assert (await h.command(words, permissions=MEMBER)).startswith(NOT_ADMIN), words
    assert "follows no session" in await h.command("card", permissions=MEMBER)
    assert "Here: following nothing; mode progress" in await h.command("help", permissions=MEMBER)
    state = h.adapter.channel.state
    assert await state.follows.of(C) == [] and (await state.prefs.of(C)).mode is None
    assert message_calls(discord) == []
    assert await h.command("follow t1", permissions=MEMBER | MANAGE_CHANNELS) == "Following agent:main:t1."
    await h.shows("Fix")
    assert await h.command("unfollow", permissions=ADMINISTRATOR) == "Stopped following agent:main:t1."


async def test_allowlist_refuses_a_channel_not_listed_once_an_hour(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness(access="allowlist", allowedChannels=[OTHER], channels=[])
    assert await h.command("follow t1", channel=STRANGER) == (
        f"Sorry, this bot is not enabled for this channel. Ask its operator to add channel id {STRANGER} "
        "to channels.discord.allowedChannels."
    )
    await silent(discord, "follow t1", STRANGER)
    assert await h.command("follow t1", channel=OTHER) == (
        "Following agent:main:t1. Its progress card will show here when the agent writes one."
    )


async def test_a_channel_that_refuses_the_bot_is_paused_until_someone_uses_the_command(
    discord: DiscordAPIEmulator, harness, redis: Redis
) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows("Step 0")
    discord.channel(C).access = False  # the bot may no longer see the channel: 50001
    await h.put(("Step 0", "completed"), ("Step 1", "in_progress"))
    await discord.wait_for(lambda: [c.code for c in discord.calls_for(C)][-1:] == [50001])
    await discord.wait_for(lambda: paused(redis))
    async with httpx.AsyncClient() as http:
        page = (await http.get(h.url.replace("/discord/interactions", "/metrics"))).text
    assert 'progresscast_paused_destinations{channel="discord"} 1.0' in page
    calls = len(discord.calls_for(C))
    for i in range(2, 6):
        await h.put(*[(f"Step {k}", "completed") for k in range(i)], (f"Step {i}", "in_progress"))
        await quiet(2)
    assert len(discord.calls_for(C)) == calls  # paused: no call until it speaks (or a probe is due)
    discord.channel(C).access = True
    assert await h.command("card") == "Showing agent:main:t1 again below."
    assert await paused(redis) == 0  # it spoke: resumed at once (its probe was minutes of Discord's time away)
    await h.shows("Step 5", timeout=10)


async def test_a_deleted_channel_is_paused_not_called_again(discord: DiscordAPIEmulator, harness, redis) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows("Step 0")
    discord.delete_channel(C)
    for i in range(1, 5):
        await h.put(*[(f"Step {k}", "completed") for k in range(i)], (f"Step {i}", "in_progress"))
        await quiet(2)
    await discord.wait_for(lambda: paused(redis))
    await quiet(5)
    assert [c.code for c in discord.calls_for(C)][-1:] == [10003]
    assert sum(c.code == 10003 for c in discord.calls_for(C)) == 1


def test_refusals_for_good_are_forbidden_and_others_are_not() -> None:
    answers = {
        (403, 50001): "forbidden", (403, 50013): "forbidden", (404, 10003): "forbidden",
        (404, 10008): "gone", (400, 50035): "refused_content",
    }
    for (status, code), kind in answers.items():
        assert classify(DiscordHTTPError(status, code, "x")).kind == kind, code
    assert classify(DiscordHTTPError(403, 20001, "Bots cannot use this endpoint")).kind == "refused"


async def test_an_interaction_becomes_one_invocation_whatever_its_shape() -> None:
    def command(**payload: Any) -> dict[str, Any]:
        return {"type": 2, "data": {"name": "progresscast", **payload.pop("data", {})}, **payload}

    member = {"user": {"id": "400000000000000001"}, "permissions": str(MEMBER)}
    inv = invocation(command(channel_id=C, member=member, data={"options": [
        {"name": "follow", "type": 1, "options": [{"name": "session", "type": 3, "value": "t1"}]}
    ]}))
    assert isinstance(inv, Invocation)
    assert (inv.platform, inv.destination, inv.thread, inv.user, inv.word, inv.args, inv.group) == (
        "discord", C, "0", "400000000000000001", "follow", ("t1",), True
    )
    assert not await inv.may_change()
    manager = {**member, "permissions": str(MEMBER | MANAGE_CHANNELS)}
    managing = invocation(command(channel_id=C, member=manager))
    assert isinstance(managing, Invocation) and await managing.may_change() and managing.word == "help"
    dm = invocation(command(channel_id=C, user={"id": "400000000000000002"}))
    assert isinstance(dm, Invocation) and not dm.group and dm.user == "400000000000000002"
    odd = invocation(command(channel_id=C, member="x", data={"options": {"name": "follow"}}))
    assert isinstance(odd, Invocation) and odd.word == "help" and odd.user == ""
    assert invocation(command(channel="general")) == "the interaction names no channel"
    assert invocation(command(channel_id=C, data={"name": "other"})) == "this app only answers /progresscast"
