"""Slack: Block Kit drafts, the plan display, and the final answer.

`render_slack(view, settings)` returns the Slack Web API call that shows the draft,
or None when the draft should not exist (mode `off`, or nothing to show: the adapter
deletes it). The layout and the selection are the shared ones (`draft.compose`); this
module only serialises the fitted lines.

Block Kit (`chat.postMessage`; the adapter adds `channel`, `thread_ts`, `ts`):

    context     the label and the count (`header`), one mrkdwn element each
    section     attention lines, the note's bar, the note, the answer text — mrkdwn
    context     the activity: its headline and tool lines
    rich_text   the checklist: a `rich_text_list` whose items carry the state's icon
                (✅ ▶️ ⬜ ⛔ ⏭️ ⏸️, from `templates/slack/theme.j2`), the active step
                bold, a skipped one struck through; the summary line (`… 12 more`)
                after the list, in italics

Agent text never turns into Slack markup: in mrkdwn `&`, `<` and `>` are escaped, so
`<!channel>`, `<@U…>` and `<url|text>` cannot be spelled by a card; the only `<…>`
this module writes are links from real Markdown links (http/https). `rich_text`
elements are literal text by construction. Limits: at most 50 blocks, each text
object (a section's text, a context element, one rich_text block's text) at most
3,000 characters (counted in UTF-16 units, escapes and markup included), the
message's `text` at most 40,000. The draft is fitted to 12,000 visible characters
first and to half as many again while the blocks would break a limit.

`text` (the notification text, and what clients without Block Kit show) is the
draft's plain text, mrkdwn-escaped. `fallback` is the call to make when Slack
refuses the blocks (`invalid_blocks`, `msg_too_long`): the same text without blocks.

Plan display (`settings.rich`): `chat.startStream` with `task_display_mode="plan"`
and `chunks` — one `plan_update` whose title is the label and the count (plus `Run
failed`, `⏹ Stopping — NAME` once Stop was pressed, and what the selection left
out), then one `task_update` per shown step:
`id` `step-<n>` (its position in the plan), `title` the step, `status`
`pending|in_progress|complete|error`; states without a Slack status say so in
`details` (blocked → `error` "Blocked", skipped → `complete` "Skipped", paused →
`pending` "Paused", each followed by the step's note); the active step's `output`
holds the activity (headline and tool lines). Titles and details are plain text (≤ 256 characters). The note
is not part of the plan display (a stream can only be appended to, so a note could
not be kept current). `fallback` is the Block Kit call, for where a stream does not
apply or is refused. Once the run has ended the call is `chat.stopStream` with the
same chunks: the plan's last state, and the end of the stream (one cannot be started
stopped: a new message is started with the same chunks first, and stopped by a call of
its own — `slack_payload`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.card import Step
from ..model.view import TERMINAL, RunState, View
from .answer import answer_lines, split_answer
from .asks import stopping_line
from .draft import compose
from .ending import head_lines
from .ir import Line, Span, cut_line, merge_runs, middle_cut, plain, runs_by_group, spaced, split_line, u16
from .templates import Theme, theme

MAX_BLOCKS = 50
MAX_TEXT_OBJECT = 3000
MAX_MESSAGE_TEXT = 40_000
MAX_CONTEXT_ELEMENTS = 10
MAX_TASK_TEXT = 256
DRAFT_BUDGET = 12_000
MIN_BUDGET = 200
ANSWER_CHUNK = 12_000
"""Visible characters per final-answer message before it is split further."""

_ESCAPES = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}
_ESCAPE = re.compile("[&<>]")
_DELIMITERS = {"b": "*", "i": "_", "s": "~", "code": "`"}
_STYLE = {"b": "bold", "i": "italic", "s": "strike", "code": "code"}
_SAFE_URL = re.compile(r"(?i)https?://[^\s<>|\x00-\x1f\x7f]+")
_URL_QUOTES = {"<": "%3C", ">": "%3E", "|": "%7C", " ": "%20"}

_TASK_STATUS = {
    "completed": "complete",
    "in_progress": "in_progress",
    "pending": "pending",
    "blocked": "error",
    "skipped": "complete",
    "paused": "pending",
}
_STATE_WORD = {"blocked": "state_blocked", "skipped": "state_skipped", "paused": "state_paused"}


# --- mrkdwn ---------------------------------------------------------------------------


def escape(text: str) -> str:
    """Agent text made literal in Slack mrkdwn: `&`, `<`, `>` as entities."""
    return _ESCAPE.sub(lambda m: _ESCAPES[m.group()], text)


def _url(href: str | None) -> str | None:
    """An http(s) link target safe inside `<…|…>`, or None."""
    if not href or not _SAFE_URL.fullmatch(href):
        return None
    return "".join(_URL_QUOTES.get(ch, ch) for ch in href).replace("&", "&amp;")


def _span_mrkdwn(span: Span) -> str:
    lead, core, trail = spaced(span.text)
    if not core:
        return escape(span.text)
    out = escape(core)
    for mark in reversed(span.marks):
        delimiter = _DELIMITERS.get(mark)
        # Slack has no escape for its delimiters: a mark whose delimiter the text holds
        # would end early, so that mark is left out.
        if delimiter and delimiter not in core:
            out = f"{delimiter}{out}{delimiter}"
    url = _url(span.href)
    if url is not None:
        out = f"<{url}|{out}>"
    return lead + out + trail


def line_mrkdwn(line: Line) -> str:
    """One fitted line as mrkdwn (a quoted line starts with Slack's `>` quote)."""
    text = "".join(_span_mrkdwn(s) for s in merge_runs(line.spans))
    return "> " + text if line.block == "quote" else text


def plain_text(lines: Sequence[Line]) -> str:
    """The lines' visible text, mrkdwn-escaped (for `text`, which Slack parses too)."""
    return escape("\n".join(line.text for line in lines))


# --- fitting serialised text -----------------------------------------------------------


def _split_to_fit(line: Line, size: Callable[[Line], int], limit: int) -> list[Line]:
    """A line split (no ellipsis) into pieces whose serialised size is at most `limit`."""
    out: list[Line] = []
    rest = line
    while size(rest) > limit and rest.length > 1:
        lo, hi = 1, rest.length - 1
        while lo < hi:  # the most units whose head still fits
            mid = (lo + hi + 1) // 2
            if size(split_line(rest, mid)[0]) <= limit:
                lo = mid
            else:
                hi = mid - 1
        head, rest = split_line(rest, lo)
        out.append(head)
    out.append(rest)
    return [piece for piece in out if piece.spans]


def _cut_to_fit(line: Line, size: Callable[[Line], int], limit: int) -> Line:
    """A line cut (middle `…`) until its serialised size is at most `limit`."""
    units = line.length
    while size(line) > limit and units > 1:
        units = max(1, min(units - 1, units * limit // max(size(line), 1)))
        line = cut_line(line, units)
    return line


def _mrkdwn_size(line: Line) -> int:
    return u16(line_mrkdwn(line))


# --- blocks ------------------------------------------------------------------------------


def _section(text: str) -> dict[str, Any]:
    return {"type": "section", "text": {"type": "mrkdwn", "text": text}}


def _context(texts: Sequence[str]) -> dict[str, Any]:
    return {"type": "context", "elements": [{"type": "mrkdwn", "text": t} for t in texts]}


def _text_sections(lines: Sequence[Line]) -> list[dict[str, Any]]:
    """Attention lines, the note or the answer as mrkdwn sections of at most 3,000
    characters each; a code block stays fenced in every section it spans."""
    pieces: list[Line] = []
    for line in lines:
        limit = MAX_TEXT_OBJECT - (8 if line.block == "pre" else 0)  # room for the fence
        size = (lambda ln: u16(escape(ln.text))) if line.block == "pre" else _mrkdwn_size
        pieces.extend(_split_to_fit(line, size, limit) if size(line) > limit else [line])

    sections: list[dict[str, Any]] = []
    rows: list[str] = []
    used = 0
    fence: int | None = None  # the group of the code block open in this section

    def close() -> None:
        nonlocal rows, used, fence
        if fence is not None:
            rows.append("```")
            fence = None
        text = "\n".join(rows).strip("\n")
        if text.strip():
            sections.append(_section(text))
        rows, used = [], 0

    for line in pieces:
        pre = line.block == "pre"
        row = escape(line.text) if pre else line_mrkdwn(line)
        # 4 for an opening fence, 4 kept free for the closing one while a fence is open
        need = u16(row) + 1 + (8 if pre and fence != line.group else 0)
        if rows and used + need > MAX_TEXT_OBJECT:
            close()
        if fence is not None and (not pre or fence != line.group):
            rows.append("```")
            fence = None
        if pre and fence != line.group:
            rows.append("```")
            used += 8
            fence = line.group
        rows.append(row)
        used += u16(row) + 1
    close()
    return sections


def _context_block(lines: Sequence[Line]) -> dict[str, Any]:
    texts = [line_mrkdwn(_cut_to_fit(line, _mrkdwn_size, MAX_TEXT_OBJECT)) for line in lines]
    return _context(texts[:MAX_CONTEXT_ELEMENTS])


def _tools_block(lines: Sequence[Line]) -> dict[str, Any]:
    """Tool lines in one context element (each line cut so that all of them fit)."""
    cap = max(1, (MAX_TEXT_OBJECT - len(lines)) // max(len(lines), 1))
    return _context(["\n".join(line_mrkdwn(_cut_to_fit(line, _mrkdwn_size, cap)) for line in lines)])


def _text_element(text: str, marks: Sequence[str]) -> dict[str, Any]:
    element: dict[str, Any] = {"type": "text", "text": text}
    style = {_STYLE[m]: True for m in marks if m in _STYLE}
    if style:
        element["style"] = style
    return element


def _rich_elements(line: Line, extra: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """A line's spans as rich_text elements: literal text, links only from Markdown.
    `extra` marks (a skipped step's strike) apply to the text, not to the icon."""
    out: list[dict[str, Any]] = []
    icon, body = line.spans[: line.prefix], line.spans[line.prefix :]
    for spans, more in ((icon, ()), (body, extra)):
        for span in merge_runs(spans):
            marks = (*span.marks, *more)
            if _url(span.href) is not None:
                element: dict[str, Any] = {"type": "link", "url": span.href, "text": span.text}
                style = {_STYLE[m]: True for m in marks if m in _STYLE}
                if style:
                    element["style"] = style
                out.append(element)
            else:
                out.append(_text_element(span.text, marks))
    return out


def _list_blocks(lines: Sequence[Line]) -> list[dict[str, Any]]:
    """The checklist as rich_text blocks (a new block past 3,000 characters of text)."""
    blocks: list[dict[str, Any]] = []
    items: list[dict[str, Any]] = []
    used = 0

    def flush(tail: dict[str, Any] | None = None) -> None:
        nonlocal items, used
        elements: list[dict[str, Any]] = []
        if items:
            elements.append({"type": "rich_text_list", "style": "bullet", "elements": items})
        if tail is not None:
            elements.append(tail)
        if elements:
            blocks.append({"type": "rich_text", "elements": elements})
        items, used = [], 0

    for line in lines:
        line = cut_line(line, MAX_TEXT_OBJECT) if line.length > MAX_TEXT_OBJECT else line
        if used and used + line.length > MAX_TEXT_OBJECT:
            flush()
        used += line.length
        if line.kind == "summary":
            flush({"type": "rich_text_section", "elements": _rich_elements(line, ("i",))})
            continue
        extra = ("s",) if line.state == "skipped" else ()
        items.append({"type": "rich_text_section", "elements": _rich_elements(line, extra)})
    flush()
    return blocks


def _group(line: Line) -> str:
    if line.kind in ("label", "header"):
        return "context"
    if line.kind in ("headline", "tool"):  # the activity: what the agent does right now
        return "tools"
    if line.kind in ("step", "summary"):
        return "list"
    return "text"


def to_blocks(lines: Sequence[Line]) -> list[dict[str, Any]]:
    """Fitted lines as Block Kit blocks, in their order (see the module doc)."""
    blocks: list[dict[str, Any]] = []
    for kind, run in runs_by_group(lines, _group):
        if kind == "context":
            blocks.append(_context_block(run))
        elif kind == "tools":
            blocks.append(_tools_block(run))
        elif kind == "list":
            blocks.extend(_list_blocks(run))
        else:
            blocks.extend(_text_sections(run))
    return blocks


def within_limits(blocks: Sequence[dict[str, Any]], text: str) -> bool:
    return 0 < len(blocks) <= MAX_BLOCKS and 0 < u16(text) <= MAX_MESSAGE_TEXT


def _message(blocks: list[dict[str, Any]], text: str) -> dict[str, Any]:
    return {
        "method": "chat.postMessage",
        "params": {"text": text, "blocks": blocks, "unfurl_links": False, "unfurl_media": False},
        "fallback": {
            "method": "chat.postMessage",
            "params": {"text": text, "unfurl_links": False, "unfurl_media": False},
        },
    }


def _fitted(
    view: View, settings: RenderSettings, slack_theme: Theme
) -> tuple[list[Line], list[dict[str, Any]], str] | None:
    budget = DRAFT_BUDGET
    while True:
        lines = compose(view, settings, slack_theme, budget=budget, max_items=None)
        if not lines:
            return None
        blocks, text = to_blocks(lines), plain_text(lines)
        if within_limits(blocks, text) or budget <= MIN_BUDGET:
            return lines, blocks[:MAX_BLOCKS], text
        budget //= 2


def render_blocks(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The Block Kit `chat.postMessage` for this view's draft (with its `fallback`), or None."""
    fitted = _fitted(view, settings, theme("slack", templates_dir))
    if fitted is None:
        return None
    _, blocks, text = fitted
    return _message(blocks, text)


# --- plan display ------------------------------------------------------------------------


def _task_text(text: str) -> str:
    return middle_cut(text, MAX_TASK_TEXT)


def _task(line: Line, step: Step, slack_theme: Theme, output: str | None) -> dict[str, Any]:
    """One shown step as a task; its texts come from the card, cut to the task's limit."""
    state = line.state or "pending"
    details = [slack_theme.word(_STATE_WORD[state])] if state in _STATE_WORD else []
    if step.note and plain(step.note):
        details.append(plain(step.note))
    task: dict[str, Any] = {
        "type": "task_update",
        "id": f"step-{line.index + 1}",
        "title": _task_text(plain(step.step)),
        "status": _TASK_STATUS[state],
    }
    if details:
        task["details"] = _task_text(slack_theme.word("note").join(details))
    if output and state == "in_progress":
        task["output"] = _task_text(output)
    return task


def render_plan(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The plan-display `chat.startStream` for this view (with the Block Kit call as its
    `fallback`), or None. A draft with no plan steps is Block Kit only."""
    slack_theme = theme("slack", templates_dir)
    fitted = _fitted(view, settings, slack_theme)
    if fitted is None:
        return None
    lines, blocks, text = fitted
    message = _message(blocks, text)
    steps = [line for line in lines if line.kind == "step"]
    if not steps:
        return message
    joiner = slack_theme.word("joiner")

    def words(line: Line) -> str:  # without its icon: the plan display has its own
        return "".join(s.text for s in line.spans[line.prefix :])

    heads = [words(line) for line in lines if line.kind in ("label", "header")]
    heads += [words(line) for line in lines if line.kind == "attention" and line.state == "failed"]
    heads += [words(line) for line in lines if line.kind == "summary"]
    if view.stop is not None and view.run is RunState.active:
        heads.append(stopping_line(view.stop, templates_dir))  # (Slack's stop button shows no other sign)
    tools = "\n".join(line.text for line in lines if line.kind in ("headline", "tool")) or None
    chunks: list[dict[str, Any]] = [{"type": "plan_update", "title": _task_text(joiner.join(heads))}]
    plan = view.card.plan if view.card and view.card.plan else ()
    chunks += [_task(line, plan[line.index], slack_theme, tools) for line in steps if 0 <= line.index < len(plan)]
    # A finished run's plan is the stream's last state: it is stopped with it.
    method = "chat.stopStream" if view.run in TERMINAL else "chat.startStream"
    return {"method": method, "params": {"task_display_mode": "plan", "chunks": chunks}, "fallback": message}


def render_slack(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The Slack call that shows this view's draft, or None when it should not exist.

    `{"method", "params", "fallback"}`: Block Kit `chat.postMessage`, or with
    `settings.rich` the plan display (`chat.startStream`, falling back to Block Kit).
    No `channel`/`thread_ts`/`ts`: the adapter adds them (and turns a post into
    `chat.update` for an existing draft)."""
    if settings.rich:
        return render_plan(view, settings, templates_dir=templates_dir)
    return render_blocks(view, settings, templates_dir=templates_dir)


# --- the final answer --------------------------------------------------------------------


def _answer_messages(lines: list[Line], limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for chunk in split_answer(lines, limit):
        blocks, text = _text_sections(chunk), plain_text(chunk)
        if within_limits(blocks, text) or limit <= MIN_BUDGET:
            out.append(_message(blocks[:MAX_BLOCKS], text))
        else:
            out.extend(_answer_messages(chunk, limit // 2))
    return out


def render_slack_final_answer(answer_markdown: str, head: str | None = None) -> list[dict[str, Any]]:
    """The final answer of a run (progress mode) as normal messages: `chat.postMessage`
    calls with mrkdwn sections, each within Slack's limits — as many as the text
    needs; `head` (how the run ended) first, bold; [] for an empty answer without one."""
    lines = answer_lines(answer_markdown) if answer_markdown.strip() else []
    return _answer_messages(head_lines(head, lines), ANSWER_CHUNK)


__all__ = [
    "MAX_BLOCKS",
    "MAX_MESSAGE_TEXT",
    "MAX_TEXT_OBJECT",
    "escape",
    "line_mrkdwn",
    "render_blocks",
    "render_plan",
    "render_slack",
    "render_slack_final_answer",
    "to_blocks",
    "within_limits",
]
