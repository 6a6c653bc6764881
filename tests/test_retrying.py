"""The one retry loop (`backoff.Retrying`): failures of the named kinds are waited out
with the policy's growing delay, a success starts the count again, other failures and
refusals are raised, a cancel ends it, and an outage is logged once per interval."""

from __future__ import annotations

import asyncio
import logging

import pytest

from progresscast.backoff import Backoff, Retrying, retrying
from progresscast.failure_log import FailureLog

FAST = Backoff(base=0.001, cap=0.004)


class Refused(Exception):
    pass


async def test_failures_are_retried_until_success_and_a_success_starts_the_count_again() -> None:
    results = iter([ConnectionError("down"), ConnectionError("down"), "one", ConnectionError("down"), "two"])

    async def attempt() -> str:
        result = next(results)
        if isinstance(result, Exception):
            raise result
        return result

    retry = Retrying("reading", log=logging.getLogger("test"), backoff=FAST)
    assert await retry.run(attempt, retry_on=(ConnectionError,)) == "one"
    assert retry.in_a_row == 0
    assert await retry.run(attempt, retry_on=(ConnectionError,)) == "two"
    assert retry.in_a_row == 0


async def test_the_wait_grows_with_the_failures_in_a_row(monkeypatch: pytest.MonkeyPatch) -> None:
    waits: list[float] = []
    real_sleep = asyncio.sleep

    async def sleep(seconds: float) -> None:
        waits.append(seconds)
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", sleep)
    calls = 0

    async def attempt() -> None:
        nonlocal calls
        calls += 1
        if calls <= 4:
            raise ConnectionError("down")

    await retrying(attempt, "reading", log=logging.getLogger("test"), backoff=Backoff(base=1.0, cap=4.0))
    assert waits == [1.0, 2.0, 4.0, 4.0]


async def test_refusals_and_other_failures_are_raised_at_once() -> None:
    calls = 0

    async def refused() -> None:
        nonlocal calls
        calls += 1
        raise Refused("bad token")

    with pytest.raises(Refused):
        await retrying(refused, "start", log=logging.getLogger("test"), backoff=FAST, give_up=(Refused,))
    with pytest.raises(Refused):
        await retrying(refused, "start", log=logging.getLogger("test"), backoff=FAST, retry_on=(ConnectionError,))
    assert calls == 2


async def test_tries_gives_up_after_that_many_failures_in_a_row() -> None:
    calls = 0

    async def down() -> None:
        nonlocal calls
        calls += 1
        raise ConnectionError("down")

    retry = Retrying("probing", log=logging.getLogger("test"), backoff=FAST)
    with pytest.raises(ConnectionError):
        await retry.run(down, retry_on=(ConnectionError,), tries=3)
    assert calls == 3 and retry.in_a_row == 0


async def test_a_cancel_ends_the_loop() -> None:
    async def down() -> None:
        raise ConnectionError("down")

    task = asyncio.create_task(retrying(down, "reading", log=logging.getLogger("test"), backoff=FAST))
    await asyncio.sleep(0.05)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_an_outage_is_one_line_per_interval_for_every_loop_sharing_a_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, "test")
    shared = FailureLog(logging.getLogger("test"), interval=60)
    left = {"shard-0": 5, "shard-1": 5}

    async def read(shard: str) -> None:
        if left[shard]:
            left[shard] -= 1
            raise ConnectionError(f"{shard}: connection refused")

    for shard in left:
        retry = Retrying("read failed", log=shared, backoff=FAST)
        await retry.run(lambda shard=shard: read(shard))  # type: ignore[misc]
    lines = [r.getMessage() for r in caplog.records if "read failed" in r.getMessage()]
    assert len(lines) == 1 and "retrying in" in lines[0]
