"""`serve` as a separate process with every feature it runs here on — the gateway, a
Telegram bot (Bot API emulator), Slack (its emulator) and an A2A follower (a real
a2a-sdk agent) — while the Redis it uses is killed and started again: `serve` keeps
running, and once Redis is back a new write reaches both chats; what was written
before the kill is still there."""

from __future__ import annotations

import asyncio
import json
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis as sync_redis

from a2a_agent import Agent, status
from a2a_updates import ts
from conftest import redis_server_binary
from progresscast.agents.a2a.follow import agent_client
from progresscast.store.embedded import stop_embedded
from progresscast.testing import BotAPIEmulator, SlackAPIEmulator
from test_serve import TOKEN, environment

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

CHAT = 4242
CHANNEL = "C0TEST0001"


class RedisServer:
    """A redis-server on a free loopback port with its append-only file in `dir`;
    `kill` (SIGKILL) and `start` again on the same port and file."""

    def __init__(self, directory: Path) -> None:
        self.dir = directory
        self.dir.mkdir()
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        if self.port == 0:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                self.port = probe.getsockname()[1]
        args = [
            redis_server_binary(), "--port", str(self.port), "--bind", "127.0.0.1", "--dir", str(self.dir),
            "--appendonly", "yes", "--save", "", "--logfile", "redis.log",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        client = sync_redis.Redis(port=self.port, socket_connect_timeout=0.2)
        try:
            for _ in range(500):
                try:
                    if client.ping():
                        return
                except sync_redis.RedisError:
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"redis-server exited: {(self.dir / 'redis.log').read_text()}") from None
                    time.sleep(0.02)
            raise RuntimeError("redis-server did not answer")
        finally:
            client.close()

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}"


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path / "redis")
    server.start()
    yield server
    if server.proc is not None and server.proc.poll() is None:
        server.kill()


class Log:
    """Everything a process writes to stderr, read as it comes (a full pipe would block it)."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.lines: list[str] = []
        self.changed = asyncio.Event()
        self._reader = asyncio.create_task(self._read(proc))

    async def _read(self, proc: asyncio.subprocess.Process) -> None:
        assert proc.stderr is not None
        while raw := await proc.stderr.readline():
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self.changed.set()
        self.lines.append("(the process ended)")
        self.changed.set()

    @property
    def text(self) -> str:
        return "\n".join(self.lines[-80:])

    async def matching(self, pattern: str, timeout: float = 30, *, times: int = 1) -> re.Match[str]:
        """The `times`-th line matching `pattern`, once there is one."""
        async def find() -> re.Match[str]:
            while True:
                self.changed.clear()
                found = [m for m in (re.search(pattern, line) for line in self.lines) if m]
                if len(found) >= times:
                    return found[times - 1]
                if self._reader.done():
                    raise AssertionError(f"the process ended without {pattern!r} ({times}×):\n{self.text}")
                await self.changed.wait()

        return await asyncio.wait_for(find(), timeout)

    async def close(self) -> None:
        self._reader.cancel()
        await asyncio.gather(self._reader, return_exceptions=True)


async def rpc(base: str, method: str, params: dict) -> httpx.Response:
    async with httpx.AsyncClient(timeout=5) as client:
        return await client.post(
            f"{base}/v1/rpc", content=json.dumps({"method": method, "params": params}),
            headers={"Authorization": f"Bearer {TOKEN}"},
        )


async def put(base: str, session: str, markdown: str) -> httpx.Response:
    return await rpc(base, "progressCard.put", {"sessionKey": session, "markdown": markdown})


async def start_task(agent: Agent, context_id: str, label: str) -> asyncio.Task[None]:
    """Someone starts a task at the agent whose one status shows `label` as its plan."""
    import uuid

    from a2a.types import a2a_pb2 as pb

    agent.executor.script = [status(at=ts(len(agent.cutter.requests) + 1), plan=[{"label": label, "state": "active"}])]

    async def send() -> None:
        async with agent_client(agent.url) as client:
            message = pb.Message(
                message_id=str(uuid.uuid4()), role=pb.Role.ROLE_USER, parts=[pb.Part(text="go")], context_id=context_id
            )
            async for _ in client.send_message(pb.SendMessageRequest(message=message)):
                pass

    return asyncio.create_task(send())


async def watch(base: str, session: str, seen: list[str], connected: asyncio.Event) -> None:
    """A live page's event stream, open through the outage (every line it reads in `seen`)."""
    async with httpx.AsyncClient(timeout=httpx.Timeout(5, read=None)) as viewer:
        async with viewer.stream(
            "GET", f"{base}/v1/events?sessionKey={session}", headers={"Authorization": f"Bearer {TOKEN}"}
        ) as events:
            async for line in events.aiter_lines():
                seen.append(line)
                if line == ": connected":
                    connected.set()


async def test_serve_survives_its_redis_dying_and_coming_back(
    tmp_path: Path, redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.05")
    agent = await Agent([]).start()
    tasks: list[asyncio.Task[None]] = []
    async with BotAPIEmulator() as api, SlackAPIEmulator(channels=[CHANNEL]) as slack:
        text = f"""
[store]
url = "{redis_server.url}"
[gateway]
listen = "127.0.0.1:0"
[[gateway.tokens]]
token = "env:PROGRESSCAST_TOKEN"
scopes = ["operator.read", "operator.write"]
[channels.telegram]
token = "env:TELEGRAM_BOT_TOKEN"
apiBaseUrl = "{api.base_url}"
leaseSeconds = 2
allowedChats = [4242]
[channels.slack]
token = "env:SLACK_BOT_TOKEN"
signingSecret = "env:SLACK_SIGNING_SECRET"
apiBaseUrl = "{slack.base_url}"
allowedChannels = ["{CHANNEL}"]
[a2a]
pollSeconds = 0.1
backoffMaxSeconds = 0.5
[[a2a.agents]]
url = "{agent.url}"
contexts = ["ctx-*"]
"""
        path = tmp_path / "progresscast.toml"
        path.write_text(text)
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=environment(
                tmp_path / "home", PROGRESSCAST_TOKEN=TOKEN, TELEGRAM_BOT_TOKEN=api.token, SLACK_BOT_TOKEN=slack.token,
                SLACK_SIGNING_SECRET=slack.signing_secret, PROGRESSCAST_TIME_SCALE="0.05",
            ),
        )
        log = Log(proc)
        try:
            base = (await log.matching(r"gateway and web page on (http://\S+)")).group(1)
            await log.matching(r"Telegram adapter running as")
            await log.matching(r"Slack adapter running")
            await log.matching(r"A2A: following")

            def telegram_shows(*needles: str) -> bool:
                return all(any(n in m.text for m in api.chat(CHAT).visible()) for n in needles)

            def slack_shows(needle: str) -> bool:
                return any(needle in m.visible_text for m in slack.channel(CHANNEL).visible())

            api.send_user_message(CHAT, "/follow t-1")
            api.send_user_message(CHAT, "/follow ctx-live")
            answer = await slack.send_slash_command(f"{base}/slack/commands", "follow t-1", channel_id=CHANNEL)
            assert answer.status_code == 200, answer.text
            await api.wait_for(lambda: telegram_shows("Following agent:main:ctx-live"), 15)
            assert (await put(base, "t-1", "Card before the outage")).status_code == 200
            tasks.append(await start_task(agent, "ctx-live", "Task before the outage"))
            await api.wait_for(lambda: telegram_shows("Card before the outage", "Task before the outage"), 15)
            await slack.wait_for(lambda: slack_shows("Card before the outage"), 15)
            seen: list[str] = []
            connected = asyncio.Event()
            tasks.append(asyncio.create_task(watch(base, "t-1", seen, connected)))
            await asyncio.wait_for(connected.wait(), 10)

            redis_server.kill()
            # serve notices: its A2A follower asks Redis for its cursor every 0.1 s ...
            await log.matching(r"A2A agent: following its tasks failed", timeout=15)
            # ... and Redis stays away until the bot's lease (2 s) has run out: renewing
            # it failed three times, every third of its time.
            await log.matching(r"renewing the lease .* failed", timeout=15, times=4)
            assert proc.returncode is None, log.text
            redis_server.start()  # Redis comes back on the same port, from its file

            written = None
            for _ in range(300):
                try:
                    written = await put(base, "t-1", "Card after the outage")
                except httpx.HTTPError:
                    written = None
                if written is not None and written.status_code == 200:
                    break
                await asyncio.sleep(0.05)
            assert written is not None and written.status_code == 200, written and written.text
            assert written.json()["result"]["revision"] == 2  # the write before the kill is still there
            tasks.append(await start_task(agent, "ctx-live", "Task after the outage"))

            await log.matching(r"took its lease \(fence 2\)", timeout=30)  # the bot took it again
            await api.wait_for(lambda: telegram_shows("Card after the outage", "Task after the outage"), 30)
            await slack.wait_for(lambda: slack_shows("Card after the outage"), 30)
            # The page open through the outage hears of the write after it.
            await api.wait_for(lambda: any(line.startswith("data: ") and json.loads(line[6:]).get("revision") == 2
                                           for line in seen), 15)
            assert proc.returncode is None, log.text
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            if proc.returncode is None:
                proc.send_signal(signal.SIGTERM)
                code = await asyncio.wait_for(proc.wait(), 30)
                assert code == 0, log.text
            await log.close()
            await agent.stop()


async def test_a_refused_slack_token_ends_serve_with_one_line(tmp_path: Path) -> None:
    """Supervision retries failures, not mistakes: a token Slack refuses is a config error."""
    async with SlackAPIEmulator(channels=[CHANNEL]) as slack:
        path = tmp_path / "progresscast.toml"
        path.write_text(f"""
[gateway]
listen = "127.0.0.1:0"
[channels.slack]
token = "xoxb-not-the-token"
signingSecret = "s3cret"
apiBaseUrl = "{slack.base_url}"
""")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=environment(tmp_path / "home"),
        )
        try:
            _, err = await asyncio.wait_for(proc.communicate(), 60)
        finally:
            stop_embedded(tmp_path / "home")
    lines = err.decode().splitlines()
    mistakes = [line for line in lines if line.startswith("progresscast:")]
    assert proc.returncode == 2 and not any("Traceback" in line for line in lines), err.decode()
    assert mistakes == ["progresscast: channels.slack.token: Slack says invalid_auth"], err.decode()
