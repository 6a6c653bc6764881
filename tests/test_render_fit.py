"""Which steps fit and how lines are cut: fit.py and ir.py."""

from __future__ import annotations

import pytest

from progresscast.card import Step
from progresscast.render.fit import Omitted, select_steps, squeeze, step_state, water_cap
from progresscast.render.ir import Line, Span, cut_line, end_cut, middle_cut, u16


def plan(statuses: str) -> list[Step]:
    """One letter per step: c completed, a in_progress, p pending, b blocked, s skipped."""
    names = {"c": "completed", "a": "in_progress", "p": "pending", "b": "blocked", "s": "skipped"}
    return [Step(step=f"s{i}", status=names[ch]) for i, ch in enumerate(statuses)]


def test_a_plan_that_fits_is_shown_whole() -> None:
    assert select_steps(plan("ccap"), 4) == ([0, 1, 2, 3], None)


def test_window_around_the_active_step_in_plan_order() -> None:
    steps = plan("c" * 10 + "a" + "p" * 10)
    kept, omitted = select_steps(steps, 6)
    # active, then pending/done alternately: 11, 9, 12, 8, 13 — shown in plan order
    assert kept == [8, 9, 10, 11, 12]
    assert omitted == Omitted(done=8, pending=8, blocked=0)


def test_blocked_steps_are_kept_before_the_window() -> None:
    steps = plan("c" * 5 + "a" + "p" * 10 + "b" + "p" * 3)
    kept, omitted = select_steps(steps, 4)
    assert kept == [5, 6, 16]  # active, blocked, then the next pending
    assert omitted == Omitted(done=5, pending=12, blocked=0)


def test_active_step_kept_even_with_a_single_row() -> None:
    steps = plan("c" * 30 + "a" + "p" * 10)
    assert select_steps(steps, 1) == ([30], Omitted(done=30, pending=10))


def test_without_an_active_step_the_first_pending_and_last_done_are_kept() -> None:
    steps = plan("cccpppp")
    kept, omitted = select_steps(steps, 4)
    assert kept == [2, 3, 4]  # the first pending (3), the last done (2), the next pending (4)
    assert omitted == Omitted(done=2, pending=2, blocked=0)


def test_pending_before_the_active_step_come_after_those_following_it() -> None:
    steps = plan("pcccapp")
    kept, _ = select_steps(steps, 4)
    assert kept == [3, 4, 5]  # active 4, next pending 5, most recent done 3


def test_skipped_counts_as_done_in_the_summary() -> None:
    steps = plan("sssscap")
    kept, omitted = select_steps(steps, 3)
    assert kept == [5, 6]
    assert omitted == Omitted(done=5, pending=0, blocked=0)


@pytest.mark.parametrize("rows", range(1, 12))
def test_selection_invariants(rows: int) -> None:
    steps = plan("ccsbcpapbpp")
    kept, omitted = select_steps(steps, rows)
    assert kept == sorted(kept)
    assert 6 in kept  # the active step
    shown_rows = len(kept) + (1 if omitted and len(kept) < rows else 0)
    assert shown_rows <= max(rows, 1)
    left = len(steps) - len(kept)
    assert (omitted.total if omitted else 0) == left


def test_paused_applies_to_unfinished_steps_only() -> None:
    states = [step_state(s, True) for s in plan("capbs")]
    assert states == ["completed", "paused", "paused", "paused", "skipped"]
    assert [step_state(s, False) for s in plan("capbs")] == ["completed", "in_progress", "pending", "blocked", "skipped"]


def test_middle_cut_keeps_both_ends_and_the_limit() -> None:
    assert middle_cut("abcdefghij", 5) == "ab…ij"
    assert middle_cut("short", 5) == "short"
    emoji = "😀" * 20  # 40 UTF-16 units
    cut = middle_cut(emoji, 9)
    assert u16(cut) <= 9 and cut.startswith("😀😀") and cut.endswith("😀😀") and "…" in cut


def test_cuts_never_leave_a_dangling_joiner() -> None:
    family = "👩\u200d👩\u200d👧\u200d👦" * 5
    for limit in range(2, 20):
        cut = middle_cut(family, limit)
        assert u16(cut) <= limit
        assert "\u200d…" not in cut and "…\u200d" not in cut
        assert not end_cut(family, limit).replace("…", "").endswith("\u200d")


def test_cut_line_keeps_the_icon_and_marks() -> None:
    line = Line((Span("✅ "), Span("x" * 50, ("b",)), Span(" — note")), kind="step", prefix=1)
    cut = cut_line(line, 20)
    assert cut.length <= 20
    assert cut.spans[0].text == "✅ "
    assert cut.spans[1].marks == ("b",)


def test_water_cap_and_squeeze() -> None:
    assert water_cap([10, 10, 100], 60) == 40
    lines = [Line((Span("y" * n),)) for n in (10, 200, 300)]
    out = squeeze(lines, 100)
    assert sum(line.length for line in out) + len(out) - 1 <= 100
    assert out[0].text == "y" * 10  # short lines are not touched
