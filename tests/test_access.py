"""Access by grant, tried as a stranger would: chats over the Bot API and Slack emulators
asking for sessions they were not granted, pairing codes and their limits, approval and
revocation from the command line, groups, and destinations that refuse the bot.

Real parts: python-telegram-bot and slack_sdk over HTTP against the emulators, a real
Redis, the real `progresscast` command line in a subprocess.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.channels.chat.access import CODE_ALPHABET, MAX_PENDING, NEW_PER_HOUR, AccessStore
from progresscast.store import keys
from progresscast.testing import BotAPIEmulator, SlackAPIEmulator
from progresscast.timescale import ENV as TIME_SCALE_ENV
from test_slack_adapter import OTHER as SLACK_OTHER
from test_slack_adapter import C
from test_slack_adapter import Harness as SlackHarness
from test_telegram_adapter import GROUP, OTHER, OWNER, PRIVATE, Harness, quiet

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

SENTINEL = 99
"""A chat the config grants (its answer follows every update sent before it)."""
CODE = re.compile(rf"Pairing code: ([{CODE_ALPHABET}]{{8}})\n")


@pytest.fixture(autouse=True)
def scaled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "0.05")


@pytest.fixture
async def api():
    async with BotAPIEmulator() as emulator:
        yield emulator


@pytest.fixture
async def bot(api: BotAPIEmulator, redis: Redis):
    made: list[Harness] = []

    async def make(**telegram: Any) -> Harness:
        telegram.setdefault("access", None)  # unset: the default (pairing, or allowlist with an allow list)
        h = Harness(api, redis, **telegram)
        made.append(h)
        await h.start()
        return h

    yield make
    for h in made:
        if h.task and not h.task.done():
            await h.stop()


def pairing(redis_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    """The real command line: `progresscast pairing …` against the test's Redis."""
    return subprocess.run(
        [sys.executable, "-m", "progresscast", "--redis", redis_url, "pairing", *args],
        capture_output=True, text=True, timeout=60,
    )


def code_in(text: str) -> str:
    found = CODE.search(text)
    assert found, text
    return found.group(1)


async def no_reply(h: Harness, chat: int, text: str, **kw: Any) -> None:
    """`text` is sent in `chat` and the bot says nothing (waited for a few paces)."""
    before = len(h.api.chat(chat).visible())
    h.api.send_user_message(chat, text, **kw)
    await quiet(3.0)
    assert len(h.api.chat(chat).visible()) == before, h.api.chat(chat).texts()


async def stranger_keys(redis: Redis) -> list[str]:
    """Every key but the store's and the cards' (`pc:{pc:<shard>}:…`), on every node of a Cluster."""
    from redis.asyncio.cluster import RedisCluster

    if isinstance(redis, RedisCluster):
        found = await redis.keys("pc:*", target_nodes=RedisCluster.PRIMARIES)
    else:
        found = await redis.keys("pc:*")
    skip = ("pc:shards", "pc:events", "pc:owners", "pc:{pc:")
    return sorted({k for k in found if not k.startswith(skip)})


# --- pairing ---------------------------------------------------------------------------


async def test_a_strangers_first_command_gets_one_code_and_nothing_else(bot, redis: Redis) -> None:
    h = await bot()
    await h.put(("Reproduce", "in_progress"))
    reply = await h.command(PRIVATE, "/follow t1")
    code = code_in(reply.text)
    assert f"progresscast pairing approve telegram {code}" in reply.text
    assert "agent:main:t1" not in reply.text and "Reproduce" not in reply.text
    # Nothing else happens: no second code within the hour, no follow, no draft.
    await no_reply(h, PRIVATE, "/help")
    await no_reply(h, PRIVATE, "/follow t1")
    assert h.drafts(PRIVATE) == []
    # The only keys a stranger made are the capped pending list and the hour's count.
    assert await stranger_keys(redis) == sorted([keys.access_pending("telegram"), keys.access_issued("telegram")])


async def test_a_flood_of_strangers_costs_bounded_codes_keys_and_replies(
    bot, redis: Redis, redis_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    # The owner's chat is granted by the config: its answer comes after every update before it.
    h = await bot(access="pairing", allowedChats=[SENTINEL])
    # A handful of throwaway chats cannot jam pairing: the sixth stranger still gets a code.
    codes = [code_in((await h.command(chat, "/help")).text) for chat in range(101, 107)]
    assert len(set(codes)) == 6
    # 300 strangers at once: at most NEW_PER_HOUR codes an hour, each chat asking twice.
    for chat in range(1000, 1300):
        h.api.send_user_message(chat, "/follow t1")
        h.api.send_user_message(chat, "/help")
    last = h.api.send_user_message(SENTINEL, "/help")["message"]["message_id"]
    await h.api.wait_for(lambda: any(m.message_id > last for m in h.api.chat(SENTINEL).visible()), 60)
    answered = [c for c in h.api.calls if c.method == "sendMessage" and c.chat_id != SENTINEL]
    assert len(answered) == NEW_PER_HOUR and NEW_PER_HOUR <= MAX_PENDING
    assert len({c.chat_id for c in answered}) == NEW_PER_HOUR  # one code per chat
    assert await redis.hlen(keys.access_pending("telegram")) == NEW_PER_HOUR
    assert await redis.zcard(keys.access_issued("telegram")) == NEW_PER_HOUR
    assert sum("codes issued this hour" in r.getMessage() for r in caplog.records) == 1  # said once, not 240 times
    # The operator sees every code and clears them: a stranger gets a code again at once.
    listed = pairing(redis_url, "list", "telegram")
    assert listed.returncode == 0 and all(c in listed.stdout for c in codes), listed
    one = pairing(redis_url, "clear", "telegram", codes[0])
    assert one.returncode == 0 and "chat 101" in one.stdout, one
    assert codes[0] not in pairing(redis_url, "list", "telegram").stdout
    assert pairing(redis_url, "approve", "telegram", codes[0]).returncode == 1
    again = pairing(redis_url, "clear", "telegram", codes[0])
    assert again.returncode == 1 and f"no pending telegram code {codes[0]}" in again.stderr, again
    cleared = pairing(redis_url, "clear", "telegram", "--all")
    assert cleared.returncode == 0 and f"cleared {NEW_PER_HOUR - 1} pending telegram codes" in cleared.stdout, cleared
    assert [k for k in await stranger_keys(redis) if ":access:" in k] == []
    code_in((await h.command(2000, "/help")).text)


async def test_pairing_list_escapes_control_characters_in_what_it_shows(redis: Redis, redis_url: str) -> None:
    # A destination id comes from outside (a signed Slack `channel_id`): printed raw, a
    # newline in it would forge a line of the listing in the operator's terminal.
    store = AccessStore(redis, "slack")
    forged = "C1\nslack\tapproved\tC2\tsessions *\x1b[2K"
    code = await store.issue(forged)
    assert code is not None
    listed = pairing(redis_url, "list", "slack")
    assert listed.returncode == 0, listed
    assert listed.stdout.splitlines() == [
        f"slack\tpending\t{code}\tchat C1\\nslack\\tapproved\\tC2\\tsessions *\\x1b[2K\t0 min ago"
    ]
    approved = pairing(redis_url, "approve", "slack", code)
    assert approved.returncode == 0 and approved.stdout.count("\n") == 1 and "\x1b" not in approved.stdout
    listed = pairing(redis_url, "list", "slack")
    assert listed.stdout.splitlines() == ["slack\tapproved\tC1\\nslack\\tapproved\\tC2\\tsessions *\\x1b[2K\tsessions *"]


async def test_a_chat_holds_one_code_and_a_code_expires_after_an_hour(
    bot, redis: Redis, redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "0.002")  # an hour is 7.2 s
    h = await bot()
    codes = [code_in((await h.command(chat, "/help")).text) for chat in (101, 102, 103)]
    assert len(set(codes)) == 3
    await no_reply(h, 101, "/follow t1")  # a chat asking again: no second code within the hour
    listed = pairing(redis_url, "list", "telegram")
    assert listed.returncode == 0 and all(c in listed.stdout for c in codes), listed
    store = AccessStore(redis, "telegram")
    await h.api.wait_for(lambda: _none_pending(store), 30)  # an hour on the scaled clock
    expired = pairing(redis_url, "approve", "telegram", codes[0])
    assert expired.returncode == 1 and "no pending telegram code" in expired.stderr
    again = code_in((await h.command(101, "/help")).text)  # an hour later: a new code
    assert again != codes[0]


async def _none_pending(store: AccessStore) -> bool:
    return not await store.pending()


async def test_approval_from_the_command_line_lets_the_chat_follow(bot, redis: Redis, redis_url: str) -> None:
    h = await bot()
    code = code_in((await h.command(PRIVATE, "/follow t1")).text)
    bad = pairing(redis_url, "approve", "telegram", "NOT-A-CODE")
    assert bad.returncode == 2 and "CODE: must be 8 characters" in bad.stderr
    approved = pairing(redis_url, "approve", "telegram", code.lower())  # typed in lower case: the same code
    assert approved.returncode == 0, approved.stderr
    assert f"approved telegram chat {PRIVATE}" in approved.stdout
    assert (await h.command(PRIVATE, "/follow t1")).text == "Following agent:main:t1. Its progress card will show here when the agent writes one."
    await h.put(("Reproduce", "in_progress"))
    await h.shows(PRIVATE, "Reproduce")
    # A chat with a grant is answered every time.
    for _ in range(3):
        assert "following agent:main:t1" in (await h.command(PRIVATE, "/help")).text


async def test_a_refused_follow_reads_the_same_whether_or_not_the_session_exists(
    bot, redis: Redis, redis_url: str
) -> None:
    h = await bot()
    code = code_in((await h.command(PRIVATE, "/card")).text)
    assert pairing(redis_url, "approve", "telegram", code, "--sessions", "shop-*").returncode == 0
    await h.put(("Secret plan", "in_progress"))  # t1 exists
    exists = (await h.command(PRIVATE, "/follow t1")).text
    missing = (await h.command(PRIVATE, "/follow t2")).text
    assert exists.replace("t1", "X") == missing.replace("t2", "X") == "Sorry, this chat may not follow agent:main:X."
    assert (await h.command(PRIVATE, "/follow shop-7")).text.startswith("Following agent:main:shop-7")
    assert await redis.smembers(keys.channel_follows(keys.TG, PRIVATE)) == {"0 agent:main:shop-7"}


async def test_revocation_ends_the_follows_and_deletes_the_drafts(bot, redis: Redis, redis_url: str) -> None:
    h = await bot()
    code = code_in((await h.command(PRIVATE, "/help")).text)
    assert pairing(redis_url, "approve", "telegram", code).returncode == 0
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Reproduce", "in_progress"))
    [draft] = await h.shows(PRIVATE, "Reproduce")
    revoked = pairing(redis_url, "revoke", "telegram", str(PRIVATE))
    assert revoked.returncode == 0 and "agent:main:t1" in revoked.stdout, revoked.stderr
    await h.api.wait_for(lambda: draft.message_id in h.api.chat(PRIVATE).deleted, 10)
    assert await redis.smembers(keys.channel_follows(keys.TG, PRIVATE)) == set()

    async def forgotten() -> bool:
        return await redis.get(keys.channel_draft(keys.TG, OWNER, PRIVATE, 0)) is None and not await redis.smembers(
            keys.channel_ended(keys.TG)
        )

    await h.api.wait_for(forgotten, 5)
    calls = len(h.api.calls_for(PRIVATE))
    await h.put(("Reproduce", "completed"))
    await quiet(2.0)
    assert len(h.api.calls_for(PRIVATE)) == calls
    # Revoked: the chat is a stranger again (a new code, since the old one was used).
    assert CODE.search((await h.command(PRIVATE, "/follow t1")).text)
    assert pairing(redis_url, "revoke", "telegram", "not-a-chat").returncode == 2


# --- groups and the allow list -----------------------------------------------------------


async def test_in_groups_only_administrators_change_what_the_chat_follows(bot, redis: Redis) -> None:
    h = await bot(chats=[{"id": GROUP, "sessions": ["*"]}])
    admin, member = 7001, 7002
    h.api.bot().set_admins(GROUP, admin)
    refused = (await h.command(GROUP, "/follow t1", user_id=member)).text
    assert refused.startswith("Only the chat's administrators can change what it follows")
    for typed in ("/mode off", "/rich on", "/unfollow"):
        assert (await h.command(GROUP, typed, user_id=member)).text == refused
    assert await redis.smembers(keys.channel_follows(keys.TG, GROUP)) == set()
    assert (await h.command(GROUP, "/follow t1", user_id=admin)).text.startswith("Following agent:main:t1")
    assert "following agent:main:t1" in (await h.command(GROUP, "/help", user_id=member)).text
    await h.put(("Reproduce", "in_progress"))
    await h.shows(GROUP, "Reproduce")
    assert (await h.command(GROUP, "/card", user_id=member)).text == "Showing agent:main:t1 again below."
    asked = [c for c in h.api.calls if c.method == "getChatMember"]
    assert {c.params.get("user_id") for c in asked} == {admin, member}
    assert len(asked) == 2  # cached: one question per person


async def test_allowlist_refuses_once_an_hour_and_keeps_its_meaning(bot, redis: Redis) -> None:
    h = await bot(allowedChats=[PRIVATE])
    refusal = (await h.command(OTHER, "/follow t1")).text
    assert refusal == f"Sorry, this bot is not enabled for this chat. Ask its operator to add chat id {OTHER} to channels.telegram.allowedChats."
    await no_reply(h, OTHER, "/follow t1")  # once an hour
    assert await stranger_keys(redis) == []
    assert (await h.command(PRIVATE, "/follow t1")).text.startswith("Following")
    # No pairing under allowlist: an approval changes nothing.
    assert not CODE.search(refusal)


async def test_a_misspelt_command_names_the_nearest_one(bot) -> None:
    h = await bot(access="open")
    text = (await h.command(PRIVATE, "/folow shop")).text
    assert text.startswith("Unknown command /folow — did you mean /follow?") and "/follow SESSION" in text


# --- a destination that refuses the bot --------------------------------------------------


async def test_a_blocked_chat_is_paused_until_it_speaks_again(bot, redis: Redis) -> None:
    from progresscast import metrics
    from progresscast.gateway.health import count_follows

    # (Kept where it is: the user's /card below the draft would move it there first.)
    h = await bot(access="open", streaming={"stayAtBottom": False})
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows(PRIVATE, "Step 0")
    h.api.bot().refuse_bot(PRIVATE, "blocked")
    before = len(h.api.calls_for(PRIVATE))
    for i in range(1, 21):  # 2 writes a second for 10 s of Telegram's time
        await h.put(*[(f"Step {k}", "completed") for k in range(i)], (f"Step {i}", "in_progress"))
        await quiet(0.5)
    refused = h.api.calls_for(PRIVATE)[before:]
    assert [c.description for c in refused] == ["Forbidden: bot was blocked by the user"], refused
    assert await redis.hlen(keys.channel_paused(keys.TG)) == 1
    await count_follows(redis, h.settings)
    assert metrics.PAUSED.labels("telegram")._value.get() == 1
    # The user writes again (which unblocks the bot): the command is answered, drafts resume.
    reply = await h.command(PRIVATE, "/card")
    assert reply.text == "Showing agent:main:t1 again below."
    await h.api.wait_for(lambda: any("Step 20" in m.text for m in h.drafts(PRIVATE)), 10)
    assert await redis.hlen(keys.channel_paused(keys.TG)) == 0  # resumed before the command was handled
    await h.put(*[(f"Step {k}", "completed") for k in range(21)])
    await h.api.wait_for(lambda: any("21/21 complete" in m.text for m in h.drafts(PRIVATE)), 10)


async def test_a_paused_chat_gets_one_probe_after_its_backoff(
    bot, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, "0.01")  # the first probe after 120 s: 1.2 s
    h = await bot(access="open")
    await h.command(PRIVATE, "/follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows(PRIVATE, "Step 0")
    h.api.bot().refuse_bot(PRIVATE, "blocked")
    before = len(h.api.calls_for(PRIVATE))
    await h.put(("Step 0", "completed"), ("Step 1", "in_progress"))
    await h.api.wait_for(lambda: len(h.api.calls_for(PRIVATE)) == before + 1, 5)
    h.api.chat(PRIVATE).bot_status = "member"  # unblocked without writing: only a probe finds out
    await h.put(("Step 0", "completed"), ("Step 1", "completed"), ("Step 2", "in_progress"))
    await h.shows(PRIVATE, "Step 2", timeout=10)

    async def resumed() -> bool:
        return await redis.hlen(keys.channel_paused(keys.TG)) == 0

    await h.api.wait_for(resumed, 5)


# --- Slack -------------------------------------------------------------------------------


@pytest.fixture
async def slack():
    async with SlackAPIEmulator(channels=[C, SLACK_OTHER]) as emulator:
        yield emulator


@pytest.fixture
async def app(slack: SlackAPIEmulator, redis: Redis):
    made: list[SlackHarness] = []

    async def make(**config: Any) -> SlackHarness:
        config.setdefault("access", None)  # unset: the default
        h = SlackHarness(slack, redis, **config)
        made.append(h)
        await h.start()
        return h

    yield make
    for h in made:
        await h.stop()


async def test_slack_strangers_pair_and_are_refused_alike(app, redis: Redis, redis_url: str) -> None:
    h = await app()
    first = (await h.command("follow t1"))["text"]
    code = code_in(first)
    assert "This channel is not paired" in first
    response = await h.slack.send_slash_command(f"{h.url}/slack/commands", "help", channel_id=C)
    assert response.status_code == 200 and response.content == b""  # nothing more within the hour
    assert await stranger_keys(redis) == sorted([keys.access_pending("slack"), keys.access_issued("slack")])
    assert pairing(redis_url, "approve", "slack", code, "--sessions", "shop-*").returncode == 0
    await h.put(("Secret", "in_progress"))
    exists, missing = (await h.command("follow t1"))["text"], (await h.command("follow t2"))["text"]
    assert exists.replace("t1", "X") == missing.replace("t2", "X") == "Sorry, this channel may not follow agent:main:X."
    assert (await h.command("follow shop-1"))["text"].startswith("Following agent:main:shop-1")


async def test_an_archived_slack_channel_is_paused_until_it_speaks_again(app, redis: Redis) -> None:
    h = await app(access="open")
    await h.command("follow t1")
    await h.put(("Step 0", "in_progress"))
    await h.shows("Step 0")
    h.slack.channel(C).archived = True
    before = len(h.slack.calls_for(C))
    for i in range(1, 11):
        await h.put(*[(f"Step {k}", "completed") for k in range(i)], (f"Step {i}", "in_progress"))
        await asyncio.sleep(0.5 * 0.05)
    await quiet(2.0)
    assert [c.error for c in h.slack.calls_for(C)[before:]] == ["is_archived"]
    assert await redis.hlen(keys.channel_paused(keys.SLACK)) == 1
    h.slack.channel(C).archived = False
    assert (await h.command("card"))["text"] == "Showing agent:main:t1 again below."
    await h.shows("Step 10", timeout=10)
    assert await redis.hlen(keys.channel_paused(keys.SLACK)) == 0


async def test_start_says_what_strangers_get(bot, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="progresscast")
    h = await bot()
    said = [r.getMessage() for r in caplog.records]
    assert sum("channels.telegram.access is not set" in m and "pairing code" in m for m in said) == 1, said
    await h.stop()
    caplog.clear()
    await bot(access="open")
    warned = [r for r in caplog.records if r.levelname == "WARNING" and "access = \"open\"" in r.getMessage()]
    assert len(warned) == 1
