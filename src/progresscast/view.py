"""Everything a renderer needs about one owner, read from the store in one go."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .activity import Activity
from .card import Card
from .owners import Owner


class RunState(StrEnum):
    none = "none"          # no run was ever recorded for this owner
    active = "active"
    completed = "completed"
    failed = "failed"
    canceled = "canceled"


@dataclass(frozen=True)
class View:
    owner: Owner
    card: Card | None = None
    activity: Activity = field(default_factory=Activity)
    run: RunState = RunState.none
    run_id: str | None = None
    paused: bool = False
    """Unfinished steps show as paused (docs/events-and-runs.md)."""

    @property
    def empty(self) -> bool:
        return self.card is None and self.activity.empty
