"""The priority order of steps (fit.py) and how lines are cut (ir.py)."""

from __future__ import annotations

import pytest

from progresscast.model.card import Step
from progresscast.render.fit import Omitted, Priority, best, squeeze, step_ranks, step_state, water_cap
from progresscast.render.ir import Line, Span, clusters, cut_line, cut_spans, end_cut, middle_cut, u16


def plan(statuses: str) -> list[Step]:
    """One letter per step: c completed, a in_progress, p pending, b blocked, s skipped."""
    names = {"c": "completed", "a": "in_progress", "p": "pending", "b": "blocked", "s": "skipped"}
    return [Step(step=f"s{i}", status=names[ch]) for i, ch in enumerate(statuses)]


def shown(steps: list[Step], rows: int) -> list[int]:
    return best(step_ranks(steps), rows)


def test_a_plan_that_fits_is_shown_whole() -> None:
    assert shown(plan("ccap"), 4) == [0, 1, 2, 3]


def test_blocked_outranks_active_outranks_pending_outranks_done() -> None:
    steps = plan("ccbcap" + "p" * 5)
    ranks = step_ranks(steps)
    assert ranks[2][0] == Priority.NEEDS_PERSON
    assert ranks[4][0] == Priority.ACTIVE
    assert ranks[5][0] == Priority.NEXT and ranks[6][0] == Priority.NEXT and ranks[7][0] == Priority.REST
    assert ranks[3][0] == Priority.RECENT and ranks[1][0] == Priority.REST
    assert shown(steps, 1) == [2]
    assert shown(steps, 2) == [2, 4]
    assert shown(steps, 4) == [2, 4, 5, 6]  # the next pending steps before the last done one
    assert shown(steps, 5) == [2, 3, 4, 5, 6]
    # what is left: more pending steps first, then more done steps
    assert shown(steps, 7) == [2, 3, 4, 5, 6, 7, 8]
    assert shown(steps, 11) == list(range(11))


def test_next_pending_come_after_the_active_step_first() -> None:
    steps = plan("pcccapp")
    assert shown(steps, 3) == [4, 5, 6]  # active 4, next pending 5 and 6
    assert shown(steps, 4) == [3, 4, 5, 6]  # then the most recent done step


def test_without_an_active_step_the_first_pending_and_last_done_rank_first() -> None:
    steps = plan("cccpppp")
    assert shown(steps, 3) == [2, 3, 4]  # the first two pending, the last done


def test_every_blocked_step_ranks_before_the_active_one() -> None:
    steps = plan("b" * 4 + "a" + "p" * 3)
    assert shown(steps, 4) == [0, 1, 2, 3]
    assert shown(steps, 5) == [0, 1, 2, 3, 4]


def test_omitted_counts_every_kind_and_adds_up() -> None:
    steps = plan("ccsbcapbpp")
    omitted = Omitted.of(steps, {3})
    assert omitted == Omitted(blocked=1, active=1, done=4, pending=3)
    assert omitted.total + 1 == len(steps)


@pytest.mark.parametrize("rows", range(0, 12))
def test_selection_invariants(rows: int) -> None:
    steps = plan("ccsbcpapbpp")
    kept = shown(steps, rows)
    assert kept == sorted(kept) and len(kept) == min(rows, len(steps))
    blocked = [i for i, s in enumerate(steps) if s.status.value == "blocked"]
    if rows >= len(blocked):
        assert set(blocked) <= set(kept)  # what needs a person first
    else:
        assert set(kept) <= set(blocked)
    if rows > len(blocked):
        assert 6 in kept  # the active step, right after what needs a person



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


MULTI = ["👩\u200d👩\u200d👧\u200d👦", "🇺🇦", "👍🏽", "❤️", "1️⃣", "🏴\U000e0067\U000e0062\U000e0073\U000e0063\U000e0074\U000e007f", "e\u0301"]


@pytest.mark.parametrize("emoji", MULTI)
def test_cuts_never_split_a_multi_codepoint_character(emoji: str) -> None:
    text = "ab" + emoji * 6 + "cd"
    whole = set(clusters(text))
    for limit in range(1, u16(text) + 1):
        for cut in (middle_cut(text, limit), end_cut(text, limit)):
            assert u16(cut) <= limit
            for part in cut.split("…"):
                # every piece is made of whole clusters of the original
                assert part == "" or part in text
                start = text.find(part) if part and text.startswith(part) else text.rfind(part)
                assert start in whole and start + len(part) in whole, (limit, cut)


def test_cut_spans_keep_whole_clusters_across_marks() -> None:
    spans = (Span("🇺🇦" * 5, ("b",)), Span(" and " + "👍🏽" * 5))
    for limit in range(1, 40):
        out = cut_spans(spans, limit)
        text = "".join(s.text for s in out)
        assert u16(text) <= limit
        assert "\U0001f3fd" not in text.replace("👍🏽", "")  # no lone skin tone
        assert text.replace("🇺🇦", "").count("\U0001f1fa") == 0  # no lone regional indicator
