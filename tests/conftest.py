"""Shared fixtures: a real Redis for every store test.

Each store test runs against the embedded Redis (fresh PROGRESSCAST_HOME per test)
and, when REDIS_URL is set, against that server too (database 15, flushed per test).
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis as sync_redis
from redis.asyncio import Redis

from progresscast.embedded import ensure_embedded, stop_embedded
from progresscast.store import CardStore

TEST_DB = 15
BACKENDS = ["embedded"] + (["server"] if os.environ.get("REDIS_URL") else [])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if "server" not in BACKENDS:
        terminalreporter.write_line(
            "REDIS_URL is not set: the store tests against a Redis server (the [server] variants) were not "
            "collected; only the embedded Redis was tested. Run `REDIS_URL=redis://127.0.0.1:6379 make test` "
            "for both (database 15 is flushed).",
            yellow=True,
        )


def server_url() -> str:
    """REDIS_URL pointed at the test database."""
    base = os.environ["REDIS_URL"].rstrip("/")
    head, _, tail = base.rpartition("/")
    if tail.isdigit() and head.count("/") >= 2:
        base = head
    return f"{base}/{TEST_DB}"


@pytest.fixture(params=BACKENDS)
def redis_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "server":
        url = server_url()
        client = sync_redis.Redis.from_url(url)
        client.flushdb()
        yield url
        client.flushdb()
        client.close()
    else:
        home = tmp_path / "home"
        url = ensure_embedded(home)
        yield url
        stop_embedded(home)


@pytest.fixture
async def redis(redis_url: str) -> AsyncIterator[Redis]:
    client = Redis.from_url(redis_url, decode_responses=True)
    yield client
    await client.aclose()


@pytest.fixture
def store(redis: Redis) -> CardStore:
    return CardStore(redis)
