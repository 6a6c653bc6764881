"""What a draft shows, fitted to its limits — shared by every chat channel's renderer
(Telegram classic and rich, text, and later ones); each then only serialises the lines.

Mode `progress` — one status draft while the agent works, at most `maxLines` lines
(every line counted, any `maxLines` ≥ 1), each at most `maxLineChars` (a longer line
is cut with a middle `…`). The lines it may show, in display order:

    header         `<agent> · <session> · k/N done[ · paused]` — the label (or
                   `settings.label`) and the count share a line when both fit
    attention      `Run failed` (and any other line that needs a person)
    activity       the activity headline, then the most recent tool lines
    checklist      steps in plan order (`<icon> <step> — <note>`), then a summary
                   line `… 5 more: 2 blocked, 3 pending` only when blocked steps were
                   left out
    bar            the note's own progress bar, `▰▰▰▱▱▱▱ Tests · 3/7`
    note           the rest of the note (without a plan, its first line ranks with
                   the count), no blank lines

Which of them are shown is decided by one priority order (see `fit.py`): what needs a
person, the active step, `k/N`, the note's bar, the label, the next pending and
latest done steps, the activity, then the rest. A blocked step is shown as its
checklist row (with its note): there is no separate `Blocked:` line repeating it —
the row keeps the step's place in the plan, and one line says it once. When the
header has no line of its own, the count joins the first line: `⛔ Confirm access ·
1/4`. A note that gets a single line shows its lines joined with one space.

Within a line, what matters is kept whole and the rest is cut first: a step's note
before its text, the label before the count. Only then is a line cut with a middle
`…`. Lengths are UTF-16 units (see `ir.py`); the whole draft also stays within the
channel's budget (4,096 for Telegram classic and text): the note goes first, then the
longest lines are cut shorter.

Modes `partial` and `block` — the answer text streamed so far (Markdown, trimmed
from the front, marked with `…`), a blank line, the card's lines chosen by the same
priorities within `checklistLines` lines (the count, what needs a person, the
checklist, the activity headline, the note's bar; no label and no tool lines), a
blank line, the note (cut at its end). When the card's lines are long they are cut
shorter (middle `…`) so that the answer keeps at least half of the message when it
needs it. `block` renders like `partial`; rotating to a new message is the adapter's
job. Once the run has ended, the preview is its answer: it is headed by the line that
says how the run ended (`render/ending.py`, bold, cut to `maxLineChars`), which then
says a failed run instead of an attention line.

Mode `off` — nothing (None).

Nothing to show (no card and no activity a mode shows) is None as well: the adapter
then deletes the draft. A cleared card keeps the activity: in `progress` the headline
and tool lines, in `partial`/`block` the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import lru_cache

from ..config.base import Mode, RenderSettings
from ..model.card import DONE_STATUSES, Status, Step
from ..model.view import RunState, View
from .ending import end_line
from .fit import (
    PAUSABLE,
    Omitted,
    Priority,
    Rank,
    best,
    cap_lines,
    ranks_of,
    squeeze,
    status_state,
    strip_blank,
    take_head,
    take_tail,
)
from .ir import Line, Span, cut_spans, plain, u16, visible_units
from .markdown import NoteBar, compact_lines, markdown_lines, note_parts, note_summary
from .templates import Theme

BLANK = Line((), kind="blank")

MIN_EXTRA = 16
"""A secondary part (a step's note) shorter than this is dropped, not cut."""
MIN_LABEL = 12
"""A label cut shorter than this to share the count's line is left out instead."""
MIN_MAIN = 8
"""A line's main text keeps at least this many units (or all of it) before a joined
tail (` · 1/4 · paused`) gives up its parts, last part first."""

# Display order of the line kinds (steps then sort by their plan position).
_HEADER, _ATTENTION, _HEADLINE, _TOOL, _STEP, _SUMMARY, _BAR, _NOTE = range(8)


def _icon(text: str) -> tuple[Span, ...]:
    return (Span(text + " "),) if text else ()


def _units(spans: Sequence[Span]) -> int:
    return sum(u16(s.text) for s in spans)


def _fitted(
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
    return _fitted("step", head, main, extra, cap, tail=tail, state=state, index=index)


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
    return _fitted("summary", (), (Span(text),), (), cap)


def bar_line(bar: NoteBar, theme: Theme, cap: int) -> Line:
    """The note's own progress bar as text: `▰▰▰▱▱▱▱ Tests · 3/7`."""
    width = bar.width()
    filled = bar.cells()
    cells = theme.marks.get("bar_full", "▰") * filled + theme.marks.get("bar_empty", "▱") * (width - filled)
    return _fitted("bar", (Span(cells + " "),), (Span(bar.caption),), (), cap)


def attention_lines(view: View, theme: Theme, *, ended: bool = False) -> list[tuple[str, str, str]]:
    """What needs a person besides blocked steps (those are checklist rows), in rank
    order: (state, mark key, text) — a failed run (unless the line that ends the run,
    `ended`, says so), then what the agent waits for (the activity's attention line,
    `Waiting for input: …`)."""
    out = []
    if view.run is RunState.failed and not ended:
        out.append(("failed", "failed", theme.word("failed")))
    if view.activity.attention:
        out.append(("blocked", "blocked", plain(view.activity.attention)))
    return out


def _attention_line(item: tuple[str, str, str], theme: Theme, cap: int, tail: Sequence[Span] = ()) -> Line:
    state, mark, text = item
    head = _icon(theme.marks.get(mark, ""))
    return _fitted("attention", head, (Span(text),), (), cap, tail=tail, state=state)


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


def _card_lines(
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
            lines += _header(view, settings, theme, count, cap, owner=owner, spare=spare > 0)
        elif kind == _ATTENTION:
            lines.append(_attention_line(attention[ref], theme, cap, end))
        elif kind == _STEP:
            lines.append(step_line(ref, plan[ref], view.paused, theme, cap, end))
        elif kind == _HEADLINE:
            lines.append(_marked_line("headline", theme.marks.get("headline", ""), activity.headline or "", cap))
        elif kind == _TOOL:
            lines.append(_marked_line("tool", theme.marks.get("tool", ""), activity.tools[ref], cap))
        elif kind == _BAR:
            assert bar is not None
            lines.append(bar_line(bar, theme, cap))
        elif kind == _NOTE:
            lines.append(_note_line(view, note, ref, shown_note, theme))
        elif kind == _SUMMARY:
            lines.append(summary_line(omitted, theme, cap))
    return cap_lines(lines, cap)


def _header(
    view: View, settings: RenderSettings, theme: Theme, count: str, cap: int, *, owner: bool, spare: bool
) -> list[Line]:
    """The label and the count on one line when both fit; else the label on a line of
    its own when there is one spare, else cut (or left out) to leave the count whole."""
    label = label_text(view, settings, theme) if owner else None
    return list(_header_lines(label, count, theme.word("joiner"), cap, spare))


@lru_cache(maxsize=1024)
def _header_lines(label_text: str | None, count: str, joiner: str, cap: int, spare: bool) -> tuple[Line, ...]:
    label = Span(label_text, ("b",)) if label_text is not None else None
    if not count:
        return (_fitted("label", (), (label,), (), cap),) if label is not None else ()
    joined = Span(joiner + count)
    if label is None:
        return (_fitted("header", (), (Span(count),), (), cap),)
    if _units((label, joined)) <= cap:
        return (Line((label, joined), kind="header"),)
    if spare:
        return (_fitted("label", (), (label,), (), cap), _fitted("header", (), (Span(count),), (), cap))
    room = cap - _units((joined,))
    if room >= MIN_LABEL:
        return (Line((*cut_spans((label,), room), joined), kind="header"),)
    return (_fitted("header", (), (Span(count),), (), cap),)


@lru_cache(maxsize=1024)
def _marked_line(kind: str, mark: str, text: str, cap: int) -> Line:
    """An activity line (headline, tool): its mark, then its text cut to `cap`."""
    return _fitted(kind, _icon(mark), (Span(plain(text)),), (), cap)


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


def _mark_trimmed_end(lines: list[Line], theme: Theme) -> None:
    if lines:
        last = lines[-1]
        lines[-1] = last.with_spans((*last.spans, Span(" " + theme.word("trimmed"))))


def compose(
    view: View, settings: RenderSettings, theme: Theme, *, budget: int, max_items: int | None = None
) -> list[Line] | None:
    """The fitted lines of a draft, or None when the mode shows nothing.

    `budget` is the most visible UTF-16 units (lines joined by newlines); `max_items`,
    if set, the most non-blank lines (rich messages count blocks)."""
    if settings.mode is Mode.off:
        return None
    if settings.mode is Mode.progress:
        return _progress(view, settings, theme, budget)
    return _preview(view, settings, theme, budget, max_items)


def _note_of(view: View) -> tuple[NoteBar | None, str]:
    card = view.card
    if card is None or not card.markdown:
        return None, ""
    return note_parts(card.markdown)


def _progress(view: View, settings: RenderSettings, theme: Theme, budget: int) -> list[Line] | None:
    card = view.card
    plan: Sequence[Step] = (card.plan or ()) if card else ()
    bar, rest = _note_of(view)
    note = compact_lines(rest, "note") if rest else ()
    activity = view.activity
    if not (plan or note or bar or activity.headline or activity.tools or activity.attention):
        return None
    lines = _card_lines(
        view, settings, theme, rows=settings.maxLines, plan=plan, bar=bar, note=note, owner=True, tools=True
    )
    if visible_units(lines) > budget:
        while lines and lines[-1].kind == "note" and visible_units(lines) > budget:
            lines.pop()
        lines = squeeze(lines, budget)
    return lines


def _answer_window(answer: str, budget: int) -> str:
    """The tail of a long answer worth parsing; reopens a code fence cut in half."""
    limit = max(2 * budget, 8192)
    if len(answer) <= limit:
        return answer
    start = len(answer) - limit
    newline = answer.find("\n", start)
    if newline != -1 and newline - start < 2048:
        start = newline + 1
    fences = sum(1 for row in answer[:start].split("\n") if row.lstrip().startswith(("```", "~~~")))
    tail = answer[start:]
    return "```\n" + tail if fences % 2 else tail


def _items(lines: Sequence[Line]) -> int:
    """Rich blocks the lines become: a paragraph per line, 1 + 2 per step for the list."""
    steps = sum(line.kind == "step" for line in lines)
    others = sum(1 for line in lines if line.kind != "step" and not line.blank)
    return others + 2 * steps + (1 if steps else 0)


def _drop_to_items(lines: list[Line], count: int, *, first: bool) -> bool:
    """Drop lines from the front (`first`) or the end until the rest become at most
    `count` rich blocks; whether any was dropped. Counted down as lines go: a long
    answer has thousands of lines."""
    steps = sum(line.kind == "step" for line in lines)
    others = sum(1 for line in lines if line.kind != "step" and not line.blank)
    dropped = False
    while lines and others + 2 * steps + (1 if steps else 0) > count:
        line = lines.pop(0 if first else -1)
        if line.kind == "step":
            steps -= 1
        elif not line.blank:
            others -= 1
        dropped = True
    return dropped


def _preview(
    view: View, settings: RenderSettings, theme: Theme, budget: int, max_items: int | None
) -> list[Line] | None:
    # The preview is the run's answer: once the run ended, it is headed by how (not a
    # card written after that), and a failed run is said there, once.
    ended = None if view.after_end else end_line(view, theme)
    if ended is None:
        return _preview_body(view, settings, theme, budget, max_items, ended=False)
    top = _fitted("end", (), (Span(ended, ("b",)),), (), settings.maxLineChars)
    reserve = top.length + 2  # the head and a blank line
    items = None if max_items is None else max(max_items - 1, 0)
    lines = _preview_body(view, settings, theme, max(budget - reserve, 1), items, ended=True)
    return [top, BLANK, *lines] if lines else [top]


def _preview_body(
    view: View, settings: RenderSettings, theme: Theme, budget: int, max_items: int | None, *, ended: bool
) -> list[Line] | None:
    card = view.card
    plan: Sequence[Step] = (card.plan or ()) if card else ()
    bar, rest = _note_of(view)
    note = list(markdown_lines(rest, "note")) if rest else []
    answer = view.activity.answer
    answer_lines = list(markdown_lines(_answer_window(answer, budget), "answer")) if answer else []
    if not (plan or note or bar or answer_lines):
        return None

    struct: list[Line] = []
    body: list[Line] = []
    if plan or note or bar:
        head: list[Line] = []
        body = note
        if not plan:  # the note's first line stands in for the count
            top = next((k for k, line in enumerate(note) if not line.blank), None)
            if top is not None:
                head = [note[top]]
                body = strip_blank(note[top + 1 :])
        rows = settings.checklistLines or settings.maxLines
        struct = _card_lines(
            view, settings, theme, rows=rows, plan=plan, bar=bar, note=head, owner=False, tools=False, ended=ended
        )
    answer_units = visible_units(answer_lines)
    reserve = min(answer_units, budget // 2)
    room = budget - reserve - (2 if answer_lines else 0) - (2 if body else 0)
    if visible_units(struct) > room:
        struct = squeeze(struct, room)
    used = visible_units(struct)

    # The answer, trimmed from the front.
    if answer_lines:
        room = budget - used - (2 if struct else 0) - 1  # 1 for the leading "…"
        count = None if max_items is None else max(max_items - _items(struct), 0)
        kept, trimmed = take_tail(answer_lines, room)
        if count is not None:
            trimmed = _drop_to_items(kept, count, first=True) or trimmed
            kept = strip_blank(kept)
        if trimmed and kept and not kept[0].text.startswith(theme.word("trimmed")):
            first = kept[0]
            kept[0] = replace(first, spans=(Span(theme.word("trimmed")), *first.spans), prefix=0)
        answer_lines = kept
    lines = list(answer_lines)
    if struct:
        if lines:
            lines.append(BLANK)
        lines += struct

    # The note, cut at its end.
    if body:
        room = budget - visible_units(lines) - (2 if lines else 0) - 2  # 2 for " …"
        count = None if max_items is None else max(max_items - _items(lines), 0)
        kept, trimmed = take_head(body, room)
        if count is not None:
            trimmed = _drop_to_items(kept, count, first=False) or trimmed
            kept = strip_blank(kept)
        if trimmed and kept and not kept[-1].text.endswith(theme.word("trimmed")):
            _mark_trimmed_end(kept, theme)
        if kept:
            if lines:
                lines.append(BLANK)
            lines += kept
    return strip_blank(lines) or None


__all__ = ["attention_lines", "bar_line", "compose", "label_text", "step_line", "summary_line"]
