"""Several `serve` processes with the same bots: one holds each bot's lease, the others
stand by and take over. Real processes, a real Redis, the Bot API emulator; each process
talks to the emulator through its own base URL, so every call is known by its caller."""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import os
import re
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import Any

import httpx
import pytest

from progresscast.channels.state.ids import DraftKey
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.telegram.follows import TelegramState
from progresscast.testing import BotAPIEmulator
from progresscast.testing._telegram import PACED
from progresscast.timescale import ENV as TIME_SCALE_ENV

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

SCALE = 0.2
"""Telegram's pacing at 1/5 of real time, in the emulator and in every serve (a private
chat: one call per 200 ms) — for the tests that do not measure pacing."""
REAL_SPEED = 1.0
"""The tests that check each chat's pacing run at Telegram's own speed: how much later
one call reaches the emulator than another (the way through a loaded loop on a small
machine) does not shrink with the time scale, and at 1/5 of it that alone came near an
interval."""
ARRIVAL_JITTER = 0.35
"""Seconds two calls of one process may arrive closer by than they left (each is spaced
from the moment the one before left). A call that ignores its pacing arrives within a
few milliseconds. Across a handover (the last call of one holder, the first of the
next) the interval must hold in full. (0.25 s was exceeded by 20 ms when two test
processes shared the two cores with three serves: a first send stamped late.)"""
IN_FLIGHT_AT_RESUME = 0.25
"""Seconds after SIGCONT within which a call a paused process had already begun may arrive."""
CONNECTIONS = 16
"""The adapter's connections to the Bot API (`connection_pool_size`): at most that many
calls can be on their way at once."""
TOKEN = "gw-token-for-tests"
BOT_A = "111111:first-bot-token"
BOT_B = "222222:second-bot-token"


class Proc:
    """One `serve` process; its log is read all along (a full pipe would stall it)."""

    def __init__(self, name: str, proc: asyncio.subprocess.Process) -> None:
        self.name = name
        self.proc = proc
        self.lines: list[str] = []
        self.changed = asyncio.Event()
        self.reader = asyncio.create_task(self._read())
        self.base = ""

    async def _read(self) -> None:
        assert self.proc.stderr is not None
        while raw := await self.proc.stderr.readline():
            self.lines.append(raw.decode(errors="replace").rstrip("\n"))
            self.changed.set()
            self.changed = asyncio.Event()
        self.changed.set()

    def found(self, pattern: str) -> re.Match[str] | None:
        return next((m for line in self.lines if (m := re.search(pattern, line))), None)

    async def line(self, pattern: str, timeout: float = 30) -> re.Match[str]:
        deadline = time.monotonic() + timeout
        while (found := self.found(pattern)) is None:
            if self.reader.done() or time.monotonic() > deadline:
                raise AssertionError(f"{self.name} shows no {pattern!r}:\n" + "\n".join(self.lines[-40:]))
            with_timeout = max(0.01, min(0.5, deadline - time.monotonic()))
            try:
                await asyncio.wait_for(self.changed.wait(), with_timeout)
            except TimeoutError:
                pass
        return found

    @property
    def holds(self) -> bool:
        """Its last lease line says it holds a lease (one bot)."""
        events = [line for line in self.lines if "took its lease" in line or "lost its lease" in line]
        return bool(events) and "took its lease" in events[-1]


@pytest.fixture
def scale() -> float:
    """The time scale of a test (a test sets its own with `parametrize("scale", …)`)."""
    return SCALE


@pytest.fixture
def scaled(monkeypatch: pytest.MonkeyPatch, scale: float) -> None:
    monkeypatch.setenv(TIME_SCALE_ENV, str(scale))


@pytest.fixture
async def serves(tmp_path: Path, redis_url: str, scale: float, scaled: None) -> AsyncIterator[Callable[..., Any]]:
    procs: list[Proc] = []
    count = itertools.count()

    async def start(api: BotAPIEmulator, telegram: str, name: str | None = None) -> Proc:
        name = name or f"p{next(count)}"
        path = tmp_path / f"{name}.toml"
        text = f'[store]\nurl = "{redis_url}"\n[gateway]\nlisten = "127.0.0.1:0"\n'
        text += f'[[gateway.tokens]]\ntoken = "{TOKEN}"\nscopes = ["operator.read"]\n'
        path.write_text(text + telegram.replace("{base}", api.base_url_for(name)))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PROGRESSCAST_", "TELEGRAM_"))}
        env.update(PROGRESSCAST_HOME=str(tmp_path / "home"), **{TIME_SCALE_ENV: str(scale)})
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=env,
        )
        started = Proc(name, proc)
        procs.append(started)
        started.base = (await started.line(r"gateway and web page on (http://\S+)")).group(1)
        return started

    yield start
    for p in procs:
        if p.proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                p.proc.send_signal(signal.SIGCONT)
            p.proc.kill()
            await p.proc.wait()
        p.reader.cancel()


def one_bot(api: BotAPIEmulator, lease_seconds: float) -> str:
    return (
        f'[channels.telegram]\ntoken = "{api.token}"\napiBaseUrl = "{{base}}"\nleaseSeconds = {lease_seconds}\n'
    )


async def holder_of(redis: Any, bot_id: str, procs: list[Proc]) -> Proc | None:
    value = await redis.get(keys.tg_lease(bot_id))
    if value is None:
        return None
    pid = int(value.split(":")[1])
    return next(p for p in procs if p.proc.pid == pid)


async def wait_until(predicate: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)


def step(session: int, n: int) -> CardInput:
    return CardInput.parse({"plan": [{"step": f"w{n} of s{session}", "status": "in_progress"}]})


async def follow_sessions(redis: Any, sessions: range, namespace: str = keys.TG) -> None:
    """Chat `i` follows session `s<i>` (what /follow stores)."""
    state = TelegramState(redis, namespace)
    for i in sessions:
        await state.follows.add(DraftKey(i, 0, Owner("main", f"s{i}")))


def check_pacing(api: BotAPIEmulator, chats: range, scale: float, in_flight: Sequence[Any] = ()) -> None:
    """No private chat got two calls within its interval (1 s, scaled), and no call was
    refused with 429. `in_flight`: calls a paused holder had sent before its pause, which
    reach the emulator when it resumes — no one knew when they would arrive, so the
    interval to its neighbours is not theirs to hold (429s still count)."""
    assert scale == REAL_SPEED, "pacing is measured at Telegram's own speed (see REAL_SPEED)"
    interval = 1.0 * scale
    for chat in chats:
        calls = [c for c in api.calls_for(chat) if c.method in PACED]
        close = [
            (round(b.at - a.at, 4), a.instance, a.method, a.status, b.instance, b.method, b.status)
            for a, b in itertools.pairwise(calls)
            if b.at - a.at < interval - (ARRIVAL_JITTER if a.instance == b.instance else 0.0)
            and not any(c is a or c is b for c in in_flight)
        ]
        assert not close, f"chat {chat}: calls only {close} s apart"
    refused = [c for c in api.calls if c.status == 429]
    assert not refused, "the emulator answered 429: " + "; ".join(refusal(api, c, scale) for c in refused[:3])


def refusal(api: BotAPIEmulator, call: Any, scale: float) -> str:
    """A 429, with what the bot sent in the (scaled) second before it."""
    window = [c for c in api.calls if call.at - scale <= c.at < call.at and c.method in PACED]
    to_chat = [c for c in window if c.chat_id == call.chat_id]
    by = {name: sum(c.instance == name for c in window) for name in sorted({str(c.instance) for c in window})}
    return (
        f"{call.method} to chat {call.chat_id} by {call.instance} over the {call.limit} limit, after "
        f"{len(window)} paced calls in {scale} s ({len(to_chat)} to that chat; by {by})"
    )


def check_one_draft_each(api: BotAPIEmulator, chats: range, newest: Callable[[int], str], token: str | None = None):
    for chat in chats:
        sends = [c for c in api.calls_for(chat, "sendMessage", token=token) if c.ok]
        shown = api.chat(chat, token=token).texts()
        assert len(sends) == 1 and len(shown) == 1, f"chat {chat}: {len(sends)} sends, shows {shown}"
        assert newest(chat) in shown[0], f"chat {chat} shows {shown[0]!r}, not {newest(chat)!r}"


@pytest.mark.realtime
@pytest.mark.parametrize("scale", [REAL_SPEED])
async def test_three_serves_one_bot_the_holder_killed_mid_run(serves: Any, redis_url: str, scale: float) -> None:
    # 50 chats: more calls a second than the bot's 30. The kill after 7 rounds (by then
    # the first holder sent every chat's draft and edits), then rounds until the lease
    # (3 s) passes; the next holder edits every chat.
    sessions, writes_each, kill_after = range(1, 51), 10, 7
    redis = connect(redis_url)
    try:
        await follow_sessions(redis, sessions)
        async with BotAPIEmulator() as api:
            procs = list(await asyncio.gather(*(serves(api, one_bot(api, 3)) for _ in range(3))))  # side by side
            bot_id = api.token.split(":")[0]
            first = await wait_until(lambda: holder_of(redis, bot_id, procs), 15, "a holder")
            for p in procs:
                if p is not first:
                    await p.line(rf"bot {bot_id}: standing by; its lease is held by \S+:{first.proc.pid}:")
            store = CardStore(redis)
            killed_at = 0.0
            for n in range(writes_each):
                for i in sessions:
                    await store.put(Owner("main", f"s{i}"), step(i, n))
                if n == kill_after:
                    first.proc.kill()  # SIGKILL, mid-run: nothing released
                    await first.proc.wait()
                    killed_at = time.monotonic()
                await asyncio.sleep(0.4)

            def converged() -> bool:
                return all(
                    any(f"w{writes_each - 1} of s{i}" in t for t in api.chat(i).texts()) for i in sessions
                )

            await wait_until(converged, 30, "every chat shows its newest card")
            second = await holder_of(redis, bot_id, procs)
            assert second is not None and second is not first
            after = [c for c in api.calls if c.at > killed_at and c.method in ("editMessageText", "sendMessage")]
            assert after and all(c.instance == second.name for c in after)
            assert after[0].at - killed_at <= 10, f"took over after {after[0].at - killed_at:.1f} s"
            assert any(c.instance == first.name and c.method == "editMessageText" for c in api.calls)
            check_one_draft_each(api, sessions, lambda i: f"w{writes_each - 1} of s{i}")
            check_pacing(api, sessions, scale)
            # The third one still stands by, and knows who holds it now.
            third = next(p for p in procs if p not in (first, second))
            await third.line(rf"standing by; its lease is held by \S+:{second.proc.pid}:")
    finally:
        await redis.aclose()


@pytest.mark.realtime
@pytest.mark.parametrize("scale", [REAL_SPEED])
async def test_a_paused_holder_makes_no_call_once_its_lease_passed(serves: Any, redis_url: str, scale: float) -> None:
    sessions = range(1, 21)
    redis = connect(redis_url)
    try:
        await follow_sessions(redis, sessions)
        async with BotAPIEmulator() as api:
            procs = list(await asyncio.gather(*(serves(api, one_bot(api, 1)) for _ in range(2))))  # side by side
            bot_id = api.token.split(":")[0]
            old = await wait_until(lambda: holder_of(redis, bot_id, procs), 15, "a holder")
            new = next(p for p in procs if p is not old)
            store = CardStore(redis)
            n = itertools.count()

            async def writes(seconds: float) -> int:
                end = time.monotonic() + seconds
                while True:
                    last = next(n)
                    for i in sessions:
                        await store.put(Owner("main", f"s{i}"), step(i, last))
                    if time.monotonic() > end:
                        return last
                    await asyncio.sleep(0.05)

            await writes(1.5)
            old.proc.send_signal(signal.SIGSTOP)
            await new.line(rf"bot {bot_id}: took its lease", timeout=10)
            await writes(1.0)  # the new holder edits; the old one has work waiting meanwhile
            old.proc.send_signal(signal.SIGCONT)
            resumed = time.monotonic()
            last = await writes(2.0)
            await old.line(rf"bot {bot_id}: lost its lease to \S+:{new.proc.pid}:", timeout=10)
            await wait_until(
                lambda: all(any(f"w{last} of s{i}" in t for t in api.chat(i).texts()) for i in sessions),
                15, "every chat shows its newest card",
            )
            # A call already past its last lease check when SIGSTOP came leaves at SIGCONT:
            # Telegram takes no fencing token, so no client can hold that one back. It
            # arrives at once; nothing the old holder decides after it resumed goes out.
            late_calls = [c for c in api.calls if c.instance == old.name and c.at > resumed]
            late = [(c.method, c.chat_id, round(c.at - resumed, 3)) for c in late_calls]
            in_flight = [call for call in late if call[2] <= IN_FLIGHT_AT_RESUME]
            assert late == in_flight and len(in_flight) <= CONNECTIONS, f"the paused holder called: {late}"
            # The old one's poll from before the pause was ended by the new one's (409); the
            # new one's was never ended by a poll of the old one.
            assert not [c for c in api.calls if c.status == 409 and c.instance == new.name], "two pollers"
            check_one_draft_each(api, sessions, lambda i: f"w{last} of s{i}")
            check_pacing(api, sessions, scale, in_flight=late_calls)  # (all of them in flight: asserted above)
    finally:
        await redis.aclose()


async def test_a_graceful_stop_hands_the_lease_over_at_once(serves: Any, redis_url: str) -> None:
    redis = connect(redis_url)
    try:
        await follow_sessions(redis, range(1, 2))
        async with BotAPIEmulator() as api:
            procs = [await serves(api, one_bot(api, 60)) for _ in range(2)]
            bot_id = api.token.split(":")[0]
            old = await wait_until(lambda: holder_of(redis, bot_id, procs), 15, "a holder")
            new = next(p for p in procs if p is not old)
            old.proc.send_signal(signal.SIGTERM)
            stopped = time.monotonic()
            await new.line(rf"bot {bot_id}: took its lease", timeout=10)
            assert time.monotonic() - stopped < 5  # not the lease's 60 s
            assert await old.proc.wait() == 0
            await CardStore(redis).put(Owner("main", "s1"), step(1, 1))
            await wait_until(lambda: any("w1 of s1" in t for t in api.chat(1).texts()), 10, "the card")
            assert {c.instance for c in api.calls_for(1)} == {new.name}
    finally:
        await redis.aclose()


def two_bots(api: BotAPIEmulator) -> str:
    return (
        f'[channels.telegram]\ntoken = "{BOT_A}"\napiBaseUrl = "{{base}}"\nleaseSeconds = 2\nallowedChats = [1, 2]\n'
        f'[[channels.telegram.bots]]\ntoken = "{BOT_B}"\nallowedChats = [3, 4]\n'
    )


async def follow_by_command(api: BotAPIEmulator, token: str, chat: int, session: str) -> None:
    update = api.send_user_message(chat, f"/follow {session}", token=token)
    sent = update["message"]["message_id"]
    await api.wait_for(lambda: any(m.message_id > sent for m in api.chat(chat, token=token).visible()), 15)


async def test_two_bots_in_one_config_each_serve_their_own_chats(serves: Any, redis_url: str) -> None:
    redis = connect(redis_url)
    try:
        async with BotAPIEmulator(token=BOT_A) as api:
            api.add_bot(BOT_B)
            proc = await serves(api, two_bots(api))
            for bot in ("111111", "222222"):
                await proc.line(rf"bot {bot}: took its lease")
            for token, chats in ((BOT_A, (1, 2)), (BOT_B, (3, 4))):
                for chat in chats:
                    await follow_by_command(api, token, chat, f"s{chat}")
            # Bot B refuses bot A's chats: allowedChats is its own.
            api.send_user_message(1, "/follow s1", token=BOT_B)
            await api.wait_for(lambda: api.chat(1, token=BOT_B).texts(), 15)
            refusal = api.chat(1, token=BOT_B).texts()[0]
            assert "not enabled for this chat" in refusal and "channels.telegram.bots[0].allowedChats" in refusal
            store = CardStore(redis)
            for chat in (1, 2, 3, 4):
                await store.put(Owner("main", f"s{chat}"), step(chat, 5))
            for token, chats in ((BOT_A, (1, 2)), (BOT_B, (3, 4))):
                for chat in chats:
                    await api.wait_for(
                        lambda c=chat, t=token: any("w5 of s" in x for x in api.chat(c, token=t).texts()), 15
                    )
            for chat in (1, 2, 3, 4):
                tokens = {c.token for c in api.calls_for(chat) if c.method == "editMessageText" or
                          (c.method == "sendMessage" and "w5" in str(c.params.get("text")))}
                assert tokens == {BOT_A if chat < 3 else BOT_B}, (chat, tokens)
            # Each bot's state in its own namespace: the first keeps the keys it always had.
            assert set(await redis.smembers(keys.channel_destinations("tg"))) == {"1", "2"}
            assert set(await redis.smembers(keys.channel_destinations("tg-222222"))) == {"3", "4"}
            async with httpx.AsyncClient(timeout=5) as client:
                health = (await client.get(f"{proc.base}/healthz")).json()
                page = (await client.get(f"{proc.base}/metrics")).text
            assert {b: v["here"] for b, v in health["telegramLease"].items()} == {"111111": True, "222222": True}
            assert {"telegram", "telegram-222222"} <= set(health["consumerLag"])
            assert 'progresscast_lease_held{bot="222222"} 1.0' in page
    finally:
        await redis.aclose()


async def test_two_serves_two_bots_every_chat_is_served(serves: Any, redis_url: str) -> None:
    redis = connect(redis_url)
    try:
        await follow_sessions(redis, range(1, 3), "tg")
        await follow_sessions(redis, range(3, 5), "tg-222222")
        async with BotAPIEmulator(token=BOT_A) as api:
            api.add_bot(BOT_B)
            procs = [await serves(api, two_bots(api)) for _ in range(2)]
            holders = {
                bot: await wait_until(lambda b=bot: holder_of(redis, b, procs), 15, f"a holder of {bot}")
                for bot in ("111111", "222222")
            }
            store = CardStore(redis)
            for chat in (1, 2, 3, 4):
                await store.put(Owner("main", f"s{chat}"), step(chat, 1))
            for token, chats in ((BOT_A, (1, 2)), (BOT_B, (3, 4))):
                for chat in chats:
                    await api.wait_for(
                        lambda c=chat, t=token: any("w1 of s" in x for x in api.chat(c, token=t).texts()), 15
                    )
                    callers = {c.instance for c in api.calls_for(chat, token=token)}
                    assert callers == {holders["111111" if token == BOT_A else "222222"].name}
            async with httpx.AsyncClient(timeout=5) as client:
                for p in procs:
                    health = (await client.get(f"{p.base}/healthz")).json()
                    for bot, seen in health["telegramLease"].items():
                        assert seen["here"] == (holders[bot] is p), (p.name, health)
                        assert seen["held"] and "holder" not in seen  # who holds it names a host and a pid
                    page = (await client.get(f"{p.base}/metrics")).text
                    for bot in holders:
                        held = "1.0" if holders[bot] is p else "0.0"
                        assert f'progresscast_lease_held{{bot="{bot}"}} {held}' in page, (p.name, bot)
    finally:
        await redis.aclose()
