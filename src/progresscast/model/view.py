"""Everything a renderer needs about one owner, read from the store in one go."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from .activity import Activity
from .asks import Ask, AskState, StopMark
from .card import Card
from .owners import Owner
from .timing import StepTime, Usage, minute_of


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
    stop_armed: bool = False
    """Stop was pressed once and waits for its confirming second press (a few seconds):
    the button reads so."""
    ended_at: float | None = None
    """When the current run ended (seconds since the epoch, the store's clock)."""
    step_times: tuple[StepTime | None, ...] = ()
    """Per step of the card's plan (same order), when it became active and was done;
    () when the store has no times for this plan."""
    usage: Usage | None = None
    """What the current run used, as its agent told it at the end."""
    now: float | None = None
    """The time a live run's draft is rendered for (`timing.minute_of` of the reader's
    clock); None: show no live times. Renderers read no clock of their own."""

    @property
    def open_asks(self) -> tuple[Ask, ...]:
        return tuple(a for a in self.asks if a.state is AskState.open)

    def at(self, clock: float) -> View:
        """This view rendered at `clock` (the reader's time): a live run's times on its
        last whole minute, none for a run that is not live."""
        live = self.run is RunState.active and not self.paused
        now = minute_of(self.started_at, clock) if live else None
        return self if now == self.now else replace(self, now=now)

    def step_time(self, index: int) -> StepTime | None:
        return self.step_times[index] if index < len(self.step_times) else None

    @property
    def elapsed(self) -> float | None:
        """How long the run has taken: till its end, or till `now` while it is live."""
        if self.started_at is None:
            return None
        end = self.ended_at if self.run in TERMINAL else self.now if self.run is RunState.active else None
        return None if end is None else max(0.0, end - self.started_at)

    @property
    def empty(self) -> bool:
        return self.card is None and self.activity.empty
