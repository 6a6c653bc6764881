"""The card store against a real Redis (embedded, and REDIS_URL's when set)."""

from __future__ import annotations

import asyncio
import time
import zlib

import pytest
from redis.asyncio import Redis
from redis.asyncio.cluster import RedisCluster

from conftest import all_keys
from progresscast.model.asks import AskInput
from progresscast.model.card import CardError, CardInput
from progresscast.model.owners import Owner, resolve_owner
from progresscast.model.view import RunState
from progresscast.store import keys
from progresscast.store.cards import CardStore, StoreError
from progresscast.store.connections import connect
from progresscast.store.events import EventGroup, GroupReading

pytestmark = pytest.mark.backends  # the store itself: each test runs on every backend

OWNER = Owner(agent_id="main", session_key="ticket-1")


def plan(*statuses: str) -> CardInput:
    return CardInput.parse(
        {"plan": [{"step": f"Step {i}", "status": s} for i, s in enumerate(statuses)]}
    )


async def test_put_then_get_round_trips(store: CardStore) -> None:
    card = CardInput.parse(
        {
            "plan": [
                {"step": "Read the ticket", "status": "completed"},
                {"step": "Fix <the> bug & test", "status": "in_progress", "note": "flaky"},
                {"step": "Ship", "status": "pending"},
            ],
            "markdown": "**Note** with `code`",
        }
    )
    result = await store.put(OWNER, card)
    assert result.receipt == "Progress card updated (rev 1, 1/3 done)"
    got = await store.get(OWNER)
    assert got is not None
    assert got.revision == 1 and got.plan == card.plan and got.markdown == card.markdown
    assert (got.sessionKey, got.agentId, got.displayKey) == ("ticket-1", "main", "agent:main:ticket-1")
    assert got.updatedAt.endswith("Z") and got.updatedAt.startswith("20")


async def test_every_write_replaces_the_whole_card(store: CardStore) -> None:
    await store.put(OWNER, CardInput.parse({"plan": [{"step": "a", "status": "pending"}], "markdown": "old"}))
    await store.put(OWNER, CardInput.parse({"plan": [{"step": "b", "status": "pending"}]}))
    got = await store.get(OWNER)
    assert got.markdown is None and [s.step for s in got.plan] == ["b"]
    result = await store.put(OWNER, CardInput.parse({"markdown": "only a note"}))
    assert result.receipt == "Progress card updated (rev 3)"
    got = await store.get(OWNER)
    assert got.plan is None and got.markdown == "only a note"


async def test_skipped_counts_as_done(store: CardStore) -> None:
    result = await store.put(OWNER, plan("completed", "skipped", "blocked", "pending"))
    assert result.receipt == "Progress card updated (rev 1, 2/4 done)"
    assert result.to_json() == {"revision": 1, "steps": {"completed": 2, "total": 4}}


async def test_clear_bumps_revision_and_revision_never_goes_back(store: CardStore) -> None:
    await store.put(OWNER, plan("pending"))
    await store.put(OWNER, plan("completed"))
    cleared = await store.put(OWNER, CardInput.parse({"plan": [], "markdown": "  "}))
    assert cleared.receipt == "Progress card cleared" and cleared.revision == 3
    assert await store.get(OWNER) is None
    again = await store.clear(OWNER)
    assert again.revision == 4
    after = await store.put(OWNER, plan("pending"))
    assert after.revision == 5
    assert (await store.get(OWNER)).revision == 5


async def test_revisions_are_per_owner(store: CardStore) -> None:
    other = Owner(agent_id="main", session_key="ticket-2")
    await store.put(OWNER, plan("pending"))
    await store.put(OWNER, plan("pending"))
    assert (await store.put(other, plan("pending"))).revision == 1


async def test_expected_revision_compare_and_set(store: CardStore) -> None:
    await store.put(OWNER, plan("pending"), expected_revision=0)
    await store.put(OWNER, plan("completed"), expected_revision=1)
    with pytest.raises(StoreError) as info:
        await store.put(OWNER, plan("skipped"), expected_revision=1)
    assert info.value.field == "expectedRevision" and "revision 2" in info.value.rule
    got = await store.get(OWNER)
    assert got.revision == 2 and got.plan[0].status == "completed"
    assert await store.revision(OWNER) == 2


async def test_write_that_arrived_before_reset_cannot_restore_the_card(store: CardStore) -> None:
    """The write says when it arrived; no read at arrival."""
    await store.put(OWNER, plan("in_progress"))
    # e.g. an HTTP request arrived 50 ms ago (a reset within the write's own trip to
    # Redis, well under that, cannot be told from one before the arrival) ...
    arrived = time.monotonic() - 0.05
    await store.reset(OWNER)  # ... the session is reset while it is in flight ...
    with pytest.raises(StoreError) as info:  # ... and it lands afterwards.
        await store.put(OWNER, plan("completed"), arrived=arrived)
    assert "reset" in info.value.rule
    assert await store.get(OWNER) is None
    # A write that arrives after the reset is fine, however soon after.
    result = await store.put(OWNER, plan("pending"), arrived=time.monotonic())
    assert result.revision == 3  # put, reset, put
    # ... and so is one that arrived long before, while no reset came since.
    arrived = time.monotonic()
    await asyncio.sleep(0.01)
    assert (await store.put(OWNER, plan("completed"), arrived=arrived)).revision == 4


async def test_clearing_a_card_never_written_writes_nothing(store: CardStore, redis: Redis) -> None:
    # `card clear --session no-such-session` must not make an owner or an index entry
    # (a typo would list a session in the web index); the receipt stays the same.
    await store.put(OWNER, plan("pending"))
    before = {k: await redis.dump(k) for k in await all_keys(redis)}
    missing = Owner("main", "no-such-session")
    result = await store.clear(missing)
    assert result.receipt == "Progress card cleared" and result.to_json()["revision"] == 0
    assert {k: await redis.dump(k) for k in await all_keys(redis)} == before
    assert [key async for key, _ in store.owners()] == [OWNER.display_key]
    assert await store.get(missing) is None
    # A card that was written and cleared is cleared again as before: a new revision.
    assert (await store.clear(OWNER)).revision == 2 and (await store.clear(OWNER)).revision == 3


async def test_a_write_that_arrived_before_a_clear_still_lands(store: CardStore) -> None:
    """A clear is not a reset."""
    await store.put(OWNER, plan("in_progress"))
    arrived = time.monotonic() - 0.05
    await store.clear(OWNER)
    assert (await store.put(OWNER, plan("pending"), arrived=arrived)).revision == 3


async def test_writes_racing_a_reset_by_arrival(store: CardStore) -> None:
    """Whatever interleaving: a card that survives the reset arrived after it."""
    await store.put(OWNER, plan("pending"))
    before = time.monotonic() - 0.05  # arrived 50 ms ago

    async def write(arrived: float) -> int | None:
        try:
            return (await store.put(OWNER, plan("pending"), arrived=arrived)).revision
        except StoreError:
            return None

    results = await asyncio.gather(*(write(before) for _ in range(5)), store.reset(OWNER), *(write(before) for _ in range(5)))
    reset_rev = results[5].revision
    assert all(r < reset_rev for r in results[:5] + results[6:] if r is not None)
    assert await store.get(OWNER) is None
    after = time.monotonic()
    assert (await store.put(OWNER, plan("pending"), arrived=after)).revision == reset_rev + 1


async def test_a_reset_time_ahead_of_the_servers_clock_refuses_nothing(store: CardStore, redis: Redis) -> None:
    """The server's clock stepped back after a reset: writes are not refused until it catches up."""
    lay = await store.layout()
    await redis.set(lay.reset_at(OWNER), int((time.time() + 3600) * 1_000_000))
    assert (await store.put(OWNER, plan("pending"), arrived=time.monotonic() - 1)).revision == 1


async def test_fifty_concurrent_writers_get_distinct_revisions(redis_url: str) -> None:
    """Fifty writers, each on its own connection, to one owner."""
    clients = [connect(redis_url) for _ in range(50)]
    try:
        stores = [CardStore(c) for c in clients]
        for s in stores:  # each opens its connection (and learns the layout) before the race
            await s.revision(OWNER)
        cards = [
            CardInput.parse({"plan": [{"step": f"writer {i}", "status": "pending"}]}) for i in range(50)
        ]
        results = await asyncio.gather(*(s.put(OWNER, c) for s, c in zip(stores, cards, strict=False)))
        revisions = sorted(r.revision for r in results)
        assert revisions == list(range(1, 51))
        top = max(range(50), key=lambda i: results[i].revision)
        got = await stores[0].get(OWNER)
        assert got.revision == 50 and got.plan[0].step == f"writer {top}"
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))


async def test_each_write_appends_one_change_event(store: CardStore, redis: Redis) -> None:
    group = EventGroup(redis, "test", "c1")
    await group.ensure()
    await store.put(OWNER, plan("pending"))
    await store.clear(OWNER)
    events = await group.read(block_ms=3000)
    assert [(e.type, e.revision) for e in events] == [
        ("progressCard.changed", 1),
        ("progressCard.changed", None),
    ]
    assert events[0].to_json() == {
        "sessionKey": "ticket-1",
        "agentId": "main",
        "displayKey": "agent:main:ticket-1",
        "revision": 1,
    }
    await group.ack(events)
    assert await group.read(block_ms=50) == []


async def blocked_readers(redis: Redis, name: str) -> int:
    """Connections named `name` waiting in a blocking XREADGROUP."""
    clients = await redis.client_list()
    return sum(1 for c in clients if c.get("cmd") == "xreadgroup" and c.get("name") == name)


async def test_one_reader_reads_every_shard_and_what_is_written_while_it_lingers_is_one_batch(
    store: CardStore, redis: Redis, redis_url: str
) -> None:
    layout = await store.layout()
    owners: dict[int, Owner] = {}
    for i in range(200):
        owner = Owner("main", f"spread-{i}")
        owners.setdefault(layout.shard(owner), owner)
    first, *others = list(owners.values())[:4]
    cluster = isinstance(redis, RedisCluster)
    # The group's own client, its connections named: other tests' readers may still be
    # ending on the same database.
    reader = redis if cluster else Redis.from_url(redis_url, decode_responses=True, client_name="lingering")
    group = EventGroup(reader, "lingering", "c1", reading=GroupReading(linger=0.5))
    await group.ensure()
    try:
        await store.put(first, plan("pending"))
        batch = await group.read(block_ms=3000)
        assert [e.owner for e in batch] == [first]
        await group.ack(batch)
        for owner in others:  # three other shards, written 0.1 s apart while the reader lingers
            await store.put(owner, plan("pending"))
            await asyncio.sleep(0.1)
        got = await group.read(block_ms=3000)
        await group.ack(got)
        if cluster:  # one reader per shard: the batches come as each shard's does
            while len(got) < len(others) and (more := await group.read(block_ms=3000)):
                await group.ack(more)
                got += more
        assert sorted(e.owner.session_key for e in got) == sorted(o.session_key for o in others)
        if not cluster:  # every shard's stream in one command: one connection waits, not 16
            waiting = asyncio.create_task(group.read(block_ms=1500))  # the readers live while it reads
            deadline = time.monotonic() + 4
            while await blocked_readers(redis, "lingering") < 1 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            await asyncio.sleep(0.1)  # any further reader would be waiting by now too
            assert await blocked_readers(redis, "lingering") == 1
            assert await waiting == []
    finally:
        await group.close()
        if reader is not redis:
            await reader.aclose()


async def test_rejected_write_touches_nothing(store: CardStore, redis: Redis) -> None:
    await store.put(OWNER, plan("pending"))
    before = {k: await redis.dump(k) for k in await all_keys(redis)}
    with pytest.raises(StoreError):
        await store.put(OWNER, plan("completed"), expected_revision=7)
    after = {k: await redis.dump(k) for k in await all_keys(redis)}
    assert before == after


async def test_consumer_group_shares_events_and_redelivers_unacked(store: CardStore, redis: Redis) -> None:
    first = EventGroup(redis, "workers", "a", reading=GroupReading(claim_idle_ms=0))
    second = EventGroup(redis, "workers", "b", reading=GroupReading(claim_idle_ms=0))
    await first.ensure()
    await store.put(OWNER, plan("pending"))
    got = await first.read(block_ms=3000)
    assert len(got) == 1
    # "a" dies without acknowledging: "b" claims the entry.
    claimed = await second.read(block_ms=3000)
    assert [e.id for e in claimed] == [got[0].id]
    await second.ack(claimed)
    assert await second.read(block_ms=50) == []


async def test_every_key_an_owner_writes_shares_one_hash_tag(store: CardStore, redis: Redis) -> None:
    owner = resolve_owner("agent:research:t-9", known_agents={"main", "research"}, default_agent="main")
    await store.start_run(owner, "r1")
    await store.put(owner, plan("in_progress"))
    await store.update_activity(owner, headline="h", tool="t", answer="a")
    await store.reset(owner)
    await store.put(owner, plan("pending"))
    await store.asks.open(owner, AskInput.parse({"kind": "approval", "prompt": "ok?"}))
    layout = await store.layout()
    shard = layout.shard(owner)
    written = set(await all_keys(redis)) - {keys.SHARDS}
    assert written == set(layout.owner_keys(owner)) | {keys.events(shard), keys.owners(shard)}
    assert all(key.count("{") == 1 and f"{{pc:{shard}}}" in key for key in written)
    assert shard == zlib.crc32(b"agent:research:t-9") % 16


@pytest.mark.parametrize(
    "session, agent, expected",
    [
        ("t-1", None, Owner("main", "t-1")),
        ("t-1", "research", Owner("research", "t-1")),
        ("agent:research:t-1", None, Owner("research", "t-1")),
        ("agent:research:t-1", "research", Owner("research", "t-1")),
        ("agent:main:a:b", None, Owner("main", "a:b")),
    ],
)
def test_owner_resolution(session: str, agent: str | None, expected: Owner) -> None:
    owner = resolve_owner(session, agent, known_agents={"main", "research"}, default_agent="main")
    assert owner == expected
    assert owner.display_key == f"agent:{expected.agent_id}:{expected.session_key}"


@pytest.mark.parametrize(
    "session, agent, field, words",
    [
        ("t-1", "ghost", "agentId", "not a configured agent"),
        ("agent:ghost:t-1", None, "agentId", "not a configured agent"),
        ("agent:research:t-1", "main", "agentId", "conflicts"),
        ("", None, "sessionKey", "empty"),
        ("a b", None, "sessionKey", "spaces"),
        ("agent:x", None, "sessionKey", "agent:<agentId>:<rest>"),
        (7, None, "sessionKey", "string"),
    ],
)
def test_owner_rejections(session: object, agent: str | None, field: str, words: str) -> None:
    with pytest.raises(CardError) as info:
        resolve_owner(session, agent, known_agents={"main", "research"}, default_agent="main")
    assert info.value.field == field and words in info.value.rule


async def test_paused_when_no_active_run_or_card_older_than_run(store: CardStore) -> None:
    await store.put(OWNER, plan("in_progress"))
    view = await store.view(OWNER)
    assert view.run is RunState.none and not view.paused  # no run tracking: live
    await store.start_run(OWNER, "r1")
    assert (await store.view(OWNER)).paused  # the card predates this run
    await store.put(OWNER, plan("in_progress"))
    assert not (await store.view(OWNER)).paused
    assert await store.end_run(OWNER, "r1", RunState.failed)
    view = await store.view(OWNER)
    assert view.run is RunState.failed and view.paused
    assert not await store.end_run(OWNER, "other", RunState.completed)


async def test_activity_merges_and_keeps_recent_tool_lines(store: CardStore) -> None:
    await store.update_activity(OWNER, headline="Reading   files\u200b")
    for i in range(7):
        await store.update_activity(OWNER, tool=f"read file{i}.py")
    activity = await store.update_activity(OWNER, answer="The answer so far")
    assert activity.headline == "Reading files"
    assert activity.tools == tuple(f"read file{i}.py" for i in range(2, 7))
    assert activity.answer == "The answer so far"
    activity = await store.update_activity(OWNER, headline="")
    assert activity.headline is None and activity.answer == "The answer so far"
    await store.start_run(OWNER, "r2")  # a new turn starts with no activity
    assert (await store.activity(OWNER)).empty


async def test_a_tool_line_that_changed_takes_its_old_lines_place(store: CardStore) -> None:
    for line in ("run  pytest", "read a.py", "run  pytest"):
        await store.update_activity(OWNER, tool=line)
    # The newest equal line is replaced (compared as stored: cleaned), in place.
    activity = await store.update_activity(OWNER, tool="run pytest ✓", replaces="run  pytest")
    assert activity.tools == ("run pytest", "read a.py", "run pytest ✓")
    # A line no longer there (trimmed away) is appended instead.
    activity = await store.update_activity(OWNER, tool="edit b.py ✗", replaces="edit b.py")
    assert activity.tools == ("run pytest", "read a.py", "run pytest ✓", "edit b.py ✗")


async def test_entries_without_an_owner_are_skipped_and_acknowledged(store: CardStore, redis: Redis) -> None:
    group = EventGroup(redis, "junk", "c1")
    await group.ensure()
    stream = (await store.layout()).events_of(OWNER)
    await redis.xadd(stream, {"note": "written by something else"})
    await store.put(OWNER, plan("pending"))
    events = await group.read(block_ms=2000)
    assert [e.revision for e in events] == [1]
    await group.ack(events)
    assert (await redis.xpending(stream, "junk"))["pending"] == 0
    await group.close()


@pytest.mark.parametrize(
    "key, owner",
    [
        ("agent:main:t-1", Owner("main", "t-1")),
        ("agent:main:a:b", Owner("main", "a:b")),
        ("agent:main:", None),
        ("agent::t", None),
        ("main:t-1", None),
    ],
)
def test_display_keys_parse_back_to_owners(key: str, owner: Owner | None) -> None:
    assert Owner.from_display_key(key) == owner


async def test_a_view_read_with_other_commands_is_the_view_and_their_replies(store: CardStore, redis: Redis) -> None:
    await store.put(OWNER, plan("completed", "in_progress"))
    await store.start_run(OWNER, "r1")
    await store.update_activity(OWNER, headline="Reading", tool="grep")
    await redis.set("other-key", "42")

    def queue(pipe: object) -> None:
        pipe.get("other-key")  # type: ignore[attr-defined]
        pipe.get("no-such-key")  # type: ignore[attr-defined]

    view, replies = await store.view_with(OWNER, queue)
    assert view == await store.view(OWNER)
    assert view.card is not None and [s.status.value for s in view.card.plan or ()] == ["completed", "in_progress"]
    assert view.activity.tools == ("grep",) and view.run is RunState.active
    assert replies == ["42", None]


async def test_a_stored_step_of_the_wrong_shape_fails_the_read(store: CardStore, redis: Redis) -> None:
    # Stored steps are not validated again when read; one of the wrong shape still fails.
    await store.put(OWNER, plan("pending"))
    await redis.hset((await store.layout()).card(OWNER), "plan", '[{"step": "x", "status": "sleeping"}]')
    with pytest.raises(ValueError, match="sleeping"):
        await store.view(OWNER)
