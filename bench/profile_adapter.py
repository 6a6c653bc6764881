"""The Telegram adapter's own cost per Bot API call: CPU and Redis round trips.

The draft worker (`telegram_worker` on a python-telegram-bot `Bot`) runs in this process
and nothing else does; the Bot API emulator and the card writes run in a child process,
so this process's CPU time is the adapter's. N chats follow N sessions from the config
(as in figure 5, the bot-wide budget raised to 1,000 calls a second); phase 1 shows every
first draft, phase 2 writes every session once per round and waits for every edit.
Redis round trips are counted at the connection (one packed send: a command, a pipeline
or a transaction).

    .venv/bin/python -m bench.profile_adapter --chats 2000 --rounds 3 [--profile 30]
    .venv/bin/python -m bench.profile_adapter --chats 300 --rounds 4 --rate 150  (figure 8's pace)
    .venv/bin/python -m bench.profile_adapter --chats 10000 --rounds 0 --latency 0.15  (figure 5, answers far away)
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import multiprocessing
import pstats
import time
from collections import Counter
from multiprocessing.connection import Connection
from typing import Any

import telegram
import uvloop
from redis.asyncio.connection import AbstractConnection
from redis.utils import HIREDIS_AVAILABLE
from telegram.request import BaseRequest, HTTPXRequest

from progresscast import collector
from progresscast.config.settings import Settings
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.telegram.options import AdapterOptions
from progresscast.telegram.request import FencedRequest
from progresscast.telegram.worker import telegram_worker
from progresscast.testing import BotAPIEmulator, Pace

from ._common import bench_redis, no_collector_pauses
from .fleet import FIRST_CHAT, card_params, session

BOT_RATE = 1000.0


# --- the child: the emulator and the writes ------------------------------------------------


def _child(conn: Connection, url: str, chats: int, rate: float, latency: float) -> None:
    with no_collector_pauses():
        asyncio.run(_serve_emulator(conn, url, chats, rate, latency))


async def _serve_emulator(conn: Connection, url: str, chats: int, rate: float, latency: float) -> None:
    pace = Pace(burst=BOT_RATE, per_second=BOT_RATE)
    async with BotAPIEmulator(bot_pace=pace, latency=latency) as api:
        redis = connect(url)
        store = CardStore(redis)
        conn.send((api.token, api.base_url))
        while True:
            command, seq = await asyncio.to_thread(conn.recv)
            if command == "stop":
                break
            card = CardInput.parse(card_params(seq))
            sem = asyncio.Semaphore(64)

            async def one(i: int, card: CardInput = card, sem: asyncio.Semaphore = sem) -> None:
                if rate:  # spread over the round, as figure 8 writes: few lanes at a time
                    await asyncio.sleep(i / rate)
                async with sem:
                    await store.put(Owner("main", session(i)), card)

            await asyncio.gather(*(one(i) for i in range(chats)))
            conn.send(Counter(c.method for c in api.calls))
        await redis.aclose()


# --- this process: the adapter -------------------------------------------------------------


class RoundTrips:
    """Counts packed sends on every Redis connection of this process."""

    def __init__(self) -> None:
        self.count = 0
        self.by_command: Counter[str] = Counter()
        """By the first command sent (a pipeline's first)."""
        original = AbstractConnection.send_packed_command

        async def counted(conn: AbstractConnection, command: Any, check_health: bool = True) -> None:
            self.count += 1
            first = command if isinstance(command, bytes | str) else b"".join(command[:2])
            head = first.encode() if isinstance(first, str) else first
            parts = head.split(b"\r\n")
            self.by_command[parts[2].decode(errors="replace").upper() if len(parts) > 2 else "?"] += 1
            await original(conn, command, check_health)

        AbstractConnection.send_packed_command = counted  # type: ignore[method-assign]


def settings(token: str, base_url: str, chats: int) -> Settings:
    tables = [{"id": FIRST_CHAT + i, "follow": [session(i)]} for i in range(chats)]
    telegram_settings = {"token": token, "apiBaseUrl": base_url, "botCallsPerSecond": BOT_RATE, "chats": tables}
    return Settings.model_validate({"agents": {"default": "main"}, "channels": {"telegram": telegram_settings}})


async def wait_calls(calls: Counter[str], method: str, n: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while calls[method] < n and time.monotonic() < deadline:
        await asyncio.sleep(0.02)
    if calls[method] < n:
        raise RuntimeError(f"{calls[method]} of {n} {method} calls after {timeout:.0f} s")


async def adapter(url: str, chats: int, rounds: int, profile: float, conn: Connection, transport: str) -> None:
    token, base_url = conn.recv()
    conn.send(("write", 0))
    conn.recv()
    trips = RoundTrips()
    collector.settle()  # as `serve` does once started
    redis = connect(url)
    config = settings(token, base_url, chats)
    options = AdapterOptions(consumer="p")
    pool = options.pool_size(config.channels.telegram)  # as `serve` sizes it for the budget
    request: BaseRequest = (
        HTTPXRequest(connection_pool_size=pool) if transport == "httpx" else FencedRequest(connection_pool_size=pool)
    )
    async with telegram.Bot(token, base_url=base_url, request=request) as bot:
        worker = telegram_worker(config, redis, bot, options=options)
        calls: Counter[str] = Counter()
        sent_at: list[float] = []
        client = worker.channel.client
        for name in ("send", "edit"):
            inner = getattr(client, name)

            async def count(*args: Any, _inner: Any = inner, _name: str = name, **kw: Any) -> Any:
                calls[_name] += 1
                if _name == "send":
                    sent_at.append(time.monotonic())
                return await _inner(*args, **kw)

            setattr(client, name, count)
        first = cProfile.Profile(time.process_time) if profile else None
        cpu0, wall0, trips0, start0 = time.process_time(), time.monotonic(), trips.count, trips.by_command.copy()
        if first is not None:
            first.enable()
        await worker.start()
        await wait_calls(calls, "send", chats, chats / 50 + 60)
        if first is not None:
            first.disable()
        cpu1, wall1, trips1 = time.process_time(), time.monotonic(), trips.count
        print(
            f"first drafts: {chats} sends in {wall1 - wall0:.1f} s: {(cpu1 - cpu0) / chats * 1e3:.2f} ms CPU "
            f"each, {(trips1 - trips0) / chats:.1f} Redis round trips each (start-up and follows included)"
        )
        marks = [sent_at[int(q * (len(sent_at) - 1))] - wall0 for q in (0, 0.1, 0.5, 0.9, 1)]
        print("first drafts sent at (s after start; first, 10 %, half, 90 %, last): " + ", ".join(f"{m:.1f}" for m in marks))
        per_first = {k: round(v / chats, 2) for k, v in (trips.by_command - start0).most_common(12)}
        print(f"round trips per first draft, by first command: {per_first}")
        await asyncio.sleep(1.5)  # the last sends' bookkeeping; every destination's pace
        profiler = cProfile.Profile(time.process_time) if profile else None  # CPU, not wall time
        cpu0, wall0, trips0 = time.process_time(), time.monotonic(), trips.count
        commands0 = Counter(trips.by_command)
        busy = 0.0
        for r in range(1, rounds + 1):
            if profiler is not None:
                profiler.enable()
            t = time.monotonic()
            conn.send(("write", r))
            await wait_calls(calls, "edit", chats * r, chats / 50 + 60)
            busy += time.monotonic() - t
            if profiler is not None:
                profiler.disable()
            conn.recv()
            await asyncio.sleep(1.1)  # every destination's pace (1 call a second)
        cpu1, trips1 = time.process_time(), trips.count
        edits = chats * rounds
        if edits:  # (--rounds 0: the first drafts alone)
            print(
                f"edits: {edits} in {busy:.1f} s of rounds ({edits / busy:.0f} calls/s): "
                f"{(cpu1 - cpu0) / edits * 1e3:.2f} ms CPU each, "
                f"{(trips1 - trips0) / edits:.2f} Redis round trips each"
            )
            per_edit = {k: round(v / edits, 2) for k, v in (trips.by_command - commands0).most_common()}
            print(f"round trips per edit, by first command: {per_edit}")
            print(f"edit calls made: {calls['edit']} (one per write: {edits})")
        await worker.close()
    await redis.aclose()
    if first is not None:
        print("--- phase 1, first drafts ---")
        first.dump_stats("/tmp/phase1.prof")
        pstats.Stats(first).sort_stats("tottime").print_stats(int(profile))
        pstats.Stats(first).sort_stats("cumulative").print_stats(int(profile))
    if profiler is not None and rounds:  # (nothing was profiled without a round)
        print("--- phase 2, edits ---")
        profiler.dump_stats("/tmp/phase2.prof")
        stats = pstats.Stats(profiler)
        stats.sort_stats("tottime").print_stats(int(profile))
        stats.sort_stats("cumulative").print_stats(int(profile))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chats", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=0.0,
                        help="writes a second within a round (figure 8: 150); default: all at once")
    parser.add_argument("--latency", type=float, default=0.0,
                        help="seconds the emulator holds every answer (figure 5's distant Bot API: 0.15)")
    parser.add_argument("--profile", type=float, default=0,
                        help="print this many lines of a cProfile of each phase (kept in /tmp/phase1.prof, /tmp/phase2.prof)")
    parser.add_argument("--redis", default=None, help="a Redis URL (its database is flushed); default: embedded")
    parser.add_argument(
        "--transport",
        choices=("aiohttp", "httpx"),
        default="aiohttp",
        help="the Bot API transport: ours (aiohttp) or python-telegram-bot's own (httpx)",
    )
    parser.add_argument("--loop", choices=("uvloop", "asyncio"), default="uvloop", help="uvloop: as `serve` runs")
    args = parser.parse_args()
    print(f"transport {args.transport}, loop {args.loop}, hiredis {'yes' if HIREDIS_AVAILABLE else 'no'}")
    with bench_redis(args.redis) as url:
        ours, theirs = multiprocessing.Pipe()
        child = multiprocessing.get_context("spawn").Process(target=_child, args=(theirs, url, args.chats, args.rate, args.latency))
        child.start()
        try:
            factory = uvloop.new_event_loop if args.loop == "uvloop" else None
            with asyncio.Runner(loop_factory=factory) as runner:
                runner.run(adapter(url, args.chats, args.rounds, args.profile, ours, args.transport))
        finally:
            ours.send(("stop", 0))
            child.join(10)
            if child.is_alive():
                child.kill()


if __name__ == "__main__":
    main()
