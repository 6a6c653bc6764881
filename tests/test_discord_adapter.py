"""The Discord adapter end to end: its real HTTP client (httpx) against the Discord
emulator, a real Redis, interactions signed like Discord (Ed25519) POSTed to
the gateway's route.

Pacing runs on the shared time scale (`PROGRESSCAST_TIME_SCALE`, set below to 1/20):
the adapter's and the emulator's clocks both follow it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from typing import Any

import httpx
import pytest
from nacl.signing import SigningKey
from redis.asyncio import Redis

from progresscast.channels.worker import WorkerOptions
from progresscast.config.settings import Settings
from progresscast.discord.adapter import DiscordAdapter, DiscordOptions
from progresscast.discord.register import register
from progresscast.gateway.app import create_app
from progresscast.gateway.server import serve_app
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore
from progresscast.testing import DiscordAPIEmulator, DiscordMessage
from progresscast.timescale import ENV

C = "200000000000000001"
OTHER = "200000000000000002"
OWNER = Owner("main", "t1")
SCALE = 0.05
ARRIVAL_JITTER = 0.015
"""Seconds two calls may arrive closer at the emulator than they left the adapter."""


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(SCALE))


@pytest.fixture
async def discord():
    async with DiscordAPIEmulator(channels=[C, OTHER]) as emulator:
        yield emulator


class Harness:
    """One adapter (restartable) with its interactions route served on a free port."""

    def __init__(self, discord: DiscordAPIEmulator, redis: Redis, **config: Any) -> None:
        self.discord = discord
        self.redis = redis
        self.store = CardStore(redis)
        config.setdefault("channels", [{"id": C, "sessions": ["*"]}, {"id": OTHER, "sessions": ["t*"]}])
        self.settings = Settings.model_validate(
            {
                "agents": {"default": "main", "known": ["main", "research"]},
                "channels": {
                    "discord": {
                        "token": discord.token,
                        "applicationId": discord.application_id,
                        "publicKey": discord.public_key,
                        "apiBaseUrl": discord.base_url,
                        **config,
                    }
                },
            }
        )
        self.adapter: DiscordAdapter | None = None
        self.task: asyncio.Task[None] | None = None
        self.server: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self, *, timeout: float = 10.0) -> None:
        options = DiscordOptions(
            timeout=timeout, worker=WorkerOptions(group="discord", consumer="test", settle=1.0)
        )
        self.adapter = DiscordAdapter(self.settings, self.redis, options=options)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/discord/interactions"
        self.discord.interactions_url = self.url
        started = asyncio.Event()
        app = create_app(self.settings, self.redis, routes=self.adapter.routes())
        self.server = asyncio.create_task(serve_app(app, sock, started=started))
        self.task = asyncio.create_task(self.adapter.run())
        await asyncio.wait_for(started.wait(), 5)
        waiter = asyncio.create_task(self.adapter.started.wait())
        await asyncio.wait([waiter, self.task], timeout=5, return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            self.task.result()

    async def stop(self) -> None:
        for task in (self.task, self.server):
            if task is not None:
                task.cancel()
                try:
                    await asyncio.wait_for(asyncio.shield(task), 15)
                except asyncio.CancelledError:
                    pass

    async def command(self, text: str, channel: str = C, **kw: Any) -> str:
        response = await self.discord.slash_command(None, text, channel_id=channel, **kw)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        assert body["type"] == 4 and body["data"]["flags"] == 64  # ephemeral, at once
        assert body["data"]["allowed_mentions"] == {"parse": []}
        return str(self.discord_read(body["data"]["content"]))

    @staticmethod
    def discord_read(content: str) -> str:
        from progresscast.testing import read_markdown

        return read_markdown(content).text

    async def shows(self, *needles: str, channel: str = C, count: int = 1, timeout: float = 6.0) -> list[DiscordMessage]:
        """Wait until the channel shows exactly `count` bot messages, the last with every needle."""

        def ok() -> tuple[list[DiscordMessage]] | None:
            shown = self.discord.channel(channel).visible()
            if len(shown) == count and (count == 0 or all(n in shown[-1].read().text for n in needles)):
                return (shown,)
            return None

        try:
            return (await self.discord.wait_for(ok, timeout))[0]
        except TimeoutError:
            texts = [m.read().text for m in self.discord.channel(channel).visible()]
            raise AssertionError(f"channel {channel} shows {texts}") from None

    async def put(self, *steps: tuple[str, str], markdown: str | None = None, owner: Owner = OWNER) -> None:
        plan = [{"step": s, "status": st} for s, st in steps] or None
        await self.store.put(owner, CardInput.parse({"plan": plan, "markdown": markdown}))

    def creates(self, channel: str = C) -> list[Any]:
        return [c for c in self.discord.calls_for(channel, "create_message") if c.status == 200]


@pytest.fixture
async def harness(discord: DiscordAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**config: Any) -> Harness:
        h = Harness(discord, redis, **config)
        made.append(h)
        await register(h.settings.channels.discord, guild=discord.guild_id)  # type: ignore[arg-type]
        await h.start()
        return h

    yield make
    for h in made:
        await h.stop()


def refused(discord: DiscordAPIEmulator) -> list[tuple[str, int, int | None]]:
    """Calls Discord refused on its own (not injected): none, when the adapter paces right."""
    return [(c.route, c.status, c.code) for c in discord.calls if c.status >= 400 and not c.injected]


def message_calls(discord: DiscordAPIEmulator) -> list[Any]:
    return [c for c in discord.calls if c.route in ("create_message", "edit_message", "delete_message")]


async def test_follow_by_signed_interaction_shows_the_card(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    pong = await discord.ping()
    assert pong.status_code == 200 and pong.json() == {"type": 1}
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    assert await h.command("follow t1") == "Following agent:main:t1."
    [draft] = await h.shows("1/2 complete", "Fix")
    assert draft.components_v2 and draft.accent == 0x5865F2
    assert await h.command("follow t1") == "This channel already follows agent:main:t1."
    help_text = await h.command("help")
    assert "/progresscast follow" in help_text and "following agent:main:t1" in help_text
    assert refused(discord) == []


async def test_a_misspelt_subcommand_names_the_nearest_one(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    # Discord sends only registered subcommands: a misspelt one arrives from a stale
    # registration (one made by another version of the app).
    [definition] = [d for scope in discord.commands.values() for d in scope if d["name"] == "progresscast"]
    definition["options"].append({"name": "folow", "type": 1, "description": "stale", "options": []})
    reply = await h.command("folow")
    assert reply.startswith("Unknown command /progresscast folow — did you mean /progresscast follow?\n")
    assert reply.count("\n") == 1


async def test_a_bad_signature_is_refused_with_nothing_done(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    other_key = SigningKey.generate()
    body = b'{"type": 1}'
    forged = {"X-Signature-Ed25519": other_key.sign(b"1" + body).signature.hex()}
    answers = [
        await discord.slash_command(None, "follow t1", channel_id=C, headers=forged),
        await discord.slash_command(None, "follow t1", channel_id=C, headers={"X-Signature-Timestamp": "12345"}),
        await discord.slash_command(None, "follow t1", channel_id=C, headers={"X-Signature-Ed25519": "zz"}),
    ]
    assert [a.status_code for a in answers] == [401, 401, 401]
    async with httpx.AsyncClient() as http:
        unsigned = await http.post(h.url, content=json.dumps({"type": 1}))
        huge = await http.post(h.url, content=b"x" * (65 * 1024), headers=discord.sign(b"x" * (65 * 1024)))
    assert (unsigned.status_code, huge.status_code) == (401, 413)
    assert await h.adapter.channel.state.follows.of(C) == []
    assert message_calls(discord) == []


async def test_settings_need_manage_channels_and_a_grant(discord: DiscordAPIEmulator, harness) -> None:
    # The shared handler's words (channels/chat/commands.py); a channel with no table is
    # a stranger that pairs (test_discord_access.py).
    h = await harness()
    await h.put(("Fix", "in_progress"))
    assert "Only the channel's administrators can change" in await h.command("follow t1", permissions=0)
    assert "follows no session" in await h.command("card", permissions=0)
    assert await h.command("follow secret-1", channel=OTHER) == "Sorry, this channel may not follow agent:main:secret-1."
    assert await h.adapter.channel.state.follows.of(C) == []
    assert message_calls(discord) == []


@pytest.mark.alone  # each call's arrival judged within 15 ms: another process's CPU stamps it late
async def test_a_burst_of_writes_is_coalesced_into_paced_edits_with_zero_429s(discord, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Step 0", "in_progress"))
    [draft] = await h.shows("Step 0")
    for i in range(1, 30):  # three writes an interval, for about ten intervals
        await h.put(*[(f"Step {k}", "completed") for k in range(i)], (f"Step {i}", "in_progress"))
        await asyncio.sleep(SCALE / 3)
    [last] = await h.shows("29/30 complete", "Step 29", timeout=10)
    assert last.id == draft.id and len(h.creates()) == 1
    edits = [c for c in discord.calls_for(C, "edit_message") if c.status == 200]
    assert 5 <= len(edits) < 20  # coalesced: the newest card at each slot
    interval = 1.0 * SCALE  # 5 message calls per channel per 5 s
    # Each call against the one two before it: a call that arrived late (a busy loop)
    # shortens the gap after it by what it lengthens the one before, never this span; a
    # call that ignored its pace shortens it by a whole interval.
    spans = [b.at - a.at for a, b in zip(edits, edits[2:], strict=False)]
    assert all(s >= 2 * interval - ARRIVAL_JITTER for s in spans), spans
    assert [c for c in discord.calls if c.status == 429] == []
    assert refused(discord) == []


async def test_an_injected_429_is_honoured_never_retried_early(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    discord.fail_next("edit_message", 429, retry_after=4.0 * SCALE, channel=C)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows("Fix", timeout=10)
    limited, after = discord.calls_for(C, "edit_message")[-2:]
    assert limited.status == 429 and after.status == 200 and now.id == draft.id
    assert after.at - limited.at >= 4 * SCALE * 0.9  # no call before retry_after
    assert len(h.creates()) == 1 and refused(discord) == []


async def test_a_global_429_holds_the_whole_bot(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    other = Owner("main", "t2")
    await h.command("follow t1")
    await h.command("follow t2", channel=OTHER)
    await h.put(("One", "in_progress"))
    await h.put(("Two", "in_progress"), owner=other)
    await h.shows("One")
    await h.shows("Two", channel=OTHER)
    discord.fail_next("edit_message", 429, retry_after=6.0 * SCALE, is_global=True, channel=C)
    await h.put(("One", "completed"), ("One b", "in_progress"))
    await discord.wait_for(lambda: any(c.status == 429 for c in discord.calls))
    limited = next(c for c in discord.calls if c.status == 429)
    await h.put(("Two", "completed"), ("Two b", "in_progress"), owner=other)
    await h.shows("One b")
    await h.shows("Two b", channel=OTHER)
    later = [c for c in message_calls(discord) if c.at > limited.at]
    assert later and min(c.at for c in later) - limited.at >= 6 * SCALE * 0.9  # neither channel early


async def test_clear_deletes_the_draft(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    await h.store.clear(OWNER)
    await h.shows(count=0)
    assert draft.id in discord.channel(C).deleted


async def test_run_end_posts_the_answer_once(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="The bug was an **off-by-one** for @everyone & <@123>.\n\n" + "word " * 500)
    [draft] = await h.shows("Fix")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    parts = await h.shows("word", count=3)  # 2,500 characters of words take two messages
    assert draft.id in discord.channel(C).deleted
    assert "off-by-one for @everyone & <@123>." in parts[0].read().text and "**off-by-one**" in parts[0].content
    assert all(not m.components_v2 and len(m.content) <= 2000 and m.read().mentions == [] for m in parts)
    creates = len(h.creates())
    await h.stop()
    await h.store.update_activity(OWNER, headline="idle")
    await h.start()
    await asyncio.sleep(40 * SCALE)
    assert len(h.creates()) == creates


async def test_restart_keeps_editing_the_same_message(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    await h.stop()
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.start()
    [now] = await h.shows("Fix")
    assert now.id == draft.id and len(h.creates()) == 1


async def test_refused_components_fall_back_to_plain_content(redis: Redis) -> None:
    async with DiscordAPIEmulator(channels=[C], components_v2=False) as discord:
        h = Harness(discord, redis)
        await register(h.settings.channels.discord, guild=discord.guild_id)  # type: ignore[arg-type]
        await h.start()
        try:
            await h.command("follow t1")
            await h.put(("Reproduce", "in_progress"))
            [draft] = await h.shows("Reproduce")
            assert not draft.components_v2 and "▶️ Reproduce" in draft.read().text
            assert [c.code for c in discord.calls_for(C, "create_message")] == [50035, None]
        finally:
            await h.stop()


async def test_agent_text_never_makes_a_call_that_could_ping(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    pings = "@everyone <@123> <@&456>"
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put((f"Tell {pings}", "in_progress"), markdown=f"cc {pings} @here")
    await h.store.update_activity(OWNER, headline=pings, tool=pings, answer=f"Done, {pings}")
    [draft] = await h.shows(f"Tell {pings}")
    assert f"cc {pings} @here" in draft.read().text
    await h.store.end_run(OWNER, "r1", RunState.completed)
    await h.shows(f"Done, {pings}")
    sent = [c for c in message_calls(discord) if c.route != "delete_message"]
    assert len(sent) >= 2
    for call in sent:
        assert call.body["allowed_mentions"] == {"parse": []}
        assert call.mentions == [] and call.pings == []


async def test_a_fifty_step_card_stays_within_the_limits(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness(streaming={"progress": {"maxLines": 50, "maxLineChars": 4096}})
    await h.command("follow t1")
    steps = [(f"Step {i}: " + "migrate the orders table *carefully* " * 12, "pending") for i in range(50)]
    steps[20] = (steps[20][0], "in_progress")
    await h.put(*steps, markdown="note " * 1500)
    [draft] = await h.shows("Step 20")
    assert draft.components_v2 and refused(discord) == []


async def test_an_unsure_create_is_looked_for_never_repeated(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.stop()
    await h.start(timeout=1.0)
    await h.command("follow t1")
    discord.timeout_next("create_message", delay=2.0, channel=C)
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows("Fix", timeout=10)
    assert now.id == draft.id and len(discord.calls_for(C, "create_message")) == 1
    assert discord.calls_for(C, "get_messages")


async def test_a_deleted_or_too_old_draft_is_replaced(discord: DiscordAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [first] = await h.shows("Reproduce")
    discord.delete_by_user(C, first.id)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [second] = await h.shows("Fix")
    assert second.id != first.id
    assert [c.code for c in discord.calls_for(C, "edit_message")][-1:] == [10008]
    discord.make_old(C, second.id)
    await h.put(("Reproduce", "completed"), ("Fix", "completed"), ("Ship", "in_progress"))
    [old, third] = await h.shows("Ship", count=2)
    assert old.id == second.id and third.id not in (first.id, second.id)
    assert [c.code for c in discord.calls_for(C, "edit_message")][-1:] == [30046]


async def test_a_channel_that_refuses_the_bot_is_left_alone(discord, harness, caplog) -> None:
    # Paused by the shared worker (channels/chat/pause.py); resumed in test_discord_access.py.
    h = await harness()
    await h.command("follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows("Step 0")
    discord.channel(C).can_send = False
    caplog.set_level(logging.WARNING, "progresscast.discord")
    for i in range(1, 8):
        await h.put(("Step 0", "completed"), (f"Step {i}", "in_progress"))
        await asyncio.sleep(2 * SCALE)
    await asyncio.sleep(10 * SCALE)
    assert [c.code for c in discord.calls_for(C, "edit_message")] == [50013]  # one refused call, then none
    assert sum("refuses the bot" in r.getMessage() for r in caplog.records) == 1


async def test_a_thread_is_a_destination_of_its_own(discord: DiscordAPIEmulator, harness) -> None:
    thread = "200000000000000003"
    discord.add_channel(thread, parent=C)
    h = await harness(channels=[{"id": C, "sessions": ["*"]}, {"id": thread, "sessions": ["*"]}])
    await h.put(("Fix", "in_progress"))
    assert await h.command("follow t1", channel=thread) == "Following agent:main:t1."
    [draft] = await h.shows("Fix", channel=thread)
    assert draft.channel_id == thread and discord.channel(C).visible() == []
    assert "following agent:main:t1" in await h.command("help", channel=thread)
    assert "following nothing" in await h.command("help")
