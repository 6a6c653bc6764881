"""The supervisor every long-running task of `serve` runs under: a failure is logged
once per kind and interval, the task starts again after the one backoff policy's
wait, its siblings go on; a configuration mistake and a cancel still end it."""

from __future__ import annotations

import asyncio
import itertools
import logging

import pytest
from redis.exceptions import ConnectionError as RedisConnectionError

from progresscast.backoff import Backoff
from progresscast.config.errors import ConfigError
from progresscast.failure_log import FailureLog
from progresscast.supervise import spawn, supervise

FAST = Backoff(base=0.01, cap=0.05)


async def test_a_failing_task_starts_again_and_its_sibling_goes_on(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "test")
    failures = FailureLog(logging.getLogger("test"), interval=60)
    runs = 0
    ticks = 0

    async def flaky() -> None:
        nonlocal runs
        runs += 1
        if runs < 5:
            raise RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    async def sibling() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0.001)

    async with asyncio.timeout(10):
        steady = asyncio.create_task(sibling())
        try:
            async with asyncio.TaskGroup() as group:
                group.create_task(supervise(flaky, "the flaky task", failures=failures, backoff=FAST))
            assert not steady.done()
        finally:
            steady.cancel()
    assert runs == 5 and ticks > 0
    lines = [r.getMessage() for r in caplog.records]
    # Four failures of one kind within the interval: one line.
    assert len(lines) == 1 and lines[0].startswith("the flaky task failed (ConnectionError: 'Error 111 connecting"), lines


async def test_failures_in_a_row_back_off_by_the_one_policy() -> None:
    loop = asyncio.get_running_loop()
    starts: list[float] = []

    async def failing() -> None:
        starts.append(loop.time())
        if len(starts) < 5:
            raise RuntimeError("again")

    await asyncio.wait_for(supervise(failing, "failing", backoff=Backoff(base=0.05, cap=0.2)), 10)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    # 0.05, 0.1, 0.2, then the cap
    for gap, want in zip(gaps, [0.05, 0.1, 0.2, 0.2], strict=True):
        assert want <= gap < want + 1.0, gaps


async def test_a_configuration_mistake_is_not_retried() -> None:
    runs = 0

    async def refused() -> None:
        nonlocal runs
        runs += 1
        raise ConfigError("channels.telegram.token: the Bot API refused the bot token")

    with pytest.raises(ConfigError):
        await asyncio.wait_for(supervise(refused, "the bot", backoff=FAST), 5)

    async def grouped() -> None:  # from inside a task group, as the adapters raise it
        nonlocal runs
        runs += 1
        async with asyncio.TaskGroup() as group:
            group.create_task(refused())

    with pytest.raises(ExceptionGroup):
        await asyncio.wait_for(supervise(grouped, "the bots", backoff=FAST), 5)
    assert runs == 3


async def test_a_cancel_ends_it_even_while_waiting_to_start_again() -> None:
    started = asyncio.Event()

    async def failing() -> None:
        started.set()
        raise RuntimeError("again")

    task = spawn(failing, "failing", backoff=Backoff(base=30, cap=30))
    await asyncio.wait_for(started.wait(), 5)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)


async def test_a_task_that_returns_is_done() -> None:
    runs = 0

    async def once() -> None:
        nonlocal runs
        runs += 1

    await asyncio.wait_for(supervise(once, "once", backoff=FAST), 5)
    assert runs == 1
