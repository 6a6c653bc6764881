"""A fleet of private chats, each following its own session, in front of one `serve`:
the Bot API emulator in this process, `serve` (gateway + Telegram adapter) in a child,
cards written through the gateway's RPC. Used by figures 1, 5 and 6.

Every card carries its write number in the active step (`· w17`), so what a chat shows
at any moment is known from the emulator's call log: the staleness of write k is the
time from issuing it until the first call that shows write k or a later one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import psutil

from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.testing import BotAPIEmulator, Pace

from ._common import TOKEN, Serve, flush, no_collector_pauses, percentile, toml_str
from ._counting import PACED_METHODS, RedisCounter, RedisCounts, busiest_second, cpu_seconds
from ._http import HTTPConnection

MARK = re.compile(r"· w(\d+)\b")
DRAFT_METHODS = {"sendMessage", "editMessageText"}
FIRST_CHAT = 10_001
SUPERSEDED_GRACE = 0.05
"""A call is superseded when a newer card had been acknowledged this long before the
call reached the emulator (the card read, the render and the request take a few ms)."""


def session(i: int) -> str:
    return f"fleet-{i}"


def card_params(seq: int, steps: int = 10) -> dict[str, Any]:
    active = seq % steps
    plan = [
        {"step": f"Step {k + 1}: part {k + 1} of the work", "status": "completed" if k < active else "pending"}
        for k in range(steps)
    ]
    plan[active] = {"step": f"Step {active + 1}: part {active + 1} · w{seq}", "status": "in_progress"}
    # A real agent's note: a few lines of Markdown, the part it works on named in it.
    note = (f"**Part {active + 1}** of the migration: moving `src/part_{active + 1}.py` to the new API.\n\n"
            f"- read the callers (12 files)\n- ran `pytest -q`: 148 passed\n\nNext: part {active + 2}.")
    return {"plan": plan, "markdown": note}


@dataclass
class FleetResult:
    chats: int
    rate: float
    seconds: float
    limit: float
    bot_rate: float
    staleness: list[float] = field(default_factory=list)
    unresolved: int = 0
    convergence: float = float("nan")
    writes: int = 0
    write_errors: int = 0
    calls: Counter[str] = field(default_factory=Counter)
    status: Counter[int] = field(default_factory=Counter)
    superseded: int = 0
    superseded_strict: int = 0
    draft_calls: int = 0
    duplicates: int = 0
    first_poll: float = float("nan")
    """Seconds from starting `serve` to its first getUpdates."""
    all_shown: float = float("nan")
    """Seconds from starting `serve` until every chat showed its first draft."""
    rss_mb: float = float("nan")
    """RSS of `serve` once every chat showed its first draft."""
    rss_end_mb: float = float("nan")
    """RSS of `serve` after the writes converged."""
    write_cpu: float = float("nan")
    """Share of one core `serve` (with its children) used from the first write until
    every chat converged."""
    write_cpu_s: float = float("nan")
    """The same, in CPU seconds."""
    edits: int = 0
    """Draft calls the emulator answered over the same time."""
    redis: RedisCounts | None = None
    """Round trips and commands every client made over the same time (the writes too)."""
    command_calls: Counter[str] = field(default_factory=Counter)
    """Calls per Redis command over the same time (`INFO commandstats`)."""
    busiest: int = 0
    """The most paced calls (the budget's) that arrived in any one sliding second."""
    writing: tuple[float, float] = (float("nan"), float("nan"))
    """When the first write was due and when the last was issued (`time.monotonic()`)."""
    edits_while_writing: float = float("nan")
    """Draft calls a second from the first write to the last."""
    first_drafts_per_s: float = float("nan")
    """First drafts a second, from the first to the last one shown."""
    calls_per_s: float = float("nan")
    """Draft calls a second the emulator saw over the same time (the budget: 30)."""
    cpu_shown: float = float("nan")
    """CPU seconds `serve` used until every chat showed its first draft."""
    others_cpu_shown: float = float("nan")
    """CPU seconds the rest of the machine's work used over the same time: this process
    (the emulator answering, the checks for what is shown) and Redis."""
    idle_cpu: float = float("nan")
    """Share of one core `serve` used while nothing changed."""
    in_flight: float = float("nan")
    """Draft calls open at the emulator at once, on average, from the first write to the
    last (their time from arrival to answer, summed, over that time)."""
    log_lines: int = 0
    log_problems: int = 0
    log_kinds: Counter[str] = field(default_factory=Counter)

    @property
    def p50(self) -> float:
        return percentile(self.staleness, 50)

    @property
    def p99(self) -> float:
        return percentile(self.staleness, 99)


def config_toml(api: BotAPIEmulator, chats: int, extra: str = "") -> str:
    """`extra`: more `[channels.telegram]` settings (TOML lines)."""
    out = [
        "[channels.telegram]",
        f"token = {toml_str(api.token)}",
        f"apiBaseUrl = {toml_str(api.base_url)}",
        extra,
        "",
    ]
    for i in range(chats):
        out += ["[[channels.telegram.chats]]", f"id = {FIRST_CHAT + i}", f"follow = [{toml_str(session(i))}]", ""]
    return "\n".join(out)


async def prewrite(url: str, chats: int, steps: int) -> None:
    """Write 0 of every session, directly to the store (before `serve` starts)."""
    redis = connect(url)
    store = CardStore(redis)
    card = CardInput.parse(card_params(0, steps))
    sem = asyncio.Semaphore(64)

    async def one(i: int) -> None:
        async with sem:
            await store.put(Owner("main", session(i)), card)

    try:
        await asyncio.gather(*(one(i) for i in range(chats)))
    finally:
        await redis.aclose()


def shown_seq(call: Any) -> int | None:
    if call.method not in DRAFT_METHODS or not call.ok:
        return None
    m = MARK.search(str(call.params.get("text", "")))
    return int(m.group(1)) if m else None


async def wait_until(predicate: Any, timeout: float, poll: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(poll)
    return bool(predicate())


async def run_fleet(
    url: str,
    chats: int,
    rate: float,
    seconds: float,
    *,
    steps: int = 10,
    bot_rate: float = 30.0,
    serve_env: dict[str, str] | None = None,
    extra_toml: str = "",
    idle_seconds: float = 0.0,
    connections: int = 16,
    serve_toml: str = "",
    direct: bool = False,
    settle: float | None = None,
    latency: float = 0.0,
) -> FleetResult:
    """Start `serve` for `chats` chats, wait for every first draft, write `rate` cards a
    second to each chat for `seconds`, wait until every chat shows its last card.
    `serve_toml`: more top-level config (a `[serve]` table); `direct`: write through
    `CardStore.put` from this process instead of the gateway (one round trip each);
    `settle`: the longest wait for convergence after the writes (writes not shown by
    then are counted unresolved); `latency`: seconds the emulator holds every answer."""
    limit = max(1.0, chats / bot_rate)
    res = FleetResult(chats, rate, seconds, limit, bot_rate)
    flush(url)
    await prewrite(url, chats, steps)
    bot_pace = Pace(burst=bot_rate, per_second=bot_rate)
    redis_cpu = RedisCounter(url)
    others0 = time.process_time() + redis_cpu.cpu()
    with no_collector_pauses():
        async with BotAPIEmulator(bot_pace=bot_pace, latency=latency) as api:
            serve = Serve(url, serve_toml + config_toml(api, chats, extra_toml), env=serve_env)
            async with serve:
                proc = psutil.Process(serve.pid)
                started = serve.started_at
                ids = [FIRST_CHAT + i for i in range(chats)]

                def shown_count() -> int:
                    return sum(1 for c in ids if api.chat(c).visible())

                # Every first draft: the budget's time, or ≈ 20 ms of the adapter's work each.
                await wait_until(lambda: shown_count() == chats, max(limit * 2, chats * 0.02) + 60, 0.25)
                polls = [c.at for c in api.calls if c.method == "getUpdates"]
                res.first_poll = (polls[0] - started) if polls else float("nan")
                shown = Shown(api)
                shown.update()
                firsts = [shown.times[cid][0][0] if shown.times.get(cid) else float("nan") for cid in ids]
                res.all_shown = max(firsts) - started if firsts else float("nan")
                if chats > 1 and max(firsts) > min(firsts):
                    res.first_drafts_per_s = (chats - 1) / (max(firsts) - min(firsts))
                res.rss_mb = proc.memory_info().rss / 2**20
                res.cpu_shown = cpu_seconds(proc)
                res.others_cpu_shown = time.process_time() + redis_cpu.cpu() - others0
                redis_cpu.close()
                if idle_seconds:
                    await asyncio.sleep(min(2.0, idle_seconds))  # let the last answers settle
                    c0 = cpu_seconds(proc)
                    t0 = time.monotonic()
                    await asyncio.sleep(idle_seconds)
                    res.idle_cpu = (cpu_seconds(proc) - c0) / (time.monotonic() - t0)
                if seconds > 0:
                    counter = RedisCounter(url)
                    k0 = counter.commands()
                    r0, c0, t0 = counter.read(), cpu_seconds(proc), time.monotonic()
                    await _write_phase(res, api, shown, serve.port, ids, rate, seconds, steps, connections, url, direct,
                                       settle)
                    c1, t1 = cpu_seconds(proc), time.monotonic()
                    res.redis = counter.since(r0)
                    res.command_calls = Counter(counter.commands()) - Counter(k0)
                    counter.close()
                    res.write_cpu_s = c1 - c0
                    res.write_cpu = res.write_cpu_s / (t1 - t0)
                    res.edits = sum(1 for c in api.calls if c.method in DRAFT_METHODS and c.ok and t0 <= c.at <= t1)
                    res.calls_per_s = res.edits / (t1 - t0)
                    w0, w1 = res.writing
                    writing = sum(1 for c in api.calls if c.method in DRAFT_METHODS and c.ok and w0 <= c.at <= w1)
                    res.edits_while_writing = writing / (w1 - w0) if w1 > w0 else float("nan")
                    held = sum(min(c.answered, w1) - max(c.at, w0) for c in api.calls
                               if c.method in DRAFT_METHODS and c.answered is not None and c.at < w1 and c.answered > w0)
                    res.in_flight = held / (w1 - w0) if w1 > w0 else float("nan")
                res.rss_end_mb = proc.memory_info().rss / 2**20
            lines = serve.lines
        res.log_lines = len(lines)
        for line in lines:
            if " WARNING " in line or " ERROR " in line or "Traceback" in line:
                res.log_problems += 1
                res.log_kinds[re.sub(r"\d+", "N", line.split(" ", 3)[-1])[:100]] += 1
        _tally(res, api)
        res.busiest = busiest_second(c.at for c in api.calls if c.method in PACED_METHODS)
        return res


async def _write_phase(
    res: FleetResult, api: BotAPIEmulator, shown: Shown, port: int, ids: list[int], rate: float, seconds: float, steps: int,
    connections: int, url: str, direct: bool, settle: float | None,
) -> None:
    issued: dict[int, list[float]] = {cid: [0.0] for cid in ids}  # seq → issue time (write 0 predates)
    acked: dict[int, list[float]] = {cid: [0.0] for cid in ids}
    queue: asyncio.Queue[tuple[int, int] | None] = asyncio.Queue()
    headers = {"Authorization": f"Bearer {TOKEN}"}

    redis = connect(url) if direct else None
    store = CardStore(redis) if redis is not None else None

    async def put(conn: HTTPConnection, cid: int, seq: int) -> bool:
        params = card_params(seq, steps)
        if store is not None:
            await store.put(Owner("main", session(cid - FIRST_CHAT)), CardInput.parse(params))
            return True
        body = json.dumps({"method": "progressCard.put",
                           "params": {"sessionKey": session(cid - FIRST_CHAT), **params}}).encode()
        try:
            status, _ = await conn.post("/v1/rpc", body, headers)
        except (OSError, ConnectionError, asyncio.IncompleteReadError):
            status = 0
            await conn.close()
        return status == 200

    async def writer() -> None:
        conn = HTTPConnection("127.0.0.1", port)
        while (item := await queue.get()) is not None:
            cid, seq = item
            issued[cid].append(time.monotonic())
            ok = await put(conn, cid, seq)
            acked[cid].append(time.monotonic())
            res.writes += 1
            if not ok:
                res.write_errors += 1
        await conn.close()

    workers = [asyncio.create_task(writer()) for _ in range(connections)]
    n = len(ids)
    per_chat = max(1, round(rate * seconds))
    # Write k of chat j is due at start + (j / n + k) / rate: evenly spread.
    schedule = sorted(((j / n + k) / rate, ids[j], k + 1) for j in range(n) for k in range(per_chat))
    start = time.monotonic()
    for due, cid, seq in schedule:
        delay = start + due - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        queue.put_nowait((cid, seq))
    for _ in workers:
        queue.put_nowait(None)
    await asyncio.gather(*workers)
    if redis is not None:
        await redis.aclose()
    last_issue = max(t[-1] for t in issued.values())
    res.writing = (start, last_issue)

    def converged() -> bool:
        shown.update()
        return all(shown.latest.get(cid, -1) >= len(issued[cid]) - 1 for cid in ids)

    # the budget's time, or ≈ 20 ms of the adapter's work per write when that is longer
    await wait_until(converged, settle if settle is not None else max(res.limit * 3, res.writes * 0.02) + 30, 0.25)
    finals = []
    for cid in ids:
        final = len(issued[cid]) - 1
        times = shown.times.get(cid, [])
        # staleness of every write: first call showing it or a later one
        for seq in range(1, final + 1):
            at = next((t for t, s in times if s >= seq and t >= issued[cid][seq]), None)
            if at is None:
                res.unresolved += 1
            else:
                res.staleness.append(at - issued[cid][seq])
        at_final = next((t for t, s in times if s >= final), None)
        finals.append(float("inf") if at_final is None else at_final)
        # superseded: a newer card was acknowledged well before this call arrived
        for t, s in times:
            newer = [k for k in range(s + 1, final + 1) if acked[cid][k] <= t]
            if newer:
                res.superseded_strict += 1
                if any(acked[cid][k] <= t - SUPERSEDED_GRACE for k in newer):
                    res.superseded += 1
    res.convergence = max(finals) - last_issue


class Shown:
    """What each chat was shown and when — (arrival, write number) per draft call — read
    from the emulator's call log as it grows (indexed once: 10,000 chats × 30,000 calls
    must not be scanned per question)."""

    def __init__(self, api: BotAPIEmulator) -> None:
        self.api = api
        self.times: dict[int, list[tuple[float, int]]] = {}
        self.latest: dict[int, int] = {}
        self._seen = 0

    def update(self) -> None:
        calls = self.api.calls
        while self._seen < len(calls):
            call = calls[self._seen]
            if call.method in DRAFT_METHODS and call.ok and call.result is None:
                return  # still in flight (the log holds a call from its arrival): look again later
            self._seen += 1
            seq = shown_seq(call)
            if seq is not None and call.chat_id is not None:
                self.times.setdefault(call.chat_id, []).append((call.at, seq))
                self.latest[call.chat_id] = max(self.latest.get(call.chat_id, -1), seq)


def _tally(res: FleetResult, api: BotAPIEmulator) -> None:
    sends: Counter[int] = Counter()
    for call in api.calls:
        res.calls[call.method] += 1
        res.status[call.status] += 1
        if call.method in DRAFT_METHODS:
            res.draft_calls += 1
        if call.method == "sendMessage" and call.ok and call.chat_id is not None:
            sends[call.chat_id] += 1
    # one draft per chat, edited in place: a second send, or two drafts on screen, is a duplicate
    res.duplicates = sum(n - 1 for n in sends.values() if n > 1)
    with contextlib.suppress(Exception):
        res.duplicates = max(res.duplicates, sum(1 for cid in sends if len(api.chat(cid).visible()) > 1))
