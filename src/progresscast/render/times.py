"""Time and usage on the card, in a channel's words (its theme): how long the run and
its active step have taken, how long a finished step took, what an ended run used.

Pure: the times come in the view (`View.now`, `View.step_times`, `View.elapsed`); the
durations are worded by `duration_words`, the one wording of a duration. A live time
shows from its first whole minute (it changes once a minute: docs/renderers.md), and so
does an ended run's; a finished step's as it was, seconds too.
"""

from __future__ import annotations

from ..model.card import Status, Step
from ..model.timing import MINUTE, Usage
from ..model.view import RunState, View
from .history import duration_words
from .templates import Theme


def run_time(view: View, theme: Theme) -> str | None:
    """A live run's elapsed time (`5 m`), None before its first minute or when not live."""
    if view.run is not RunState.active or view.now is None:
        return None
    elapsed = view.elapsed
    return duration_words(theme, elapsed) if elapsed is not None and elapsed >= MINUTE else None


def ended_time(view: View, theme: Theme) -> str | None:
    """How long an ended run took (`4 m`), None when not known or under a minute: a
    quick turn's end line says how it ended, not `0 s`."""
    if view.run is RunState.active or view.ended_at is None:
        return None
    elapsed = view.elapsed
    return duration_words(theme, elapsed) if elapsed is not None and elapsed >= MINUTE else None


def step_time(view: View, index: int, step: Step, theme: Theme) -> str | None:
    """The active step's time so far (from its first whole minute, while the run is live),
    or how long a completed step took; None otherwise."""
    times = view.step_time(index)
    if times is None:
        return None
    if step.status is Status.in_progress:
        if view.now is None or times.since is None or view.now - times.since < MINUTE:
            return None
        return duration_words(theme, view.now - times.since)
    took = times.took
    if step.status is Status.completed and took is not None:
        return duration_words(theme, took)
    return None


def _count(n: int) -> str:
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}".removesuffix(".0") + "k"
    return f"{n / 1_000_000:.1f}".removesuffix(".0") + "M"


def usage_words(usage: Usage | None, theme: Theme) -> str | None:
    """`$0.12` when the cost is known, else the tokens in and out (`12.3k tokens`)."""
    if usage is None:
        return None
    if usage.cost_usd is not None:
        cost = usage.cost_usd
        return theme.word("cost", cost="<0.01" if 0 < cost < 0.005 else f"{cost:.2f}")
    tokens = (usage.input_tokens or 0) + (usage.output_tokens or 0)
    if usage.input_tokens is None and usage.output_tokens is None:
        return None
    return theme.word("tokens", count=_count(tokens))


def ended_extras(view: View, theme: Theme) -> list[str]:
    """What the line that ends a run adds: how long it took, what it used."""
    return [part for part in (ended_time(view, theme), usage_words(view.usage, theme)) if part]


__all__ = ["ended_extras", "ended_time", "run_time", "step_time", "usage_words"]
