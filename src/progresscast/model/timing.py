"""Time on the card: when each step became active and was done, a run's usage, and the
minute a live draft is rendered for. Pure data: the store records the times (its write
script, on its clock), a reader passes its own clock (`minute_of`), renderers read none."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from .card import CardError

MINUTE = 60.0
"""A live draft's times change once a minute at most (docs/renderers.md)."""


@dataclass(frozen=True)
class StepTime:
    """When a step last became active, and when it was done after that (seconds since
    the epoch, the store's clock); None where the store did not see it."""

    since: float | None = None
    done: float | None = None

    @property
    def took(self) -> float | None:
        """How long a finished step was active (None: not seen both ways)."""
        if self.since is None or self.done is None:
            return None
        return max(0.0, self.done - self.since)


def step_times_of(raw: Any, steps: int) -> tuple[StepTime | None, ...]:
    """The stored `times` (`[[sinceMs, doneMs], …]`, 0 for unknown, one pair per step) as
    one StepTime per step; () for anything that does not match the plan."""
    if not isinstance(raw, list) or len(raw) != steps:
        return ()
    out: list[StepTime | None] = []
    for pair in raw:
        # Checked without a generator per pair: a card's times are read on every edit.
        if not isinstance(pair, list) or len(pair) != 2:
            return ()
        since, done = pair
        if not (isinstance(since, int) and isinstance(done, int)):
            return ()
        out.append(StepTime(since / 1000 if since else None, done / 1000 if done else None) if since or done else None)
    return tuple(out)


def minute_of(started_at: float | None, now: float) -> float | None:
    """The time a live draft of a run that started at `started_at` is rendered for: `now`
    on the run's last whole minute, so every time it shows changes at the same moment,
    once a minute. None without a start."""
    if started_at is None:
        return None
    return started_at + MINUTE * max(0, math.floor((now - started_at) / MINUTE))


def next_minute(started_at: float, now: float) -> float:
    """Seconds from `now` to the run's next whole minute (always > 0)."""
    return started_at + MINUTE * (max(0, math.floor((now - started_at) / MINUTE)) + 1) - now


@dataclass(frozen=True)
class Usage:
    """What a run used, as its agent tells it: tokens in and out, and the cost in US
    dollars only when the agent knows it."""

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def parse(cls, data: Any) -> Usage:
        """`{inputTokens?, outputTokens?, costUsd?}`; a wrong shape raises CardError."""
        if not isinstance(data, dict):
            raise CardError("usage", "must be an object {inputTokens?, outputTokens?, costUsd?}")
        unknown = sorted(set(data) - {"inputTokens", "outputTokens", "costUsd"})
        if unknown:
            raise CardError(f"usage.{unknown[0]}", "is not a field of usage (inputTokens, outputTokens, costUsd)")
        tokens: dict[str, int | None] = {}
        for name in ("inputTokens", "outputTokens"):
            value = data.get(name)
            if value is not None and (type(value) is not int or not 0 <= value <= 10**12):
                raise CardError(f"usage.{name}", "must be an integer from 0 to 10^12")
            tokens[name] = value
        cost = data.get("costUsd")
        if cost is not None and (
            type(cost) not in (int, float) or not math.isfinite(cost) or not 0 <= cost <= 10**6
        ):
            raise CardError("usage.costUsd", "must be a number from 0 to 1000000")
        return cls(tokens["inputTokens"], tokens["outputTokens"], None if cost is None else float(cost))

    @property
    def empty(self) -> bool:
        return self.input_tokens is None and self.output_tokens is None and self.cost_usd is None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.input_tokens is not None:
            out["inputTokens"] = self.input_tokens
        if self.output_tokens is not None:
            out["outputTokens"] = self.output_tokens
        if self.cost_usd is not None:
            out["costUsd"] = self.cost_usd
        return out

    def plus(self, other: Usage) -> Usage:
        """Two parts of one run's usage, summed (unknown stays unknown only on both sides)."""

        def add(a: float | None, b: float | None) -> float | None:
            return b if a is None else a if b is None else a + b

        cost = add(self.cost_usd, other.cost_usd)
        return Usage(
            None if (v := add(self.input_tokens, other.input_tokens)) is None else int(v),
            None if (v := add(self.output_tokens, other.output_tokens)) is None else int(v),
            cost,
        )


__all__ = ["MINUTE", "StepTime", "Usage", "minute_of", "next_minute", "step_times_of"]
