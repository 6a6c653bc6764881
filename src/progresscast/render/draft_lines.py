"""One line of a draft of each kind — step, summary, bar, attention, header, activity —
fitted to the line cap: what matters in a line is kept whole and the rest cut first
(see `draft.py`). Cached by content where a render makes many of them."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache

from ..config.base import RenderSettings
from ..model.card import Status, Step
from ..model.view import RunState, View
from .asks import stopping_line, waiting_line
from .fit import Omitted, status_state
from .ir import Line, Span, cut_spans, plain, u16
from .markdown import NoteBar
from .templates import Theme

MIN_EXTRA = 16
"""A secondary part (a step's note) shorter than this is dropped, not cut."""
MIN_LABEL = 12
"""A label cut shorter than this to share the count's line is left out instead."""
MIN_MAIN = 8
"""A line's main text keeps at least this many units (or all of it) before a joined
tail (` · 1/4 · paused`) gives up its parts, last part first."""


def _icon(text: str) -> tuple[Span, ...]:
    return (Span(text + " "),) if text else ()


def _units(spans: Sequence[Span]) -> int:
    return sum(u16(s.text) for s in spans)


def fitted(
    kind: str,
    head: tuple[Span, ...],
    main: Sequence[Span],
    extra: Sequence[Span],
    cap: int,
    *,
    tail: Sequence[Span] = (),
    state: str | None = None,
    index: int = -1,
) -> Line:
    """A line of `head` (the icon, kept), `main` (kept whole while it fits), `extra`
    (cut with a middle `…` first, dropped when fewer than MIN_EXTRA units are left)
    and `tail` (kept while `main` keeps MIN_MAIN units; else its spans go, last
    first), at most `cap` units."""
    main_n, extra_n = _units(main), _units(extra)
    tail = tuple(tail)
    while tail and cap - _units(head) - _units(tail) < min(main_n, MIN_MAIN):
        tail = tail[:-1]
    avail = cap - _units(head) - _units(tail)
    if main_n + extra_n <= avail:
        body = (*main, *extra)
    elif avail - main_n >= MIN_EXTRA:
        body = (*main, *cut_spans(tuple(extra), avail - main_n))
    else:
        body = cut_spans(tuple(main), max(avail, 1))
    return Line((*head, *body, *tail), kind=kind, state=state, prefix=len(head), index=index)


def label_text(view: View, settings: RenderSettings, theme: Theme) -> str:
    if settings.label and plain(settings.label):
        return plain(settings.label)
    return plain(theme.word("label", agent=view.owner.agent_id, session=view.owner.session_key))


def step_line(index: int, step: Step, paused: bool, theme: Theme, cap: int, tail: Sequence[Span] = ()) -> Line:
    """`<icon> <step> — <note>[<tail>]`: the note is cut (or dropped) before the step text."""
    return _step_line(index, step.step, step.status, step.note, paused, theme, cap, tuple(tail))


@lru_cache(maxsize=4096)
def _step_line(
    index: int, text: str, status: Status, note_text: str | None, paused: bool, theme: Theme, cap: int,
    tail: tuple[Span, ...],
) -> Line:
    # Cached by content: a write changes a step or two, the other lines come back as they were.
    state = status_state(status, paused)
    marks = ("b",) if status is Status.in_progress else ()
    note = plain(note_text) if note_text else ""
    extra = (Span(theme.word("note")), Span(note)) if note else ()
    head = _icon(theme.icons.get(state, ""))
    main = (Span(plain(text), marks),)
    return fitted("step", head, main, extra, cap, tail=tail, state=state, index=index)


def summary_line(omitted: Omitted, theme: Theme, cap: int) -> Line:
    """`… 12 more: 2 blocked, 1 in progress, 6 done, 3 pending` — kinds dropped from the
    end while it does not fit, down to `… 12 more`."""
    parts = [
        theme.word(key, count=count)
        for key, count in (
            ("blocked", omitted.blocked),
            ("active", omitted.active),
            ("done", omitted.done),
            ("pending", omitted.pending),
        )
        if count
    ]
    text = theme.word("more_short", count=omitted.total)
    for k in range(len(parts), 0, -1):
        full = theme.word("more", count=omitted.total, parts=theme.word("parts").join(parts[:k]))
        if u16(full) <= cap:
            text = full
            break
    return fitted("summary", (), (Span(text),), (), cap)


def bar_line(bar: NoteBar, theme: Theme, cap: int) -> Line:
    """The note's own progress bar as text: `▰▰▰▱▱▱▱ Tests · 3/7`."""
    width = bar.width()
    filled = bar.cells()
    cells = theme.marks.get("bar_full", "▰") * filled + theme.marks.get("bar_empty", "▱") * (width - filled)
    return fitted("bar", (Span(cells + " "),), (Span(bar.caption),), (), cap)


def attention_lines(view: View, theme: Theme, *, ended: bool = False) -> list[tuple[str, str, str]]:
    """What needs a person besides blocked steps (those are checklist rows), in rank
    order: (state, mark key, text) — a failed run (unless the line that ends the run,
    `ended`, says so), then what the agent waits for (the activity's attention line,
    `Waiting for input: …`) — after the open asks (`❓ Waiting for you: …`) and a Stop
    pressed on the live run (`⏹ Stopping — NAME`)."""
    out = []
    # An open ask first: the draft says at its top that the agent waits for a person.
    out += [("blocked", "", waiting_line(ask)) for ask in view.open_asks]
    if view.stop is not None and view.run is RunState.active:
        out.append(("blocked", "", stopping_line(view.stop)))
    if view.run is RunState.failed and not ended:
        out.append(("failed", "failed", theme.word("failed")))
    if view.activity.attention:
        out.append(("blocked", "blocked", plain(view.activity.attention)))
    return out


def attention_line(item: tuple[str, str, str], theme: Theme, cap: int, tail: Sequence[Span] = ()) -> Line:
    state, mark, text = item
    head = _icon(theme.marks.get(mark, ""))
    return fitted("attention", head, (Span(text),), (), cap, tail=tail, state=state)


def header(
    view: View, settings: RenderSettings, theme: Theme, count: str, cap: int, *, owner: bool, spare: bool
) -> list[Line]:
    """The label and the count on one line when both fit; else the label on a line of
    its own when there is one spare, else cut (or left out) to leave the count whole."""
    label = label_text(view, settings, theme) if owner else None
    return list(_header_lines(label, count, theme.word("joiner"), cap, spare))


@lru_cache(maxsize=16_384)  # per label and count: 1,024 thrashed at 300 chats × 10 counts
def _header_lines(label_text: str | None, count: str, joiner: str, cap: int, spare: bool) -> tuple[Line, ...]:
    label = Span(label_text, ("b",)) if label_text is not None else None
    if not count:
        return (fitted("label", (), (label,), (), cap),) if label is not None else ()
    joined = Span(joiner + count)
    if label is None:
        return (fitted("header", (), (Span(count),), (), cap),)
    if _units((label, joined)) <= cap:
        return (Line((label, joined), kind="header"),)
    if spare:
        return (fitted("label", (), (label,), (), cap), fitted("header", (), (Span(count),), (), cap))
    room = cap - _units((joined,))
    if room >= MIN_LABEL:
        return (Line((*cut_spans((label,), room), joined), kind="header"),)
    return (fitted("header", (), (Span(count),), (), cap),)


@lru_cache(maxsize=1024)
def marked_line(kind: str, mark: str, text: str, cap: int) -> Line:
    """An activity line (headline, tool): its mark, then its text cut to `cap`."""
    return fitted(kind, _icon(mark), (Span(plain(text)),), (), cap)


__all__ = [
    "attention_line",
    "attention_lines",
    "bar_line",
    "fitted",
    "header",
    "label_text",
    "marked_line",
    "step_line",
    "summary_line",
]
