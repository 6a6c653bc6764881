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

from ..config.base import Mode, RenderSettings
from ..model.card import Step
from ..model.view import View
from .card_lines import card_lines
from .draft_lines import fitted
from .ending import end_line
from .fit import squeeze, strip_blank, take_head, take_tail
from .ir import Line, Span, visible_units
from .markdown import NoteBar, compact_lines, markdown_lines, note_parts
from .templates import Theme

BLANK = Line((), kind="blank")


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
    lines = card_lines(
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
    if answer[start - 1] != "\n":
        # Cut mid-line: what follows the cut is no line start ("~~~~" of "~~s~~~~s~~"
        # would open a code fence and hide the rest), so it is marked as a continuation.
        tail = "…" + tail
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
    top = fitted("end", (), (Span(ended, ("b",)),), (), settings.maxLineChars)
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
        struct = card_lines(
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


__all__ = ["compose"]
