"""The store's client sends the commands many tasks issue together as one pipeline, and
reads several keys in one script call — each caller still gets its own reply or error."""

from __future__ import annotations

import asyncio
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import BlockingConnectionPool, Redis
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from conftest import PrivateRedis
from progresscast.store.coalescing import CoalescingRedis
from progresscast.store.connections import connect
from progresscast.store.reads import READ_MANY, Reads


def named(url: str, name: str) -> CoalescingRedis:
    pool = BlockingConnectionPool.from_url(url, max_connections=200, client_name=name, decode_responses=True)
    return CoalescingRedis(connection_pool=pool)


async def connections_named(url: str, name: str) -> int:
    async with Redis.from_url(url, decode_responses=True) as admin:
        return sum(1 for c in await admin.client_list() if c.get("name") == name)


async def test_the_store_connects_with_the_coalescing_client(redis_url: str) -> None:
    client = connect(redis_url)
    try:
        assert isinstance(client, CoalescingRedis)
    finally:
        await client.aclose()


async def test_commands_issued_together_leave_together_each_with_its_own_reply(redis_url: str) -> None:
    client = named(redis_url, "together")
    try:
        replies = await asyncio.gather(*(client.incr("n") for _ in range(100)))
        # One batch on one connection, in the order the tasks sent them: a client that
        # sent each alone would have opened a connection per task waiting.
        assert replies == list(range(1, 101))
        assert await connections_named(redis_url, "together") == 1
        async with client.pipeline(transaction=False) as pipe:  # a pipeline joins the batch
            pipe.set("a", "1").get("a").incr("n")
            together = asyncio.gather(pipe.execute(), client.get("n"))
            assert await together == [[True, "1", 101], "101"]
        assert await connections_named(redis_url, "together") == 1
    finally:
        await client.aclose()


async def test_a_blocking_read_goes_alone_and_holds_nothing_back(redis_url: str) -> None:
    client = named(redis_url, "blocking")
    try:
        waiting = asyncio.create_task(client.xread({"s": "$"}, block=0))
        quick = asyncio.create_task(client.get("x"))  # sent in the same turn as the read
        assert await asyncio.wait_for(quick, 10) is None
        assert not waiting.done()
        await client.xadd("s", {"k": "v"})
        [[stream, [(_, fields)]]] = await asyncio.wait_for(waiting, 10)
        assert (stream, fields) == ("s", {"k": "v"})
    finally:
        await client.aclose()


async def test_an_error_fails_only_the_command_that_caused_it(redis_url: str) -> None:
    client = named(redis_url, "errors")
    try:
        await client.hset("h", "f", "v")
        wrong, right, written = await asyncio.gather(
            client.get("h"), client.hget("h", "f"), client.set("k", "v"), return_exceptions=True
        )
        assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
        assert (right, written) == ("v", True)
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k").get("h").get("k")
            with pytest.raises(ResponseError, match="WRONGTYPE"):
                await pipe.execute()
        async with client.pipeline(transaction=False) as pipe:
            pipe.get("k").get("h").get("k")
            first, error, last = await pipe.execute(raise_on_error=False)
        assert (first, last) == ("v", "v") and isinstance(error, ResponseError)
    finally:
        await client.aclose()


async def test_a_cancelled_caller_leaves_the_others_answered(redis_url: str) -> None:
    client = named(redis_url, "cancelled")
    try:
        tasks = [asyncio.create_task(client.set(f"k{i}", i)) for i in range(3)]
        await asyncio.sleep(0)  # every task has queued its command
        tasks[1].cancel()
        done = await asyncio.gather(*tasks, return_exceptions=True)
        assert done[0] is True and done[2] is True
        assert isinstance(done[1], asyncio.CancelledError)
        assert await client.get("k2") == "2"
    finally:
        await client.aclose()


@pytest.mark.backends
async def test_reads_in_one_script_answer_as_the_same_commands_in_a_transaction(redis: Any) -> None:
    keys = {name: f"{{reads}}:{name}" for name in ("hash", "empty", "list", "string", "set", "missing")}
    await redis.hset(keys["hash"], mapping={"a": "1", "b": "2"})
    await redis.rpush(keys["list"], "x", "y")
    await redis.set(keys["string"], "s")
    await redis.sadd(keys["set"], "m")

    def queue(pipe: Any) -> None:
        pipe.hgetall(keys["hash"])
        pipe.hgetall(keys["empty"])
        pipe.lrange(keys["list"], 0, -1)
        pipe.lrange(keys["missing"], 0, -1)
        pipe.get(keys["string"])
        pipe.get(keys["missing"])
        pipe.exists(keys["set"])
        pipe.exists(keys["missing"])
        pipe.sismember(keys["set"], "m")
        pipe.sismember(keys["set"], "other")

    async with redis.pipeline(transaction=True) as pipe:
        queue(pipe)
        expected = await pipe.execute()
    reads = Reads()
    queue(reads)
    got = await reads.run(redis.register_script(READ_MANY))
    assert got == expected == [{"a": "1", "b": "2"}, {}, ["x", "y"], [], "s", None, 1, 0, 1, 0]
    with pytest.raises(ValueError, match="whole list"):
        reads.lrange(keys["list"], 1, -1)


async def test_a_batch_answers_as_redis_py_answers_each_command(redis_url: str) -> None:
    """Replies shaped by redis-py's own callbacks (a bool, a dict, pairs with scores, a
    stream's entries, a script's), options included, and an error in place; a batch
    with a reply option redis-py honours itself (bytes never decoded, an answer for an
    empty reply) as it answers."""
    client = named(redis_url, "shapes")
    plain = Redis.from_url(redis_url, decode_responses=True)
    try:
        await plain.hset("h", mapping={"a": "1", "b": "2"})
        await plain.zadd("z", {"x": 1.5, "y": 2})
        await plain.xadd("s", {"f": "v"}, id="1-1")
        script = plain.register_script("return {KEYS[1], ARGV[1], 3}")

        def asked(c: Any) -> list[Any]:
            return [
                c.set("k", "v"), c.get("k"), c.hgetall("h"), c.hmget("h", "a", "nope"),
                c.zrange("z", 0, -1, withscores=True), c.xrange("s"), c.exists("h", "k", "nope"),
                c.evalsha(script.sha, 1, "key", "arg"), c.get("h"), c.ttl("k"), c.sismember("nope", "m"),
                c.dump("k"), c.mget([]),
            ]

        await script(keys=["key"], args=["arg"])  # loaded
        expected = await asyncio.gather(*asked(plain), return_exceptions=True)
        got = await asyncio.gather(*asked(client), return_exceptions=True)
        assert [repr(r) for r in got] == [repr(r) for r in expected]
        assert got[4] == [("x", 1.5), ("y", 2.0)] and isinstance(got[8], ResponseError)
        assert isinstance(got[11], bytes) and got[12] == []
        # Alone, each its own batch: the same answers (a value, an error, the options).
        alone = [await asyncio.gather(c, return_exceptions=True) for c in (
            client.get("k"), client.get("h"), client.dump("k"), client.mget([]))]
        assert [repr(r) for [r] in alone] == [repr(expected[i]) for i in (1, 8, 11, 12)]
    finally:
        await client.aclose()
        await plain.aclose()


async def test_a_batch_whose_replies_stall_times_out_and_leaves_no_reply_behind(tmp_path: Path) -> None:
    """One timeout covers a batch's read: a server that stops answering fails the batch
    after the connection's timeout, and its late replies reach nobody."""
    server = PrivateRedis(tmp_path)
    pool = BlockingConnectionPool.from_url(
        server.url, max_connections=1, socket_timeout=0.5, decode_responses=True, retry=Retry(NoBackoff(), 0)
    )
    client = CoalescingRedis(connection_pool=pool)
    try:
        await asyncio.gather(client.set("a", "1"), client.set("b", "2"))
        server.proc.send_signal(signal.SIGSTOP)
        started = time.monotonic()
        try:
            stalled = await asyncio.gather(client.get("a"), client.get("b"), return_exceptions=True)
        finally:
            server.proc.send_signal(signal.SIGCONT)
        waited = time.monotonic() - started
        assert all(isinstance(r, RedisTimeoutError) for r in stalled), stalled
        assert 0.4 < waited < 3, waited
        # The one connection was dropped: the next batch reads its own replies.
        assert await asyncio.gather(client.get("b"), client.get("a"), client.get("none")) == ["2", "1", None]
    finally:
        await client.aclose()
        server.kill()


SLOW_SCRIPT = """
local began = redis.call('TIME')
repeat
  local now = redis.call('TIME')
until (now[1] - began[1]) * 1000000 + (now[2] - began[2]) > 200000
return ARGV[1]
"""
"""Answers after 0.2 s: a command the kept connection waits on meanwhile."""


def kept(url: str, name: str, limit: int = 8, keep: int = 1) -> tuple[CoalescingRedis, list[int]]:
    """A client that keeps `keep` connections, and how many times it took one from its
    pool (no retries: a command fails at its first error)."""
    pool = BlockingConnectionPool.from_url(
        url, max_connections=limit, client_name=name, decode_responses=True, retry=Retry(NoBackoff(), 0)
    )
    taken = [0]
    take = pool.get_connection

    async def counted(*args: Any, **kwargs: Any) -> Any:
        taken[0] += 1
        return await take(*args, **kwargs)

    pool.get_connection = counted  # type: ignore[method-assign]
    return CoalescingRedis(connection_pool=pool, keep_connections=keep), taken


async def test_batches_one_after_another_take_no_connection_from_the_pool(redis_url: str) -> None:
    client, taken = kept(redis_url, "kept")
    try:
        for i in range(20):  # alone, each its own batch
            assert await client.set(f"k{i}", i) is True
        assert await asyncio.gather(*(client.get(f"k{i}") for i in range(20))) == [str(i) for i in range(20)]
        assert await client.get("nope") is None
        assert taken[0] == 1  # the first batch's, kept since
        # A batch sent while the kept connection waits for a reply goes on another one.
        slow = asyncio.create_task(client.eval(SLOW_SCRIPT, 0, "slow"))
        while client._idle:  # the slow one holds the kept connection
            await asyncio.sleep(0)
        assert await client.get("k3") == "3"
        assert await slow == "slow"
        assert taken[0] == 2
        assert await connections_named(redis_url, "kept") == 2
    finally:
        await client.aclose()


async def test_batches_that_overlap_each_take_a_kept_connection(redis_url: str) -> None:
    """A client keeping three: three batches on their way at once each hold a kept
    connection and a fourth takes one from the pool (and gives it back); from then on,
    three at once take none from the pool."""
    client, taken = kept(redis_url, "three", keep=3)

    async def overlapping(n: int) -> list[str]:
        calls = []
        for i in range(n):  # each its own batch, on its way before the next is made
            calls.append(asyncio.create_task(client.eval(SLOW_SCRIPT, 0, str(i))))
            while len(client._batches) <= i:
                await asyncio.sleep(0)
        return list(await asyncio.gather(*calls))

    try:
        assert await overlapping(4) == ["0", "1", "2", "3"]
        assert taken[0] == 4
        assert await overlapping(3) == ["0", "1", "2"]
        assert taken[0] == 4
        assert await connections_named(redis_url, "three") == 4
    finally:
        await client.aclose()


async def test_a_kept_connection_the_server_dropped_is_opened_again_before_it_is_used(redis_url: str) -> None:
    """As the pool checks a connection it hands out (no retry needed)."""
    client, taken = kept(redis_url, "dropped")
    admin = Redis.from_url(redis_url, decode_responses=True)
    try:
        assert await client.set("k", "v") is True
        [conn] = [c for c in await admin.client_list() if c.get("name") == "dropped"]
        await admin.client_kill_filter(_id=conn["id"])
        assert await client.get("k") == "v"  # opened again, not failed
        assert await asyncio.gather(client.get("k"), client.get("nope")) == ["v", None]
        assert taken[0] == 1
    finally:
        await client.aclose()
        await admin.aclose()


async def test_a_small_pool_keeps_nothing_back(redis_url: str) -> None:
    """A commands pool under `KEEP_FROM` keeps no connection: with one, a command sent
    while another waits for its reply takes the same connection once it is free."""
    from progresscast.config.settings import Settings
    from progresscast.store.connections import KEEP_FROM, KEEP_MOST

    small = Settings.model_validate({"store": {"maxConnections": KEEP_FROM - 1}})
    default, below = connect(redis_url, Settings()), connect(redis_url, small)
    assert (default._keeps, below._keeps) == (min(KEEP_MOST, 64 // KEEP_FROM), 0)
    await default.aclose()
    await below.aclose()
    client = connect(redis_url, Settings.model_validate({"store": {"maxConnections": 1}}))
    try:
        slow = asyncio.create_task(client.eval(SLOW_SCRIPT, 0, "slow"))
        while not client.connection_pool._in_use_connections:  # the slow one is on its way
            await asyncio.sleep(0)
        started = time.monotonic()
        assert await client.get("nope") is None
        assert time.monotonic() - started < 2  # not the pool's wait (5 s) for a kept connection
        assert await slow == "slow"
    finally:
        await client.aclose()


async def test_callers_that_find_a_script_missing_together_load_it_once(tmp_path: Path) -> None:
    """A fresh server (or one whose scripts were flushed) answers the first batch of a
    script's calls NOSCRIPT: its callers load the script once between them, then each
    gets its own reply."""
    server = PrivateRedis(tmp_path)
    client = CoalescingRedis.from_url(server.url, decode_responses=True)
    admin = Redis.from_url(server.url, decode_responses=True)
    try:
        script = client.register_script("return ARGV[1] .. KEYS[1]")
        for _ in range(2):  # a fresh server, then one whose scripts were flushed
            before = (await admin.info("commandstats")).get("cmdstat_script|load", {}).get("calls", 0)
            replies = await asyncio.gather(*(script(keys=[f"k{i}"], args=["v"]) for i in range(100)))
            assert replies == [f"vk{i}" for i in range(100)]
            loads = (await admin.info("commandstats"))["cmdstat_script|load"]["calls"] - before
            assert loads == 1
            await admin.script_flush()
    finally:
        await client.aclose()
        await admin.aclose()
        server.kill()


async def test_a_clusters_callers_that_find_a_script_missing_load_it_once(cluster: Any) -> None:
    """The same on a Redis Cluster (redis-py's `RedisCluster` has each caller load it)."""
    cluster.flush()
    for node in cluster.clients:
        node.script_flush()
    client = connect(cluster.url)

    def loads() -> int:
        return sum(node.info("commandstats").get("cmdstat_script|load", {}).get("calls", 0) for node in cluster.clients)

    try:
        script = client.register_script("return ARGV[1] .. KEYS[1]")
        before = loads()
        replies = await asyncio.gather(*(script(keys=[f"{{k}}{i}"], args=["v"]) for i in range(100)))
        assert replies == [f"v{{k}}{i}" for i in range(100)]
        assert loads() - before == len(cluster.clients)  # once, on every primary
    finally:
        await client.aclose()
        cluster.flush()
