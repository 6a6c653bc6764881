"""The Slack adapter end to end: real slack_sdk over HTTP against the Slack emulator,
a real Redis, slash commands signed like Slack POSTed to the gateway's routes.

Pacing runs on the shared time scale (`PROGRESSCAST_TIME_SCALE`, set by the tests
below to 1/20): the adapter's and the emulator's clocks both follow it.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import time
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.config.settings import Settings
from progresscast.gateway.app import create_app
from progresscast.gateway.server import serve_app
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.slack.adapter import SlackAdapter, SlackOptions
from progresscast.slack.channel import SlackPace
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.testing import SlackAPIEmulator, SlackMessage
from progresscast.testing.slackapi import PERSON_ID
from progresscast.timescale import ENV
from test_telegram_adapter import open_access

C = "C0TEST0001"
OTHER = "C0TEST0002"
OWNER = Owner("main", "t1")
SCALE = 0.05
ARRIVAL_JITTER = 0.015
"""Seconds two calls may arrive closer at the emulator than they left the adapter (the
way there is not equally long on a busy loop); a call that ignores its pacing arrives
within a few ms of the one before."""


@pytest.fixture(autouse=True)
def fast(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, str(SCALE))


@pytest.fixture
async def slack():
    async with SlackAPIEmulator(channels=[C, OTHER]) as emulator:
        yield emulator


class Harness:
    """One adapter (restartable) with its command routes served on a free port."""

    def __init__(self, slack: SlackAPIEmulator, redis: Redis, **config: Any) -> None:
        self.slack = slack
        self.redis = redis
        self.store = CardStore(redis)
        self.settings = Settings.model_validate(
            {
                "agents": {"default": "main", "known": ["main", "research"]},
                "channels": {
                    "slack": {
                        "token": slack.token,
                        "signingSecret": slack.signing_secret,
                        "apiBaseUrl": slack.base_url,
                        **open_access(config, "allowedChannels"),
                    }
                },
            }
        )
        self.adapter: SlackAdapter | None = None
        self.task: asyncio.Task[None] | None = None
        self.server: asyncio.Task[None] | None = None
        self.url = ""

    async def start(self, *, timeout: float = 10.0) -> None:
        from progresscast.channels.worker import WorkerOptions

        options = SlackOptions(
            pace=SlackPace(), timeout=timeout, worker=WorkerOptions(group="slack", consumer="test", settle=1.0)
        )
        self.adapter = SlackAdapter(self.settings, self.redis, options=options)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        sock.setblocking(False)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}"
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

    async def command(self, text: str, channel: str = C, **kw: Any) -> dict[str, Any]:
        response = await self.slack.send_slash_command(f"{self.url}/slack/commands", text, channel_id=channel, **kw)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        assert body["response_type"] == "ephemeral"
        return body

    async def shows(self, *needles: str, channel: str = C, count: int = 1, timeout: float = 6.0) -> list[SlackMessage]:
        """Wait until the channel shows exactly `count` app messages, the last with every needle."""

        def ok() -> tuple[list[SlackMessage]] | None:
            shown = self.slack.channel(channel).visible()
            if len(shown) == count and (count == 0 or all(n in shown[-1].visible_text for n in needles)):
                return (shown,)
            return None

        try:
            return (await self.slack.wait_for(ok, timeout))[0]
        except TimeoutError:
            texts = [m.visible_text for m in self.slack.channel(channel).visible()]
            raise AssertionError(f"channel {channel} shows {texts}") from None

    async def put(self, *steps: tuple[str, str], markdown: str | None = None, owner: Owner = OWNER) -> None:
        plan = [{"step": s, "status": st} for s, st in steps] or None
        await self.store.put(owner, CardInput.parse({"plan": plan, "markdown": markdown}))

    def posts(self, channel: str = C) -> list[Any]:
        return [c for c in self.slack.calls_for(channel, "chat.postMessage") if c.ok]


@pytest.fixture
async def harness(slack: SlackAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**config: Any) -> Harness:
        h = Harness(slack, redis, **config)
        made.append(h)
        await h.start()
        return h

    yield make
    for h in made:
        await h.stop()


def refused(slack: SlackAPIEmulator) -> list[tuple[str, str | None]]:
    """Calls Slack refused on its own (not injected): none, when the adapter paces right."""
    return [(c.method, c.error) for c in slack.calls if not c.ok and not c.injected]


@pytest.mark.backends
async def test_follow_by_signed_slash_command_shows_the_card(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.put(("Reproduce", "completed"), ("Fix <!channel>", "in_progress"))
    reply = await h.command("follow t1")
    assert reply["text"] == "Following agent:main:t1."
    [draft] = await h.shows("1/2 complete", "Fix <!channel>")
    assert draft.shown().mentions == [] and draft.blocks
    assert (await h.command("follow t1"))["text"] == "This channel already follows agent:main:t1."
    help_text = (await h.command("help"))["text"]
    assert "/progresscast follow" in help_text and "following agent:main:t1" in help_text
    assert refused(slack) == []


async def test_a_misspelt_command_names_the_nearest_one(harness) -> None:
    h = await harness()
    reply = (await h.command("folow t1"))["text"]
    assert reply.startswith("Unknown command /progresscast folow — did you mean /progresscast follow?\n")
    assert reply.count("\n") == 1 and "/progresscast follow SESSION [AGENT]" in reply
    assert await h.adapter.channel.state.follows.of(C) == []


async def test_wrong_or_stale_signature_is_refused_and_nothing_is_done(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    url = f"{h.url}/slack/commands"
    forged = await slack.send_slash_command(url, "follow t1", channel_id=C, secret="not-the-secret")
    stale = await slack.send_slash_command(url, "follow t1", channel_id=C, timestamp=int(time.time()) - 600)
    assert (forged.status_code, stale.status_code) == (401, 401)
    assert await h.adapter.channel.state.follows.of(C) == []
    events = await slack.send_event(f"{h.url}/slack/events", {"type": "url_verification", "challenge": "abc"})
    assert events.json() == {"challenge": "abc"}
    bad = await slack.send_event(f"{h.url}/slack/events", {"type": "url_verification", "challenge": "x"}, secret="no")
    assert bad.status_code == 401


async def test_a_burst_of_writes_is_coalesced_into_paced_updates_of_one_message(slack, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Step 0", "in_progress"))
    [draft] = await h.shows("Step 0")
    for i in range(1, 30):  # three writes an interval, for about ten intervals
        await h.put(*[(f"Step {k}", "completed") for k in range(i)], (f"Step {i}", "in_progress"))
        await asyncio.sleep(SCALE / 3)
    [last] = await h.shows("29/30 complete", "Step 29", timeout=10)
    assert last.ts == draft.ts and len(h.posts()) == 1
    updates = [c for c in slack.calls_for(C, "chat.update") if c.ok]
    assert 5 <= len(updates) < 20  # coalesced: the newest card at each slot
    # One call a second per channel, scaled: each update left the adapter an interval
    # after the one before. At the emulator a gap may come out shorter by the way there
    # (a few ms on a busy loop), never by most of an interval; the whole run keeps the rate.
    interval = 1.0 * SCALE
    gaps = [b.at - a.at for a, b in itertools.pairwise(updates)]
    assert all(g >= interval - ARRIVAL_JITTER for g in gaps), gaps
    assert updates[-1].at - updates[0].at >= (len(updates) - 1) * interval - ARRIVAL_JITTER
    assert refused(slack) == []


async def test_clear_deletes_the_empty_draft(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    await h.store.clear(OWNER)
    await h.shows(count=0)
    assert draft.ts in slack.channel(C).deleted


@pytest.mark.backends
async def test_run_end_posts_the_answer_once(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.store.start_run(OWNER, "r1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="The bug was an **off-by-one** in the pager & &lt;!here&gt;.")
    [draft] = await h.shows("Fix")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [answer] = await h.shows("off-by-one in the pager & <!here>.")
    assert draft.ts in slack.channel(C).deleted and answer.shown().mentions == []
    assert "*off-by-one*" in answer.blocks[0]["text"]["text"]
    posts = len(h.posts())
    await h.stop()
    await h.store.update_activity(OWNER, headline="idle")
    await h.start()
    await asyncio.sleep(40 * SCALE)
    assert len(h.posts()) == posts


@pytest.mark.backends
async def test_restart_keeps_editing_the_same_message(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    await h.stop()
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    await h.start()
    [now] = await h.shows("Fix")
    assert now.ts == draft.ts and len(h.posts()) == 1


async def test_ratelimited_is_honoured_with_zero_repeats(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    slack.fail_next("chat.update", "ratelimited", retry_after=4, channel=C)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows("Fix", timeout=10)
    limited, after = [c for c in slack.calls_for(C, "chat.update")][-2:]
    assert limited.error == "ratelimited" and after.ok and now.ts == draft.ts
    assert after.at - limited.at >= 4 * SCALE * 0.9  # no call before Retry-After
    assert len(h.posts()) == 1 and refused(slack) == []


async def test_a_deleted_or_uneditable_draft_is_replaced(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    await h.put(("Reproduce", "in_progress"))
    [first] = await h.shows("Reproduce")
    slack.delete_by_user(C, first.ts)
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [second] = await h.shows("Fix")
    assert second.ts != first.ts
    assert [c.error for c in slack.calls_for(C, "chat.update")][-1:] == ["message_not_found"]
    slack.make_uneditable(C, second.ts)
    await h.put(("Reproduce", "completed"), ("Fix", "completed"), ("Ship", "in_progress"))
    [old, third] = await h.shows("Ship", count=2)  # the uneditable one stays: it cannot be removed either
    assert old.ts == second.ts and third.ts not in (first.ts, second.ts)
    assert [c.error for c in slack.calls_for(C, "chat.update")][-1:] == ["cant_update_message"]


async def test_refused_blocks_fall_back_to_plain_text(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.command("follow t1")
    slack.fail_next("chat.postMessage", "invalid_blocks", channel=C)
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    assert draft.blocks == [] and "▶️ Reproduce" in draft.text
    # The same content is not tried again as blocks; new content is.
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows("Fix")
    assert now.ts == draft.ts and now.blocks


async def test_unsure_post_is_looked_for_never_repeated(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    await h.stop()
    await h.start(timeout=1.0)
    await h.command("follow t1")
    slack.timeout_next("chat.postMessage", delay=2.0, channel=C)
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows("Reproduce")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"))
    [now] = await h.shows("Fix", timeout=10)
    assert now.ts == draft.ts and len(h.posts()) == 1
    assert slack.calls_for(C, "conversations.history")


async def test_allowed_channels_and_config_follows(slack: SlackAPIEmulator, redis: Redis, harness) -> None:
    await CardStore(redis).put(OWNER, CardInput.parse({"plan": [{"step": "From config", "status": "in_progress"}]}))
    h = await harness(allowedChannels=[C], channels=[{"id": C, "follow": ["t1"]}])
    await h.shows("From config")
    reply = await h.command("follow t1", channel=OTHER)
    assert "not enabled for this channel" in reply["text"]
    assert await h.adapter.channel.state.follows.of(OTHER) == []


# --- the plan display -------------------------------------------------------------------


async def test_plan_display_streams_in_a_thread_of_its_own(slack: SlackAPIEmulator, harness) -> None:
    h = await harness(richMessages=True, notify=[])  # (the blocked step's ping is tested elsewhere)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Reproduce", "completed"), ("Fix", "in_progress"), ("Ship", "pending"))
    reply = await h.command("follow t1")
    assert reply["text"] == "Following agent:main:t1."
    [anchor, plan] = await h.shows("[in_progress] Fix", count=2)
    assert "Progress of agent:main:t1, in this thread." in anchor.visible_text
    assert plan.stream and plan.thread_ts == anchor.ts and plan.recipient_user_id == PERSON_ID
    assert plan.task_display_mode == "plan" and plan.streaming
    await h.put(("Reproduce", "completed"), ("Fix", "blocked"), ("Ship", "pending"))
    await h.shows("[error] Fix — Blocked", count=2)
    assert [c.ok for c in slack.calls_for(C, "chat.appendStream")] == [True]
    await h.store.update_activity(OWNER, answer="Shipped after all.")
    await h.put(("Reproduce", "completed"), ("Fix", "completed"), ("Ship", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    # progress mode: the plan goes, the answer is posted in the thread
    [_, answer] = await h.shows("Shipped after all.", count=2)
    assert answer.thread_ts == anchor.ts and plan.ts in slack.channel(C).deleted
    assert refused(slack) == []
    assert (await h.command("unfollow"))["text"] == "Stopped following agent:main:t1."
    assert await h.adapter.channel.state.recipient(C, anchor.ts) is None
    assert await h.adapter.channel.state.follows.of(C) == []


async def test_follows_in_a_burst_open_their_threads_through_the_channels_pace(slack, harness) -> None:
    # A draft in the channel being edited, then several follows at once with the plan
    # display on: every thread-opening post waits its turn with the draft's edits.
    h = await harness()
    await h.command("follow t1")
    await h.put(("Edit 0", "in_progress"))
    await h.shows("Edit 0")
    await h.command("rich on")
    others = [Owner("main", f"s{i}") for i in range(1, 5)]
    for owner in others:
        await h.put((f"Plan of {owner.session_key}", "in_progress"), owner=owner)

    async def edits() -> None:
        for i in range(1, 40):
            await h.put((f"Edit {i}", "in_progress"))
            await asyncio.sleep(SCALE / 4)

    editing = asyncio.create_task(edits())
    replies = await asyncio.gather(*(h.command(f"follow {o.session_key}") for o in others))
    await editing
    assert [r["text"] for r in replies] == [f"Following {o.display_key}." for o in others]
    shown = await h.shows(count=1 + 2 * len(others), timeout=10)
    await slack.wait_for(lambda: "Edit 39" in slack.channel(C).visible()[0].visible_text)
    for owner in others:
        [anchor] = [m for m in shown if m.visible_text == f"Progress of {owner.display_key}, in this thread."]
        [plan] = [m for m in shown if m.stream and m.thread_ts == anchor.ts]
        assert f"[in_progress] Plan of {owner.session_key}" in plan.visible_text
        assert plan.recipient_user_id == PERSON_ID
    # About one call a second to the channel, scaled. Arrival times are taken on the
    # event loop the adapter, the gateway and the writer share, and on a loaded machine
    # one may be late by up to 100 ms — twice this test's interval — so no single pair
    # is judged: any nine calls in a row must span eight intervals but for that (four
    # openers posted past the pace would arrive together, and the nine around them not).
    at = [c.at for c in slack.calls_for(C)]
    late = 0.1
    assert min(b - a for a, b in zip(at, at[8:], strict=False)) >= 8 * SCALE - late, at
    assert [c for c in slack.calls if c.error == "ratelimited"] == []
    assert refused(slack) == []


async def test_a_follow_of_a_run_that_ended_shows_its_plan_stopped_one_paced_call_at_a_time(
    slack, harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A stream cannot be started already stopped: the finished plan takes a
    # chat.startStream and then a chat.stopStream, each in a slot of its own. Three
    # calls, so each pair is judged: the adapter paces at 1/4 of real time (250 ms),
    # so that an arrival late by up to 100 ms on a loaded machine still passes.
    interval = 0.25
    monkeypatch.setenv(ENV, str(interval))
    h = await harness(richMessages=True)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "completed"), ("Ship", "skipped"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    assert (await h.command("follow t1"))["text"] == "Following agent:main:t1."
    await slack.wait_for(lambda: slack.calls_for(C, "chat.stopStream"), timeout=5)
    [anchor, plan] = await h.shows("[complete] Fix", count=2)
    assert plan.stream and plan.thread_ts == anchor.ts and not plan.streaming
    assert [c.method for c in slack.calls_for(C)] == ["chat.postMessage", "chat.startStream", "chat.stopStream"]
    at = [c.at for c in slack.calls_for(C)]
    late = 0.1
    assert min(b - a for a, b in itertools.pairwise(at)) >= interval - late, at
    assert refused(slack) == []


async def test_following_a_followed_session_again_opens_no_second_thread(slack, harness) -> None:
    h = await harness(richMessages=True)
    await h.put(("Fix", "in_progress"))
    assert (await h.command("follow t1"))["text"] == "Following agent:main:t1."
    # asked again while its thread is still opening, and once it is open
    assert (await h.command("follow t1"))["text"] == "This channel already follows agent:main:t1."
    await h.shows("[in_progress] Fix", count=2)
    assert (await h.command("follow t1"))["text"] == "This channel already follows agent:main:t1."
    await h.put(("Fix", "completed"))
    await h.shows("[complete] Fix", count=2)
    assert len(await h.adapter.channel.state.follows.of(C)) == 1
    assert len(h.posts()) == 1


async def test_a_thread_opening_post_whose_answer_is_lost_is_found_and_used(slack, harness) -> None:
    h = await harness(richMessages=True)
    await h.stop()
    await h.start(timeout=1.0)
    await h.put(("Fix", "in_progress"))
    slack.timeout_next("chat.postMessage", delay=2.0, channel=C)  # it lands; its answer comes too late
    assert (await h.command("follow t1"))["text"] == "Following agent:main:t1."
    [anchor, plan] = await h.shows("[in_progress] Fix", count=2, timeout=10)
    assert "Progress of agent:main:t1, in this thread." in anchor.visible_text
    assert plan.stream and plan.thread_ts == anchor.ts and plan.recipient_user_id == PERSON_ID
    assert slack.calls_for(C, "conversations.history") and len(slack.calls_for(C, "chat.postMessage")) == 1


async def test_a_run_that_ends_while_its_thread_opens_gets_its_answer(slack, harness) -> None:
    # The follow was typed while the run was on: its end is announced in the thread,
    # however long the channel's lane took to open it.
    h = await harness(richMessages=True)
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "in_progress"))
    await h.store.update_activity(OWNER, answer="Fixed while you waited.")
    slack.fail_next("chat.postMessage", "ratelimited", retry_after=10, channel=C)
    assert (await h.command("follow t1"))["text"] == "Following agent:main:t1."
    await h.put(("Fix", "completed"))
    await h.store.end_run(OWNER, "r1", RunState.completed)
    [anchor, answer] = await h.shows("Fixed while you waited.", count=2, timeout=10)
    assert "Progress of agent:main:t1, in this thread." in anchor.visible_text and answer.thread_ts == anchor.ts
    limited, opened = slack.calls_for(C, "chat.postMessage")[:2]
    assert limited.error == "ratelimited" and opened.at - limited.at >= 10 * SCALE * 0.9


@pytest.mark.backends
async def test_a_workspace_without_the_plan_display_gets_block_kit_and_it_is_remembered(redis: Redis) -> None:
    async with SlackAPIEmulator(channels=[C, OTHER], streaming=False) as slack:
        h = Harness(slack, redis, richMessages=True)
        await h.start()
        try:
            await h.put(("Fix", "in_progress"))
            await h.command("follow t1")
            [anchor, draft] = await h.shows("Fix", count=2)
            assert not draft.stream and draft.blocks and draft.thread_ts == anchor.ts
            assert [c.error for c in slack.calls if c.method == "chat.startStream"] == ["unknown_method"]
            await h.command("follow t1", channel=OTHER)
            await h.shows("Fix", channel=OTHER, count=1)  # no thread, no second try
            assert len([c for c in slack.calls if c.method == "chat.startStream"]) == 1
            assert "refused the plan display" in (await h.command("rich on"))["text"]
        finally:
            await h.stop()


async def test_serve_runs_the_slack_adapter_and_its_command_routes(slack: SlackAPIEmulator, redis_url: str) -> None:
    from progresscast.serve import serve

    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    settings = Settings.model_validate(
        {
            "gateway": {"listen": f"127.0.0.1:{port}"},
            "channels": {
                "slack": {
                    "token": slack.token, "signingSecret": slack.signing_secret, "apiBaseUrl": slack.base_url,
                    "access": "open",
                }
            },
        }
    )
    task = asyncio.create_task(serve(settings, redis_url))
    try:
        url = f"http://127.0.0.1:{port}/slack/commands"

        async def answered() -> bool:
            try:
                response = await slack.send_slash_command(url, "follow t1", channel_id=C)
            except httpx.HTTPError:  # not listening yet
                return False
            return response.status_code == 200 and "Following" in response.json()["text"]

        await slack.wait_for(answered, 10)
        client = connect(redis_url)
        try:
            await CardStore(client).put(OWNER, CardInput.parse({"plan": [{"step": "Served", "status": "in_progress"}]}))
            await slack.wait_for(lambda: any("Served" in t for t in slack.channel(C).texts()), 10)
        finally:
            await client.aclose()
    finally:
        task.cancel()
        try:
            await asyncio.wait_for(task, 15)
        except asyncio.CancelledError:
            pass


# (what is typed, as bytes; the reply). Bytes that are not UTF-8 (`\xed\xa0\x80` is U+D800)
# are refused naming the field and the rule, never a 500, never read as another name.
SURROGATE_RULE = "must be valid Unicode text (no lone surrogates)"
BAD_BYTES_CASES: list[tuple[bytes, str]] = [
    (b"follow a\xed\xa0\x80b", f"Sorry, I can't follow a\\udced\\udca0\\udc80b: sessionKey {SURROGATE_RULE}."),
    (b"follow t1 m\xffain", f"Sorry, I can't follow t1: agentId {SURROGATE_RULE}."),
    (b"unfollow a\xed\xa0\x80b", f"Sorry, a\\udced\\udca0\\udc80b is not a session I can follow: sessionKey {SURROGATE_RULE}."),
]


async def test_bytes_that_are_not_utf8_in_a_command_get_a_clear_reply(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    url = f"{h.url}/slack/commands"
    for typed, reply in BAD_BYTES_CASES:
        response = await slack.send_slash_command(url, typed, channel_id=C)
        assert response.status_code == 200, response.text
        assert response.json() == {"response_type": "ephemeral", "text": reply}, typed
    response = await slack.send_slash_command(url, b"follow t1", channel_id=b"C\xed\xa0\x80")
    assert response.status_code == 200, response.text
    assert response.json()["text"] == f"Sorry, I can't read this command: channel_id {SURROGATE_RULE}."
    assert await h.redis.smembers(keys.channel_destinations(h.adapter.channel.state.channel)) == set()  # no destination follows anything


async def test_a_lone_surrogate_in_an_event_is_a_clear_400(slack: SlackAPIEmulator, harness) -> None:
    h = await harness()
    url = f"{h.url}/slack/events"
    for payload, field in [
        ({"type": "url_verification", "challenge": "a\ud800b"}, "challenge"),
        ({"type": "event_callback", "event": {"type": "message", "text": "a\ud800b"}}, "event.text"),
    ]:
        response = await slack.send_event(url, payload)  # JSON with ensure_ascii: the escape `\ud800`
        assert response.status_code == 400, response.text
        assert response.json() == {"error": f"{field}: {SURROGATE_RULE}"}
