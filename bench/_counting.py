"""Counters the fleet figures read beside the emulator's call log: the calls in the
busiest sliding second, Redis's own counts of round trips and commands, and the CPU of
a process with its children (a split `serve` is two processes)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass

import psutil
import redis as sync_redis

PACED_METHODS = frozenset({"sendMessage", "editMessageText", "deleteMessage", "deleteMessages", "sendRichMessage"})
"""The methods the Bot API counts against a bot's budget (the emulator paces the same)."""


def busiest_second(arrivals: Iterable[float], window: float = 1.0) -> int:
    """The most arrivals in any window of `window` seconds, [t, t + window)."""
    times = sorted(arrivals)
    most, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - window:
            start += 1
        most = max(most, end - start + 1)
    return most


def cpu_seconds(proc: psutil.Process) -> float:
    """User + system CPU of `proc` and of every child it has now."""
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = p.cpu_times()
            total += times.user + times.system
    return total


@dataclass(frozen=True)
class RedisCounts:
    """Redis's `INFO stats` counters at one moment. `total_reads_processed` counts the
    read events on client sockets: a client that sends a request (one command, a
    pipeline or a transaction) and waits for its answer makes one, so the difference
    is the round trips made in between."""

    reads: int
    commands: int

    def __sub__(self, other: RedisCounts) -> RedisCounts:
        return RedisCounts(self.reads - other.reads, self.commands - other.commands)


class RedisCounter:
    """`INFO stats` over one connection of its own, opened before the first reading (each
    reading then costs exactly one round trip and one command, taken off the result)."""

    def __init__(self, url: str) -> None:
        self.client = sync_redis.Redis.from_url(url)
        self.client.ping()

    def read(self) -> RedisCounts:
        info = self.client.info("stats")
        return RedisCounts(int(info["total_reads_processed"]), int(info["total_commands_processed"]))

    def since(self, before: RedisCounts) -> RedisCounts:
        """What other clients did since `before` (this reading's own trip taken off)."""
        diff = self.read() - before
        return RedisCounts(diff.reads - 1, diff.commands - 1)

    def cpu(self) -> float:
        """Redis's own CPU seconds so far, every thread of it (`INFO cpu`)."""
        info = self.client.info("cpu")
        return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])

    def commands(self) -> dict[str, int]:
        """Calls per command so far (`INFO commandstats`), e.g. {"evalsha": 812}."""
        stats = self.client.info("commandstats")
        return {name.removeprefix("cmdstat_"): int(v["calls"]) for name, v in stats.items()}

    def close(self) -> None:
        self.client.close()
