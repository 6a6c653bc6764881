"""Counting what happened to each update, for `a2a ingest`'s summary and follow's lines."""

from __future__ import annotations

from dataclasses import dataclass, field

from .apply import Applied, Outcome


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
        kinds (`untimed`, `messages`, `plans refused`) when there were any."""
        parts = [f"{kind} {self.get(kind)}" for kind in ("stale", "duplicate", "malformed")]
        ignored = sum(self.get(k) for k in ("stale", "duplicate", "malformed", "untimed", "message"))
        if self.get("untimed"):
            parts.append(f"untimed {self.get('untimed')}")
        if self.get("message"):
            parts.append(f"messages {self.get('message')}")
        line = f"applied {self.applied}, ignored {ignored} ({', '.join(parts)})"
        if self.get("badPlan"):
            line += f"; plans refused {self.get('badPlan')}"
        return line
