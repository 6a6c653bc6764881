"""Everything a renderer needs about one owner, read from the store in one go."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from .activity import Activity
from .asks import Ask, AskState, StopMark
from .card import Card
from .owners import Owner


class RunState(StrEnum):
    none = "none"          # no run was ever recorded for this owner
    active = "active"
    completed = "completed"
    failed = "failed"
    canceled = "canceled"


TERMINAL = frozenset({RunState.completed, RunState.failed, RunState.canceled})
"""The states a run ends in (the one list of them)."""


@dataclass(frozen=True)
class EndedRun:
    """The run before the current one, as it ended: kept by the store when the next run
    starts (which clears the activity), so that its final answer is not lost."""

    run_id: str
    state: RunState
    answer: str | None = None


@dataclass(frozen=True)
class View:
    owner: Owner
    card: Card | None = None
    activity: Activity = field(default_factory=Activity)
    run: RunState = RunState.none
    run_id: str | None = None
    paused: bool = False
    """Unfinished steps show as paused (docs/events-and-runs.md)."""
    after_end: bool = False
    """The run has ended and the card was written after it ended."""
    previous: EndedRun | None = None
    started_at: float | None = None
    """When the current run started (seconds since the epoch, the store's clock)."""
    asks: tuple[Ask, ...] = ()
    """The owner's asks, open and recently ended, oldest first (model/asks.py)."""
    stop: StopMark | None = None
    """Stop pressed on the current (or just ended) run: by whom, when."""
    stoppable: bool = False
    """The current run's agent acts on a Stop pressed in chat."""

    @property
    def open_asks(self) -> tuple[Ask, ...]:
        return tuple(a for a in self.asks if a.state is AskState.open)

    @property
    def empty(self) -> bool:
        return self.card is None and self.activity.empty
