"""Which steps and lines fit: step selection, line caps, budgets.

Pure helpers over the `ir` model; `draft.py` decides what goes into a draft and calls
these to make it fit.

Selection — a plan with more steps than rows keeps, in the plan's own order:

1. the active (`in_progress`) step — always, even when only one row is left;
2. blocked steps;
3. then, alternately, the next pending steps (those after the active step first,
   then any left pending before it) and the most recent done steps (completed or
   skipped, nearest before the active step first), pending first — so the rows form
   a window around where the agent is;

and one summary row counting what was left out by kind (done, pending, blocked).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..card import DONE_STATUSES, Status, Step
from .ir import Line, cut_line

UNFINISHED = frozenset({Status.pending, Status.in_progress, Status.blocked})


def step_state(step: Step, paused: bool) -> str:
    """The display state: the status, or `paused` for an unfinished step of a paused run."""
    if paused and step.status in UNFINISHED:
        return "paused"
    return step.status.value


@dataclass(frozen=True)
class Omitted:
    """What a selection left out, by kind."""

    done: int = 0
    pending: int = 0
    blocked: int = 0

    @property
    def total(self) -> int:
        return self.done + self.pending + self.blocked


def select_steps(plan: Sequence[Step], rows: int) -> tuple[list[int], Omitted | None]:
    """Indices of the steps to show in `rows` rows (one of them the summary row when
    steps are left out), in plan order, and what was left out (None when nothing).

    With a single row and an active step, that row is the active step (no summary)."""
    n = len(plan)
    if n <= rows:
        return list(range(n)), None
    active = next((i for i, s in enumerate(plan) if s.status is Status.in_progress), None)
    slots = rows - 1  # one row for the summary
    chosen: set[int] = set()
    if active is not None:
        chosen.add(active)  # even when that leaves no row for the summary
    for i, s in enumerate(plan):
        if len(chosen) >= slots:
            break
        if s.status is Status.blocked:
            chosen.add(i)
    if active is None:
        pending = [i for i, s in enumerate(plan) if s.status is Status.pending]
        done = [i for i in range(n - 1, -1, -1) if plan[i].status in DONE_STATUSES]
    else:
        pending = [i for i in range(active + 1, n) if plan[i].status is Status.pending]
        pending += [i for i in range(active) if plan[i].status is Status.pending]
        done = [i for i in range(active - 1, -1, -1) if plan[i].status in DONE_STATUSES]
        done += [i for i in range(n - 1, active, -1) if plan[i].status in DONE_STATUSES]
    p = d = 0
    turn_pending = True
    while len(chosen) < slots and (p < len(pending) or d < len(done)):
        if (turn_pending and p < len(pending)) or d >= len(done):
            chosen.add(pending[p])
            p += 1
        else:
            chosen.add(done[d])
            d += 1
        turn_pending = not turn_pending
    kept = sorted(chosen)
    done_n = pending_n = blocked_n = 0
    for i, s in enumerate(plan):
        if i in chosen:
            continue
        if s.status is Status.pending:
            pending_n += 1
        elif s.status is Status.blocked:
            blocked_n += 1
        elif s.status in DONE_STATUSES:
            done_n += 1
        # The active step is always chosen, so it never counts as left out.
    if not done_n + pending_n + blocked_n:
        return kept, None
    return kept, Omitted(done=done_n, pending=pending_n, blocked=blocked_n)


def water_cap(lengths: Sequence[int], budget: int) -> int:
    """The largest per-line cap c with sum(min(length, c)) <= budget (0 if none)."""
    if sum(lengths) <= budget:
        return max(lengths, default=0)
    lo, hi = 0, max(lengths)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(n, mid) for n in lengths) <= budget:
            lo = mid
        else:
            hi = mid - 1
    return lo


def cap_lines(lines: Sequence[Line], cap: int) -> list[Line]:
    """Every line cut to at most `cap` units with a middle `…`."""
    return [line if line.length <= cap else cut_line(line, cap) for line in lines]


def squeeze(lines: Sequence[Line], budget: int) -> list[Line]:
    """Cut the longest lines (middle `…`) until lines joined by newlines fit `budget`."""
    if not lines:
        return []
    room = budget - (len(lines) - 1)
    lengths = [line.length for line in lines]
    if sum(lengths) <= room:
        return list(lines)
    cap = water_cap(lengths, room)
    out = cap_lines(lines, cap)
    # A cut keeps whole characters, so it may come out shorter, never longer; but a
    # decoration prefix longer than the cap is kept whole — guard against that.
    while sum(line.length for line in out) > room and cap > 1:
        cap -= 1
        out = cap_lines(out, cap)
    return out


def take_head(lines: Sequence[Line], budget: int) -> tuple[list[Line], bool]:
    """As many lines from the start as fit `budget` (newlines counted); the first line
    that does not fit is cut at its end with `…` when some room is left. Returns the
    lines and whether anything was left out."""
    out: list[Line] = []
    used = -1
    for line in lines:
        need = line.length + 1
        if used + need <= budget:
            out.append(line)
            used += need
            continue
        room = budget - used - 1
        if room >= 8 and not line.blank:
            out.append(cut_line(line, room, "end"))
        return _strip_blank(out), True
    return out, False


def take_tail(lines: Sequence[Line], budget: int) -> tuple[list[Line], bool]:
    """As many lines from the end as fit `budget` (the mirror of take_head; the first
    kept line is cut at its front with `…`)."""
    out: list[Line] = []
    used = -1
    for line in reversed(lines):
        need = line.length + 1
        if used + need <= budget:
            out.append(line)
            used += need
            continue
        room = budget - used - 1
        if room >= 8 and not line.blank:
            out.append(cut_line(line, room, "front"))
        out.reverse()
        return _strip_blank(out), True
    out.reverse()
    return out, False


def _strip_blank(lines: list[Line]) -> list[Line]:
    start, end = 0, len(lines)
    while start < end and lines[start].blank:
        start += 1
    while end > start and lines[end - 1].blank:
        end -= 1
    return lines[start:end]


def strip_blank(lines: Sequence[Line]) -> list[Line]:
    return _strip_blank(list(lines))


__all__ = [
    "Omitted",
    "cap_lines",
    "select_steps",
    "squeeze",
    "step_state",
    "strip_blank",
    "take_head",
    "take_tail",
    "water_cap",
]
