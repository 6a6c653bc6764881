"""The card's lines a draft shows: the best `rows` of every line the card and its
activity could show, by the one priority order (`fit.py`), in display order."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ..config.base import RenderSettings
from ..model.card import DONE_STATUSES, Status, Step
from ..model.view import View
from .draft_lines import (
    attention_line,
    attention_lines,
    bar_line,
    header,
    marked_line,
    step_line,
    summary_line,
)
from .fit import PAUSABLE, Omitted, Priority, Rank, best, cap_lines, ranks_of
from .ir import Line, Span, plain
from .markdown import NoteBar, note_summary
from .templates import Theme
from .times import run_time, step_time

# Display order of the line kinds (steps then sort by their plan position).
_HEADER, _ATTENTION, _HEADLINE, _TOOL, _STEP, _SUMMARY, _BAR, _NOTE = range(8)

_Candidate = tuple[Rank, tuple[int, int], int, int]
"""(rank, display order, kind, step/tool/note index): plain tuples, built per render."""


@lru_cache(maxsize=1024)
def _select(
    statuses: tuple[Status, ...],
    n_attention: int,
    owner: bool,
    has_bar: bool,
    has_headline: bool,
    n_tools: int,
    n_note: int,
    rows: int,
) -> tuple[tuple[_Candidate, ...], Omitted, int, int]:
    """Which lines a draft of `rows` lines shows, in display order (see fit.py), the
    steps a summary line counts, the blocked steps the count must mention, and the
    done steps. Only the statuses and how many other lines there are decide this, so
    it is cached: the same statuses come back while the activity changes."""
    cands: list[_Candidate] = []
    for k in range(n_attention):  # after the blocked steps (group 0)
        cands.append(((Priority.NEEDS_PERSON, 1, k), (_ATTENTION, k), _ATTENTION, k))
    ranks = ranks_of(statuses)
    cands += [(rank, (_STEP, i), _STEP, i) for i, rank in enumerate(ranks)]
    if statuses:
        cands.append(((Priority.COUNT, 0, 0), (_HEADER, 0), _HEADER, 0))
    elif owner:
        cands.append(((Priority.OWNER, 0, 0), (_HEADER, 0), _HEADER, 0))
    if has_bar:
        cands.append(((Priority.NOTE_BAR, 0, 0), (_BAR, 0), _BAR, 0))
    if has_headline:
        cands.append(((Priority.ACTIVITY, 0, 0), (_HEADLINE, 0), _HEADLINE, 0))
    for r in range(n_tools):
        cands.append(((Priority.ACTIVITY, 1, r), (_TOOL, n_tools - 1 - r), _TOOL, n_tools - 1 - r))
    # note lines rank in their own order, so no more than `rows` of them can be shown
    for k in range(n_note):
        rank = (Priority.COUNT, 1, 0) if k == 0 and not statuses else (Priority.REST, 2, k)
        cands.append((rank, (_NOTE, k), _NOTE, k))

    chosen = [cands[i] for i in best([c[0] for c in cands], rows)]
    blocked_n = sum(1 for r in ranks if r[0] == Priority.NEEDS_PERSON)
    shown_blocked = sum(1 for c in chosen if c[2] == _STEP and c[0][0] == Priority.NEEDS_PERSON)
    omitted = Omitted()
    hidden_blocked = 0
    if blocked_n > shown_blocked:  # a summary line, only when blocked steps are left out
        if rows >= 2:
            chosen.remove(max(chosen, key=lambda c: c[0]))
            omitted = Omitted.of_statuses(statuses, {c[3] for c in chosen if c[2] == _STEP})
            chosen.append(((0, 0, 0), (_SUMMARY, 0), _SUMMARY, 0))
        else:
            hidden_blocked = blocked_n - shown_blocked
    chosen.sort(key=lambda c: c[1])
    done = sum(1 for status in statuses if status in DONE_STATUSES)
    return tuple(chosen), omitted, hidden_blocked, done


def card_lines(
    view: View,
    settings: RenderSettings,
    theme: Theme,
    *,
    rows: int,
    plan: Sequence[Step],
    bar: NoteBar | None,
    note: Sequence[Line],
    owner: bool,
    tools: bool,
    ended: bool = False,
) -> list[Line]:
    """The best `rows` lines of what the card and activity could show (see fit.py),
    in display order, each within `settings.maxLineChars`."""
    cap = settings.maxLineChars
    activity = view.activity
    attention = attention_lines(view, theme, ended=ended)
    statuses = tuple([s.status for s in plan])
    chosen, omitted, hidden_blocked, done = _select(
        statuses,
        len(attention),
        owner,
        bar is not None,
        bool(activity.headline and plain(activity.headline)),
        len(activity.tools) if tools else 0,
        min(len(note), rows),
        rows,
    )
    spare = rows - len(chosen)

    joiner = theme.word("joiner")
    paused = view.paused and any(status in PAUSABLE for status in statuses)
    count = ""
    parts: list[str] = []
    if plan:
        has_header = any(c[2] == _HEADER for c in chosen)
        count = theme.word("count" if has_header else "count_short", done=done, total=len(plan))
        # what else the count says, in the order it gives way when room is short
        if hidden_blocked:
            parts.append(theme.word("more_blocked", count=hidden_blocked))
        if paused:
            parts.append(theme.word("paused"))
        if (elapsed := run_time(view, theme)) is not None:  # a live run's time: `· 5 m`
            parts.append(elapsed)
        if has_header:
            count = joiner.join((count, *parts))
    tail: tuple[Span, ...] = ()
    if plan and not any(c[2] == _HEADER for c in chosen):
        tail = (Span(joiner + count), *(Span(joiner + part) for part in parts))

    lines: list[Line] = []
    shown_note = [c[3] for c in chosen if c[2] == _NOTE]
    for _, _, kind, ref in chosen:
        end = () if lines else tail
        if kind == _HEADER:
            lines += header(view, settings, theme, count, cap, owner=owner, spare=spare > 0)
        elif kind == _ATTENTION:
            lines.append(attention_line(attention[ref], theme, cap, end))
        elif kind == _STEP:
            took = step_time(view, ref, plan[ref], theme)  # `▶ Run the tests · 2 m`, `✅ Build · 40 s`
            step_end = (*end, Span(joiner + took)) if took else end
            lines.append(step_line(ref, plan[ref], view.paused, theme, cap, step_end))
        elif kind == _HEADLINE:
            lines.append(marked_line("headline", theme.marks.get("headline", ""), activity.headline or "", cap))
        elif kind == _TOOL:
            lines.append(marked_line("tool", theme.marks.get("tool", ""), activity.tools[ref], cap))
        elif kind == _BAR:
            assert bar is not None
            lines.append(bar_line(bar, theme, cap))
        elif kind == _NOTE:
            lines.append(_note_line(view, note, ref, shown_note, theme))
        elif kind == _SUMMARY:
            lines.append(summary_line(omitted, theme, cap))
    return cap_lines(lines, cap)


def _note_line(view: View, note: Sequence[Line], k: int, shown: list[int], theme: Theme) -> Line:
    """Note line `k`; a note given one line shows the note on one line (its lines
    joined with a space, `note_summary`), and the last shown line of a note cut short
    ends with `…`."""
    if len(shown) == 1 and len(note) > 1 and view.card is not None and view.card.markdown:
        return Line((Span(note_summary(view.card.markdown) or ""),), kind="note")
    line = note[k]
    if k == shown[-1] and k < len(note) - 1:
        return line.with_spans((*line.spans, Span(" " + theme.word("trimmed"))))
    return line


__all__ = ["card_lines"]
