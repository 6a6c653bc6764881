"""What a draft shows, fitted to its limits — shared by the Telegram (classic and
rich) and text renderers; each then only serialises the lines.

Mode `progress` — one status draft while the agent works, at most `maxLines` lines
(every line counted), each at most `maxLineChars` (a longer line is cut with a middle
`…`):

    label          the owner, `<agent> · <session>` (or `settings.label`), bold
    headline       `k/N complete` for a plan, else the note's first line as plain text;
                   then ` · paused` when unfinished steps show as paused, then
                   ` · <activity headline>` when the activity has one — the count comes
                   first because it is the card's own status, the activity headline
                   says what the agent does right now
    attention      `Run failed` (a failed run), what the agent waits for (the
                   activity's attention line, `Waiting for input: …`),
                   `Blocked: <step> — <note>` (or `N steps blocked: a; b`)
    tool lines     the most recent activity tool lines
    checklist      the steps (see fit.select_steps when they do not fit), then one
                   summary line `… 12 more: 9 done, 3 pending`
    note           the rest of the note, as many lines as are left, no blank lines

Lines are given out in this order of priority: the active step and the summary
line (when the plan has more than one step), the headline, the label (without a line
of its own it joins the headline: `<label> · k/N complete …`), `Run failed`, the
blocked line, checklist rows up to a window of four, the tool lines (most recent
first), more checklist rows, and last the note.

Within a line, what matters is kept whole and the rest is cut first: a step's note
before its text, the headline's ` · paused · <activity>` before `k/N complete`, the
label to a third of a joined line; the summary line drops its counts by kind
(`… 12 more`) when they do not fit. Only then is a line cut with a middle `…`.
Lengths are UTF-16 units (see `ir.py`); the whole draft also stays within the
channel's budget (4,096 for Telegram classic and text): the note goes first, then
the longest lines are cut shorter.

Modes `partial` and `block` — the answer text streamed so far (Markdown, trimmed
from the front, marked with `…`), a blank line, the headline (when there is a card),
attention lines and the whole checklist, a blank line, the note (cut at its end).
The checklist structure is never dropped: when it is long its lines are cut shorter
(middle `…`) so that the answer keeps at least half of the message when it needs it.
`block` renders like `partial`; rotating to a new message is the adapter's job.

Mode `off` — nothing (None).

Nothing to show (no card and no activity a mode shows) is None as well: the adapter
then deletes the draft. A cleared card keeps the activity: in `progress` the headline
and tool lines, in `partial`/`block` the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ..card import Status, Step
from ..config import Mode, RenderSettings
from ..view import RunState, View
from .fit import (
    UNFINISHED,
    Omitted,
    cap_lines,
    select_steps,
    squeeze,
    step_state,
    strip_blank,
    take_head,
    take_tail,
)
from .ir import Line, Span, cut_spans, middle_cut, plain, u16, visible_units
from .markdown import compact_lines, markdown_lines
from .templates import Theme

BLANK = Line((), kind="blank")
CHECKLIST_WINDOW = 4
"""Checklist rows the progress layout keeps before it gives lines to tool lines."""


MIN_EXTRA = 16
"""A secondary part (a note, the activity headline) shorter than this is dropped, not cut."""


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
    state: str | None = None,
    index: int = -1,
) -> Line:
    """A line of `head` (the icon, kept), `main` (kept whole while it fits) and `extra`
    (cut with a middle `…` first, dropped when fewer than MIN_EXTRA units are left),
    at most `cap` units."""
    avail = cap - _units(head)
    main_n, extra_n = _units(main), _units(extra)
    if main_n + extra_n <= avail:
        body = (*main, *extra)
    elif avail - main_n >= MIN_EXTRA:
        body = (*main, *cut_spans(tuple(extra), avail - main_n))
    else:
        body = cut_spans(tuple(main), max(avail, 1))
    return Line((*head, *body), kind=kind, state=state, prefix=len(head), index=index)


def label_text(view: View, settings: RenderSettings, theme: Theme) -> str:
    if settings.label and plain(settings.label):
        return plain(settings.label)
    return plain(theme.word("label", agent=view.owner.agent_id, session=view.owner.session_key))


def step_line(index: int, step: Step, paused: bool, theme: Theme, cap: int) -> Line:
    """`<icon> <step> — <note>`: the note is cut (or dropped) before the step text."""
    state = step_state(step, paused)
    marks = ("b",) if step.status is Status.in_progress else ()
    note = plain(step.note) if step.note else ""
    extra = (Span(theme.word("note")), Span(note)) if note else ()
    head = _icon(theme.icons.get(state, ""))
    return _fitted("step", head, (Span(plain(step.step), marks),), extra, cap, state=state, index=index)


def summary_line(omitted: Omitted, theme: Theme, cap: int) -> Line:
    """`… 12 more: 9 done, 3 pending`, or `… 12 more` when that does not fit."""
    parts = [
        theme.word(key, count=count)
        for key, count in (("done", omitted.done), ("pending", omitted.pending), ("blocked", omitted.blocked))
        if count
    ]
    text = theme.word("more", count=omitted.total, parts=theme.word("parts").join(parts))
    if u16(text) > cap:
        text = theme.word("more_short", count=omitted.total)
    return _fitted("summary", (), (Span(text),), (), cap)


def _headline(
    view: View, theme: Theme, plan: Sequence[Step], note: Sequence[Line]
) -> tuple[str | None, str, list[Line]]:
    """The headline's main part, its extra part (` · paused · <activity headline>`),
    and the note lines left for the body."""
    main: str | None = None
    body = list(note)
    if plan:
        done = sum(s.done for s in plan)
        main = theme.word("complete", done=done, total=len(plan))
    else:
        for k, line in enumerate(note):
            text = plain(line.text)
            if text:
                main = text
                body = strip_blank(note[k + 1 :])
                break
    parts = [main] if main else []
    if view.paused and any(s.status in UNFINISHED for s in plan):
        parts.append(theme.word("paused"))
    if view.activity.headline:
        parts.append(plain(view.activity.headline))
    if not parts:
        return None, "", body
    joiner = theme.word("joiner")
    return parts[0], "".join(joiner + p for p in parts[1:]), body


def _headline_line(main: str, extra: str, theme: Theme, cap: int, label: Span | None = None) -> Line:
    if label is None:
        head = _icon(theme.marks.get("headline", ""))
        return _fitted("headline", head, (Span(main),), (Span(extra),) if extra else (), cap)
    # the label joins the headline: the label gets at most a third of the line
    short = Span(middle_cut(label.text, max(cap // 3, 12)), label.marks)
    main_spans = (short, Span(theme.word("joiner") + main))
    return _fitted("headline", (), main_spans, (Span(extra),) if extra else (), cap)


def _attention(view: View, theme: Theme, plan: Sequence[Step], cap: int) -> list[Line]:
    """Attention lines in priority order: the failed run, what the agent waits for,
    then blocked steps."""
    out = []
    if view.run is RunState.failed:
        head = _icon(theme.marks.get("failed", ""))
        out.append(_fitted("attention", head, (Span(theme.word("failed")),), (), cap, state="failed"))
    if view.activity.attention:
        head = _icon(theme.marks.get("blocked", ""))
        out.append(_fitted("attention", head, (Span(plain(view.activity.attention)),), (), cap, state="blocked"))
    blocked = [s for s in plan if s.status is Status.blocked]
    head = _icon(theme.marks.get("blocked", ""))
    if len(blocked) == 1:
        main = Span(theme.word("blocked_one", step=plain(blocked[0].step)))
        note = plain(blocked[0].note) if blocked[0].note else ""
        extra = (Span(theme.word("note") + note),) if note else ()
        out.append(_fitted("attention", head, (main,), extra, cap, state="blocked"))
    elif blocked:
        names = theme.word("blocked_list").join(plain(s.step) for s in blocked[:12])
        text = theme.word("blocked_many", count=len(blocked), steps=names)
        out.append(_fitted("attention", head, (Span(text),), (), cap, state="blocked"))
    return out


def _checklist(plan: Sequence[Step], rows: int, paused: bool, theme: Theme, cap: int) -> list[Line]:
    kept, omitted = select_steps(plan, rows)
    lines = [step_line(i, plan[i], paused, theme, cap) for i in kept]
    if omitted is not None and len(kept) < rows:
        lines.append(summary_line(omitted, theme, cap))
    return lines


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


def _progress(view: View, settings: RenderSettings, theme: Theme, budget: int) -> list[Line] | None:
    card = view.card
    plan: Sequence[Step] = (card.plan or ()) if card else ()
    note = compact_lines(card.markdown, "note") if card and card.markdown else ()
    activity = view.activity
    if not (plan or note or activity.headline or activity.tools or activity.attention):
        return None
    cap = settings.maxLineChars
    main, extra, body = _headline(view, theme, plan, note)
    label = Span(label_text(view, settings, theme), ("b",))

    n = len(plan)
    need = min(n, 2)  # the active step (or the next one) and the summary line
    window = min(n, CHECKLIST_WINDOW)
    left = settings.maxLines - need
    head: list[Line] = []
    if main is not None:
        left -= 1
    if left >= 1:
        head = [_fitted("label", (), (label,), (), cap)]
        if main is not None:
            head.append(_headline_line(main, extra, theme, cap))
        left -= 1
    else:  # the label joins the headline on one line
        assert main is not None
        head = [_headline_line(main, extra, theme, cap, label)]
    attention = []
    for line in _attention(view, theme, plan, cap):
        if left >= 1:
            attention.append(line)
            left -= 1
    tools_n = min(len(activity.tools), max(0, left - max(window - need, 0)))
    recent = activity.tools[len(activity.tools) - tools_n :] if tools_n else ()
    tool_icon = _icon(theme.marks.get("tool", ""))
    tools = [_fitted("tool", tool_icon, (Span(plain(t)),), (), cap) for t in recent]
    left -= tools_n
    rows = need + left
    checklist = _checklist(plan, rows, view.paused, theme, cap) if plan else []
    note_rows = rows - len(checklist)
    note_lines = body[: max(note_rows, 0)]
    if len(body) > len(note_lines) and note_lines:
        _mark_trimmed_end(note_lines, theme)

    lines = cap_lines([*head, *attention, *tools, *checklist, *note_lines], cap)
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


def _preview(
    view: View, settings: RenderSettings, theme: Theme, budget: int, max_items: int | None
) -> list[Line] | None:
    card = view.card
    plan: Sequence[Step] = (card.plan or ()) if card else ()
    note = list(markdown_lines(card.markdown, "note")) if card and card.markdown else []
    answer = view.activity.answer
    answer_lines = list(markdown_lines(_answer_window(answer, budget), "answer")) if answer else []
    if not (plan or note or answer_lines):
        return None

    struct: list[Line] = []
    body: list[Line] = []
    if plan or note:
        cap = settings.maxLineChars
        main, extra, body = _headline(view, theme, plan, note)
        struct = [_headline_line(main, extra, theme, cap)] if main is not None else []
        struct += _attention(view, theme, plan, cap)
        struct += [step_line(i, s, view.paused, theme, cap) for i, s in enumerate(plan)]
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
            while kept and _items(kept) > count:
                kept.pop(0)
                trimmed = True
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
            while kept and _items(kept) > count:
                kept.pop()
                trimmed = True
            kept = strip_blank(kept)
        if trimmed and kept and not kept[-1].text.endswith(theme.word("trimmed")):
            _mark_trimmed_end(kept, theme)
        if kept:
            if lines:
                lines.append(BLANK)
            lines += kept
    return strip_blank(lines) or None


__all__ = ["compose", "label_text", "step_line", "summary_line"]
