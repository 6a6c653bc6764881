"""Counting what happened to each update, for `a2a ingest`'s summary and follow's lines."""

from __future__ import annotations

from dataclasses import dataclass, field

from .apply import Applied, Outcome

IGNORED = ("stale", "duplicate", "malformed", "untimed", "future", "reset")
"""What an update not applied was counted as (the first three always shown)."""


@dataclass
class Tally:
    counts: dict[str, int] = field(default_factory=dict)

    def add(self, what: str) -> None:
        self.counts[what] = self.counts.get(what, 0) + 1

    def record(self, result: Applied) -> None:
        self.add(result.outcome.value)
        if result.plan_problem:
            self.add("badPlan")

    def get(self, what: str) -> int:
        return self.counts.get(what, 0)

    @property
    def applied(self) -> int:
        return self.get(Outcome.applied.value)

    def summary(self) -> str:
        """`applied N, ignored M (stale S, duplicate D, malformed X)`, plus the rarer
        kinds (`untimed`, `future`, `reset`, `messages`, `plans refused`) when there were any."""
        parts = [f"{kind} {self.get(kind)}" for kind in ("stale", "duplicate", "malformed")]
        ignored = sum(self.get(k) for k in (*IGNORED, "message"))
        for kind in IGNORED[3:]:
            if self.get(kind):
                parts.append(f"{kind} {self.get(kind)}")
        if self.get("message"):
            parts.append(f"messages {self.get('message')}")
        line = f"applied {self.applied}, ignored {ignored} ({', '.join(parts)})"
        if self.get("badPlan"):
            line += f"; plans refused {self.get('badPlan')}"
        return line
