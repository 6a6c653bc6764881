"""What a draft shows when it cannot show everything: one priority order for every
channel, then line caps and budgets.

Every line a draft could show is a candidate with a `Rank`; a draft of `maxLines`
lines keeps the best-ranked candidates and shows them in their own display order
(steps in plan order). The order, best first:

1. what needs a person — the blocked steps in plan order, then the attention lines
   (`draft_lines.attention_lines`: a failed run, what the agent waits for);
2. the active (`in_progress`) step;
3. progress `k/N` (the header line; it joins another line when it has none of its own);
4. the note's own progress bar;
5. which agent and session (the label: on the `k/N` line when both fit);
6. the next pending steps (`NEXT_STEPS` of them: after the active step first, then
   any left before it);
7. the most recent completed or skipped steps (`RECENT_STEPS`: nearest before the
   active step first);
8. the activity: its headline, then the tool lines, most recent first;
9. what is left, in this order: more pending steps, more done steps, then the note.

A summary line of what was left out (`… 5 more: 2 blocked, 3 pending`) is shown only
when it tells something no other line does: when blocked steps had to be left out
(with `k/N` on screen, hidden done and pending steps are no news). It takes the
place of the last line given out. On a single line it shrinks to `+2 blocked` after
the count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import IntEnum
from functools import lru_cache

from ..model.card import DONE_STATUSES, Status, Step
from .ir import Line, cut_line

PAUSABLE = frozenset({Status.pending, Status.in_progress})
"""The steps a paused run shows paused. A blocked step keeps its mark: it still waits
for a person, whether a run is active or not."""

NEXT_STEPS = 2
"""Pending steps ranked (6); more of them rank after the activity lines."""
RECENT_STEPS = 1
"""Done steps ranked (7); more of them rank after the activity lines."""


class Priority(IntEnum):
    NEEDS_PERSON = 1
    ACTIVE = 2
    COUNT = 3
    NOTE_BAR = 4
    OWNER = 5
    NEXT = 6
    RECENT = 7
    ACTIVITY = 8
    REST = 9


Rank = tuple[int, int, int]
"""(priority, group within the priority, position within the group): smaller is better."""


def step_state(step: Step, paused: bool) -> str:
    """The display state: the status, or `paused` for a pending or active step of a paused run."""
    return status_state(step.status, paused)


def status_state(status: Status, paused: bool) -> str:
    if paused and status in PAUSABLE:
        return "paused"
    return status.value


def step_ranks(plan: Sequence[Step]) -> list[Rank]:
    """The rank of every step of the plan (by position)."""
    return list(ranks_of(tuple(s.status for s in plan)))


@lru_cache(maxsize=1024)
def ranks_of(statuses: tuple[Status, ...]) -> tuple[Rank, ...]:
    """`step_ranks` from the statuses alone, cached: a write changes a step or two, so
    the same status sequences come back render after render."""
    n = len(statuses)
    ranks: list[Rank] = [_REST_DONE] * n
    active: int | None = None
    pending: list[int] = []
    blocked = 0
    for i, status in enumerate(statuses):  # one pass: blocked ranks, the active step, pending steps
        if status is Status.pending:
            pending.append(i)
        elif status is Status.blocked:
            ranks[i] = (Priority.NEEDS_PERSON, 0, blocked)
            blocked += 1
        elif status is Status.in_progress:
            active = i
    if active is not None:
        ranks[active] = (Priority.ACTIVE, 0, 0)
        pending = [i for i in pending if i > active] + [i for i in pending if i < active]
    for r, i in enumerate(pending):
        ranks[i] = (Priority.NEXT, 0, r) if r < NEXT_STEPS else (Priority.REST, 0, r)
    # done steps: nearest before the active step first (from the end without one), then
    # those after it from the end
    start = n - 1 if active is None else active - 1
    r = 0
    for i in (*range(start, -1, -1), *range(n - 1, start + 1 if active is None else active, -1)):
        if statuses[i] in DONE_STATUSES:
            ranks[i] = (Priority.RECENT, 0, r) if r < RECENT_STEPS else (Priority.REST, 1, r)
            r += 1
    return tuple(ranks)


_REST_DONE: Rank = (Priority.REST, 1, 0)


def best(ranks: Sequence[Rank], lines: int) -> list[int]:
    """Positions of the `lines` best-ranked candidates (ties: the earlier one)."""
    if lines >= len(ranks):
        return list(range(len(ranks)))
    return sorted(sorted(range(len(ranks)), key=ranks.__getitem__)[: max(lines, 0)])


@dataclass(frozen=True)
class Omitted:
    """The steps a draft left out, by kind."""

    blocked: int = 0
    active: int = 0
    done: int = 0
    pending: int = 0

    @property
    def total(self) -> int:
        return self.blocked + self.active + self.done + self.pending

    @classmethod
    def of(cls, plan: Sequence[Step], shown: set[int] | frozenset[int]) -> Omitted:
        return cls.of_statuses([s.status for s in plan], shown)

    @classmethod
    def of_statuses(cls, statuses: Sequence[Status], shown: set[int] | frozenset[int]) -> Omitted:
        counts = {"blocked": 0, "active": 0, "done": 0, "pending": 0}
        for i, status in enumerate(statuses):
            if i in shown:
                continue
            if status is Status.blocked:
                counts["blocked"] += 1
            elif status is Status.in_progress:
                counts["active"] += 1
            elif status is Status.pending:
                counts["pending"] += 1
            else:
                counts["done"] += 1
        return cls(**counts)


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
    return _take(lines, budget, from_end=False)


def take_tail(lines: Sequence[Line], budget: int) -> tuple[list[Line], bool]:
    """As many lines from the end as fit `budget` (the mirror of take_head; the first
    kept line is cut at its front with `…`)."""
    return _take(lines, budget, from_end=True)


def _take(lines: Sequence[Line], budget: int, *, from_end: bool) -> tuple[list[Line], bool]:
    out: list[Line] = []
    used = -1
    cut = False
    for line in reversed(lines) if from_end else lines:
        need = line.length + 1
        if used + need <= budget:
            out.append(line)
            used += need
            continue
        room = budget - used - 1
        if room >= 8 and not line.blank:
            out.append(cut_line(line, room, "front" if from_end else "end"))
        cut = True
        break
    if from_end:
        out.reverse()
    return (_strip_blank(out), True) if cut else (out, False)


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
    "NEXT_STEPS",
    "PAUSABLE",
    "RECENT_STEPS",
    "Omitted",
    "Priority",
    "Rank",
    "best",
    "cap_lines",
    "ranks_of",
    "squeeze",
    "status_state",
    "step_ranks",
    "step_state",
    "strip_blank",
    "take_head",
    "take_tail",
    "water_cap",
]
