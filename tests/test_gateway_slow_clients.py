"""Slow, idle and too many clients against a real served gateway: a request's head and
body each have a deadline, an idle connection is closed, connections past the cap are
refused at once, a client that goes away mid-body leaves no traceback — and everyone
else keeps getting answers. The last test runs `serve` at a low descriptor limit."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.config.settings import Settings
from progresscast.discord.adapter import DiscordAdapter
from progresscast.gateway.app import create_app
from progresscast.gateway.server import serve_app
from progresscast.http.server import address, bind
from progresscast.slack.adapter import SlackAdapter
from progresscast.store.embedded import stop_embedded
from test_gateway_rpc import gateway_settings
from test_gateway_sse import serving
from test_serve import GATEWAY, TOKEN, Serve, config, environment

HEAD = b"POST /v1/rpc HTTP/1.1\r\nHost: gw\r\n"
"""Half a request's head: no blank line after it."""


class Logged(logging.Handler):
    """Every record of uvicorn's and ours while it is attached (uvicorn's loggers do not
    reach the root logger, so pytest's caplog misses them)."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    @property
    def tracebacks(self) -> list[str]:
        return [self.format(r) for r in self.records if r.exc_info or "Exception in ASGI" in r.getMessage()]


@contextlib.contextmanager
def logged() -> Iterator[Logged]:
    """Attach after the server started: uvicorn's Config sets its loggers' handlers anew."""
    handler = Logged()
    loggers = [logging.getLogger(name) for name in ("uvicorn.error", "progresscast")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.removeHandler(handler)
            logger.setLevel(level)


async def connect(base: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return await asyncio.open_connection(host, int(port))


async def closed_by_server(reader: asyncio.StreamReader, timeout: float) -> bytes:
    """Everything the server sent until it closed the connection (raises on timeout)."""

    async def drain() -> bytes:
        got = b""
        try:
            while chunk := await reader.read(4096):
                got += chunk
        except ConnectionResetError:
            pass
        return got

    return await asyncio.wait_for(drain(), timeout)


async def healthz_within(base: str, bound: float) -> None:
    started = time.monotonic()
    async with httpx.AsyncClient(timeout=bound) as client:
        response = await client.get(f"{base}/healthz")
    assert response.status_code == 200 and time.monotonic() - started < bound


# -- the head, the body, idle ----------------------------------------------------------------


async def test_half_a_head_is_closed_at_the_head_deadline(redis: Redis) -> None:
    async with serving(redis, headerTimeout=0.5) as live:
        silent = [await connect(live.base) for _ in range(5)]
        halves = [await connect(live.base) for _ in range(15)]
        for _, writer in halves:
            writer.write(HEAD)
            await writer.drain()
        started = time.monotonic()
        for reader, _ in silent + halves:
            assert await closed_by_server(reader, 5) == b""
        assert 0.4 < time.monotonic() - started < 3
        await healthz_within(live.base, 2)


async def test_a_head_sent_after_an_answer_has_its_deadline_too(redis: Redis) -> None:
    async with serving(redis, headerTimeout=0.5, idleTimeout=30) as live:
        reader, writer = await connect(live.base)
        writer.write(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        writer.write(b"\r\n")  # bytes that start no request, then half of one
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        started = time.monotonic()
        await closed_by_server(reader, 5)
        assert time.monotonic() - started < 3


async def test_a_slow_body_is_cut_at_the_body_deadline_without_a_traceback(redis: Redis) -> None:
    async with serving(redis, bodyTimeout=1.0) as live:
        with logged() as log:
            reader, writer = await connect(live.base)
            writer.write(HEAD + b"Authorization: Bearer writer\r\nContent-Length: 100\r\n\r\n")
            started = time.monotonic()
            sent = 0
            # One byte every 0.2 s: each pause is short, the whole is 20 s.
            while not reader.at_eof() and sent < 100:
                writer.write(b" ")
                sent += 1
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(reader.read(4096), 0.2)
            assert sent < 100 and time.monotonic() - started < 3
            await healthz_within(live.base, 2)
        assert log.tracebacks == []


async def test_idle_keep_alive_connections_are_closed_while_others_get_answers(redis: Redis) -> None:
    async with serving(redis, idleTimeout=1) as live:
        idle = [await connect(live.base) for _ in range(50)]
        for _, writer in idle:
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n")
        for reader, _ in idle:
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 200")
        answered = time.monotonic()
        closing = asyncio.gather(*(closed_by_server(reader, 5) for reader, _ in idle))
        while not closing.done():
            await healthz_within(live.base, 1)
        await closing
        assert 0.9 < time.monotonic() - answered < 3


# -- the cap ----------------------------------------------------------------------------------


async def test_connections_past_the_cap_are_refused_at_once_and_answers_come_back(redis: Redis) -> None:
    async with serving(redis, maxConnections=20) as live:
        with logged() as log:
            held = [await connect(live.base) for _ in range(20)]
            for _, writer in held:
                writer.write(HEAD)
            refused = [await connect(live.base) for _ in range(30)]
            for reader, _ in refused:
                answer = await closed_by_server(reader, 2)
                assert answer == b"" or answer.startswith(b"HTTP/1.1 503"), answer
            for _, writer in held:
                writer.close()

            async def answered() -> None:
                while True:
                    with contextlib.suppress(httpx.HTTPError, AssertionError):
                        return await healthz_within(live.base, 1)

            await asyncio.wait_for(answered(), 5)
        refusals = [r for r in log.records if "gateway.maxConnections" in r.getMessage()]
        assert len(refusals) == 1, [r.getMessage() for r in refusals]  # one line for the flood


# -- a client that goes away mid-body ------------------------------------------------------------


def platform_settings() -> Settings:
    """The gateway's tokens, with Slack's and Discord's routes (their adapters are not run)."""
    settings = gateway_settings()
    platforms = Settings.model_validate(
        {
            "channels": {
                "slack": {"token": "xoxb-test", "signingSecret": "slack-signing-secret"},
                "discord": {"token": "discord-test", "applicationId": "123456789012345678", "publicKey": "00" * 32},
            }
        }
    )
    return settings.model_copy(update={"channels": platforms.channels})


@contextlib.asynccontextmanager
async def platforms(redis: Redis) -> AsyncIterator[str]:
    """A served gateway with Slack's and Discord's routes; its base URL."""
    settings = platform_settings()
    routes = [*SlackAdapter(settings, redis).routes(), *DiscordAdapter(settings, redis).routes()]
    sock = bind("127.0.0.1:0")
    started = asyncio.Event()
    task = asyncio.create_task(serve_app(create_app(settings, redis, routes=routes), sock, started=started))
    await asyncio.wait_for(started.wait(), 10)
    try:
        yield address(sock)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def until(condition: Callable[[], bool], timeout: float = 5) -> None:
    async def poll() -> None:
        while not condition():
            await asyncio.sleep(0.01)

    await asyncio.wait_for(poll(), timeout)


@pytest.mark.parametrize("path", ["/login", "/slack/commands", "/slack/events", "/discord/interactions", "/v1/rpc"])
async def test_a_client_gone_mid_body_leaves_no_traceback(redis: Redis, path: str) -> None:
    async with platforms(redis) as base:
        with logged() as log:
            reader, writer = await connect(base)
            head = f"POST {path} HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer writer\r\n"
            # Expect: the server says "100 Continue" once the route reads the body.
            writer.write(head.encode() + b"Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n")
            assert (await reader.readuntil(b"\r\n\r\n")).startswith(b"HTTP/1.1 100")
            writer.write(b"token=abc")
            await writer.drain()
            writer.close()
            await until(lambda: any("went away" in r.getMessage() for r in log.records) or bool(log.tracebacks))
            await healthz_within(base, 2)
        assert log.tracebacks == []
        assert len(log.records) == 1, [r.getMessage() for r in log.records]


# -- serve at its descriptor limit --------------------------------------------------------------

LIMIT = 256
AT_LIMIT = """
import resource, runpy, sys
resource.setrlimit(resource.RLIMIT_NOFILE, ({limit}, {limit}))
sys.argv = ["progresscast", "serve", "--config", {config!r}]
runpy.run_module("progresscast.cli", run_name="__main__")
"""


@pytest.fixture
async def serve_at_limit(tmp_path: Path) -> AsyncIterator[Serve]:
    """`serve` on its embedded Redis, with at most LIMIT open descriptors (soft and hard:
    raising the soft one at start changes nothing)."""
    home = tmp_path / "home"
    # A cap past the limit: the descriptors run out first.
    text = GATEWAY.format(listen="127.0.0.1:0").replace("[gateway]\n", "[gateway]\nmaxConnections = 5000\n")
    path = config(tmp_path, text)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", AT_LIMIT.format(limit=LIMIT, config=str(path)),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
        env=environment(home, PROGRESSCAST_TOKEN=TOKEN),
    )
    serve = Serve(proc)
    serve.base = (await serve.line_matching(r"gateway and web page on (http://\S+)")).group(1)
    try:
        yield serve
    finally:
        proc.kill()
        await proc.wait()
        stop_embedded(home)


async def test_a_flood_past_the_descriptor_limit_restarts_no_redis_and_serve_answers_after(
    serve_at_limit: Serve, tmp_path: Path
) -> None:
    serve = serve_at_limit
    home = tmp_path / "home"
    await healthz_within(serve.base, 2)
    redis_pid = (home / "redis.pid").read_text()
    flood: list[asyncio.StreamWriter] = []
    try:
        for _ in range(LIMIT + 100):
            with contextlib.suppress(OSError):
                _, writer = await connect(serve.base)
                writer.write(HEAD)
                flood.append(writer)
        # The watch of the embedded Redis has looked while no descriptor was left.
        found = await serve.line_matching(r"no descriptor left|embedded Redis .* (restarting|has stopped)", 20)
        assert "no descriptor left" in found.group(0), found.group(0)
    finally:
        for writer in flood:
            writer.close()
    ended = time.monotonic()

    async def answered() -> None:
        while True:
            with contextlib.suppress(httpx.HTTPError, AssertionError):
                return await healthz_within(serve.base, 2)

    await asyncio.wait_for(answered(), 15)
    assert time.monotonic() - ended < 15
    assert (home / "redis.pid").read_text() == redis_pid
    assert not any(re.search("restarting|has stopped|Traceback", line) for line in serve.lines), serve.lines
