"""Figure 8 — the Telegram adapter's cost: CPU of `serve` per Bot API call and Redis
round trips per edit, with the writes made from this process straight to the store
(`CardStore.put`), so that `serve`'s CPU and its Redis traffic are the adapter's.

Round trips are Redis's own count (`INFO stats` `total_reads_processed`: one read event
per request a client sends and waits for — a command, a pipeline or a transaction) on
the bench's Redis, which serves nothing else; what this process's writes cost is
measured first, on the same Redis, and taken off.
"""

from __future__ import annotations

from collections import Counter

from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect

from ._common import Context, Result, flush
from ._counting import RedisCounter, RedisCounts
from .fleet import card_params, run_fleet
from .freshness_bench import budget_row

BOT_RATE = 1000.0
CPU_TARGET_MS = 1.0
ROUND_TRIPS_TARGET = 3.0
CALIBRATION_WRITES = 200


async def cost_of_a_write(url: str) -> tuple[RedisCounts, Counter[str]]:
    """Round trips and commands of one `CardStore.put` (what the fleet's writes add), and
    its calls per command."""
    flush(url)
    redis = connect(url)
    store = CardStore(redis)
    owner = Owner("main", "calibration")
    await store.put(owner, CardInput.parse(card_params(0)))  # loads the script, opens the connection
    counter = RedisCounter(url)
    named = Counter(counter.commands())
    before = counter.read()
    for seq in range(1, CALIBRATION_WRITES + 1):
        await store.put(owner, CardInput.parse(card_params(seq)))
    spent = counter.since(before)
    per_command = Counter({k: round(v / CALIBRATION_WRITES) for k, v in (Counter(counter.commands()) - named).items()})
    per_command["info"] = 0
    counter.close()
    await redis.aclose()
    counts = RedisCounts(round(spent.reads / CALIBRATION_WRITES), round(spent.commands / CALIBRATION_WRITES))
    return counts, +per_command


async def run(ctx: Context) -> None:
    # Few enough writes that the adapter keeps up: an edit per write, none coalesced.
    chats, seconds = (100, 4.0) if ctx.quick else (300, 20.0)
    rate = 0.5
    write, write_commands = await cost_of_a_write(ctx.redis_url)
    res = await run_fleet(ctx.redis_url, chats, rate, seconds, bot_rate=BOT_RATE, direct=True,
                          extra_toml=f"botCallsPerSecond = {BOT_RATE:g}\n")
    prefix = f"{chats} chats × {rate:g} writes/s, written to the store: "
    edits = max(1, res.edits)
    cpu_ms = res.write_cpu_s / edits * 1e3
    assert res.redis is not None
    trips = (res.redis.reads - res.writes * write.reads) / edits
    commands = (res.redis.commands - res.writes * write.commands) / edits
    ctx.add(Result("8", f"{prefix}serve CPU per Bot API call", cpu_ms, "ms", None, None,
                   f"≤ {CPU_TARGET_MS:g} ms", cpu_ms <= CPU_TARGET_MS))
    ctx.add(Result("8", f"{prefix}Redis round trips per edit", trips, "", None, None,
                   f"≤ {ROUND_TRIPS_TARGET:g}", trips <= ROUND_TRIPS_TARGET))
    ctx.add(Result("8", f"{prefix}Redis commands per edit (scripts' own included)", commands, ""))
    ctx.add(Result("8", f"{prefix}draft calls a second", res.calls_per_s, "calls/s"))
    ctx.add(Result("8", f"{prefix}edits per write", res.edits / max(1, res.writes), "", 1.0))
    ctx.add(Result("8", f"{prefix}serve CPU while writing", res.write_cpu * 100, "% of a core"))
    budget_row(ctx, "8", res, prefix)
    own = res.command_calls - Counter({k: n * res.writes for k, n in write_commands.items()})
    own["info"] = 0
    top = ", ".join(f"`{name}` {n / edits:.2g}" for name, n in (+own).most_common(10))
    ctx.note("8", f"The adapter's commands per edit by name (the writes' taken off; commands its "
                  f"scripts run included): {top}.")
    ctx.note("8", f"{res.writes} writes, {res.edits} draft calls while writing and converging; one write "
                  f"costs {write.reads} round trip(s) and {write.commands} command(s) on this Redis, "
                  f"taken off ({res.redis.reads} round trips and {res.redis.commands} commands in all).")
