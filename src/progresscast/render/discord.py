"""Discord: Components V2 drafts, their plain fallback, and the final answer.

`render_discord(view, settings)` returns the message that shows the draft, or None
when the draft should not exist (mode `off`, or nothing to show: the adapter deletes
it). The layout and the selection are the shared ones (`draft.compose`); this module
only serialises the fitted lines.

Components V2 (`flags` with `IS_COMPONENTS_V2`, no `content`): one Container whose
`accent_color` says the card's state — a person is needed (a blocked step, a run
waiting for input), the agent is working, the work is done, the run failed — holding
Text Displays in the draft's order:

    header     the label and the count (`header`/`label` lines), bold
    attention  a failed run, what the agent waits for
    activity   the headline and the tool lines, as subtext (`-# `)
    checklist  one line per shown step: the state's icon (✅ ▶️ ⬜ ⛔ ⏭️ ⏸️, from
               `templates/discord/theme.j2`), the active step bold, a skipped one
               struck through; the summary line (`… 12 more`) in italics
    text       the note's bar, the note, the answer (partial/block), as Markdown

Agent text never turns into Discord markup: every character Discord's Markdown or its
mention syntax reads (`\\ * _ ~ ` | < > [ ] @ #`, a list or heading mark at a line's
start) is escaped with a backslash, so `@everyone`, `<@123>`, `<@&456>`, `<#789>` and
`[x](url)` show as typed; inside code the text is literal (Discord reads no markup
there) and a fence cannot be closed from inside. Links come only from real Markdown
links (http/https). Besides, every message carries `allowed_mentions: {"parse": []}`:
even a mention that got through would ping nobody.

Limits: at most 40 components (nested ones counted) and 4,000 characters of text in
all Text Displays together (counted in UTF-16 units, escapes and markup included). The
draft is fitted to 4,000 visible characters first, then to fewer while its Markdown
would break a limit.

`fallback` is what to send when Discord refuses the components (50035 Invalid Form
Body): a plain `content` message of the same lines, at most 2,000 characters. Drafts
are sent silently (`SUPPRESS_NOTIFICATIONS`); final answers notify like any message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.card import DONE_STATUSES, Status
from ..model.view import RunState, View
from .answer import answer_lines, split_answer
from .draft import compose
from .ending import head_lines
from .ir import Line, Span, clean_code, merge_runs, runs_by_group, spaced, u16
from .templates import Theme, theme

IS_COMPONENTS_V2 = 1 << 15
SUPPRESS_EMBEDS = 1 << 2
SUPPRESS_NOTIFICATIONS = 1 << 12
NO_MENTIONS: dict[str, list[str]] = {"parse": []}

CONTAINER = 17
TEXT_DISPLAY = 10

MAX_COMPONENTS = 40
"""Components in one message, nested ones counted (the container too)."""
MAX_TEXT = 4000
"""Characters in all Text Displays of one message together."""
MAX_CONTENT = 2000
"""Characters of a message's `content`."""
MIN_BUDGET = 200
ANSWER_SPLIT = MAX_CONTENT
"""Visible characters per final-answer message before its Markdown is measured."""

_SPECIAL = re.compile(r"([\\*_~`|<>\[\]@#])")
_LINE_START = re.compile(r"^(\s*)([-+>]|\d+[.)])")
_SAFE_URL = re.compile(r"(?i)https?://[^\s<>\x00-\x1f\x7f]+")
_URL_QUOTES = {"(": "%28", ")": "%29", " ": "%20", "<": "%3C", ">": "%3E"}
_WRAP = {"b": "**", "i": "*", "u": "__", "s": "~~"}


# --- Discord Markdown ---------------------------------------------------------------------


def escape(text: str) -> str:
    """Agent text made literal in Discord Markdown (mentions included)."""
    return _SPECIAL.sub(r"\\\1", text)


def _url(href: str | None) -> str | None:
    """An http(s) link target safe inside `[…](…)`, or None."""
    if not href or not _SAFE_URL.fullmatch(href):
        return None
    return "".join(_URL_QUOTES.get(ch, ch) for ch in href)


def _code(text: str) -> str:
    """Inline code: Discord reads nothing inside it; a backtick in it takes a longer
    fence, and a text that would still close it early is escaped as text instead."""
    if "`" not in text:
        return f"`{text}`"
    if "``" not in text:
        pad = " " if text.startswith("`") or text.endswith("`") else ""
        return f"``{pad}{text}{pad}``"
    return escape(text)


def _span_md(span: Span) -> str:
    lead, core, trail = spaced(span.text)
    if not core:
        return span.text
    out = _code(core) if "code" in span.marks else escape(core)
    for mark in reversed(span.marks):
        wrap = _WRAP.get(mark)
        if wrap:
            out = f"{wrap}{out}{wrap}"
    url = _url(span.href)
    if url is not None:
        out = f"[{out}]({url})"
    return lead + out + trail


def _guard_start(text: str) -> str:
    """A line that would start a list, a quote or a numbered item is made literal."""
    match = _LINE_START.match(text)
    if match is None:
        return text
    mark = match.group(2)
    return match.group(1) + mark[:-1] + "\\" + mark[-1] + text[match.end() :]


def line_md(line: Line, extra: tuple[str, ...] = ()) -> str:
    """One fitted line as Discord Markdown; `extra` marks apply to the words, not the icon."""
    icon, body = line.spans[: line.prefix], line.spans[line.prefix :]
    if extra:
        body = tuple(Span(s.text, (*s.marks, *(m for m in extra if m not in s.marks)), s.href) for s in body)
    head = "".join(_span_md(s) for s in merge_runs(icon))
    text = head + "".join(_span_md(s) for s in merge_runs(body))
    text = text if head else _guard_start(text)
    return "> " + text if line.block == "quote" else text


def _fence(group: Sequence[Line]) -> str:
    """A code block; a fence inside it is broken with a zero-width space."""
    lang = group[0].lang or ""
    body = "\n".join(clean_code(line.text).replace("```", "`\u200b``") for line in group)
    return f"```{lang}\n{body}\n```"


def lines_md(lines: Sequence[Line], extra_of: Any = None) -> str:
    """Lines as Markdown, consecutive code lines of one block fenced together."""
    rows: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.block == "pre":
            j = i
            while j < len(lines) and lines[j].block == "pre" and lines[j].group == line.group:
                j += 1
            rows.append(_fence(lines[i:j]))
            i = j
            continue
        rows.append("" if line.blank else line_md(line, extra_of(line) if extra_of else ()))
        i += 1
    return "\n".join(rows)


# --- Components V2 ----------------------------------------------------------------------


def _group(line: Line) -> str:
    if line.kind in ("label", "header"):
        return "header"
    if line.kind == "attention":
        return "attention"
    if line.kind in ("headline", "tool"):
        return "activity"
    if line.kind in ("step", "summary"):
        return "checklist"
    return "text"


def _step_marks(line: Line) -> tuple[str, ...]:
    if line.kind == "summary":
        return ("i",)
    if line.state == "skipped":
        return ("s",)
    return ()


def _text(group: str, run: Sequence[Line]) -> str:
    if group == "header":
        return "\n".join(line_md(line) for line in run)
    if group == "attention":
        return "\n".join(line_md(line, ("b",)) for line in run)
    if group == "activity":
        return "\n".join("-# " + line_md(line) for line in run)
    if group == "checklist":
        return "\n".join(line_md(line, _step_marks(line)) for line in run)
    return lines_md(run).strip("\n")


def text_displays(lines: Sequence[Line]) -> list[dict[str, Any]]:
    """Fitted lines as Text Displays, one per run of lines of one group."""
    texts = (_text(kind, run) for kind, run in runs_by_group(lines, _group))
    return [{"type": TEXT_DISPLAY, "content": text} for text in texts if text.strip()]


def accent(view: View, lines: Sequence[Line], discord_theme: Theme) -> int:
    """The container's colour: failed, needs a person, done, or working."""
    plan = view.card.plan if view.card is not None and view.card.plan else ()
    if view.run is RunState.failed:
        key = "accent_failed"
    elif any(s.status is Status.blocked for s in plan) or any(line.kind == "attention" for line in lines):
        key = "accent_needs_person"
    elif view.run is RunState.completed or (plan and all(s.status in DONE_STATUSES for s in plan)):
        key = "accent_done"
    else:
        key = "accent_working"
    raw = discord_theme.marks.get(key, "").lstrip("#")
    try:
        return int(raw, 16) & 0xFFFFFF
    except ValueError:
        return 0x5865F2


def count_components(components: Sequence[dict[str, Any]]) -> int:
    """Components counted as Discord counts them: every one, nested ones included."""
    total = 0
    for component in components:
        total += 1
        inner = component.get("components")
        if isinstance(inner, list):
            total += count_components(inner)
        accessory = component.get("accessory")
        if isinstance(accessory, dict):
            total += 1
    return total


def text_size(components: Sequence[dict[str, Any]]) -> int:
    """Characters of all Text Displays, nested ones included (UTF-16 units)."""
    total = 0
    for component in components:
        if component.get("type") == TEXT_DISPLAY:
            total += u16(str(component.get("content", "")))
        inner = component.get("components")
        if isinstance(inner, list):
            total += text_size(inner)
    return total


def within_limits(components: Sequence[dict[str, Any]]) -> bool:
    return count_components(components) <= MAX_COMPONENTS and 0 < text_size(components) <= MAX_TEXT


def _fit(view: View, settings: RenderSettings, discord_theme: Theme, limit: int, measure: Any) -> Any:
    """The fitted lines' serialisation whose `measure` is at most `limit`: fitted to
    `limit` visible characters first, then to fewer while the markup takes more."""
    budget = limit
    while True:
        lines = compose(view, settings, discord_theme, budget=budget)
        if not lines:
            return None, None
        out, size = measure(lines)
        if size <= limit or budget <= MIN_BUDGET:
            return lines, out
        budget = max(MIN_BUDGET, min(budget - 1, budget * limit // max(size, 1)))


def _measure_components(lines: list[Line]) -> tuple[list[dict[str, Any]], int]:
    displays = text_displays(lines)[: MAX_COMPONENTS - 1]
    return displays, text_size(displays)


def _measure_content(lines: list[Line]) -> tuple[str, int]:
    text = _content_md(lines)
    return text, u16(text)


def _content_md(lines: Sequence[Line]) -> str:
    """Lines as one `content` Markdown text (the fallback): the groups as in the
    container, separated by blank lines."""
    return "\n\n".join(d["content"] for d in text_displays(lines))


def content_message(text: str, *, silent: bool) -> dict[str, Any]:
    """A plain message's parameters: `content`, no embeds unfurled, no mentions."""
    flags = SUPPRESS_EMBEDS | (SUPPRESS_NOTIFICATIONS if silent else 0)
    return {"content": text, "flags": flags, "allowed_mentions": dict(NO_MENTIONS)}


def render_content(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The plain fallback: the draft as one `content` message of ≤ 2,000 characters."""
    _, text = _fit(view, settings, theme("discord", templates_dir), MAX_CONTENT, _measure_content)
    if not text:
        return None
    return {"method": "createMessage", "params": content_message(text, silent=True)}


def render_discord(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The Discord message that shows this view's draft, or None when it should not exist.

    `{"method": "createMessage", "params", "fallback"}`: Components V2 params (`flags`,
    `components`, `allowed_mentions`) and the plain `content` message to send when
    Discord refuses them. No channel or message id: the adapter adds them (and turns a
    create into an edit for an existing draft)."""
    discord_theme = theme("discord", templates_dir)
    lines, displays = _fit(view, settings, discord_theme, MAX_TEXT, _measure_components)
    if not lines or not displays:
        return None
    container = {"type": CONTAINER, "accent_color": accent(view, lines, discord_theme), "components": displays}
    params = {
        "flags": IS_COMPONENTS_V2 | SUPPRESS_NOTIFICATIONS,
        "components": [container],
        "allowed_mentions": dict(NO_MENTIONS),
    }
    return {
        "method": "createMessage",
        "params": params,
        "fallback": render_content(view, settings, templates_dir=templates_dir),
    }


# --- the final answer ----------------------------------------------------------------------


def _answer_texts(lines: list[Line], limit: int) -> list[str]:
    out: list[str] = []
    for part in split_answer(lines, limit):
        text = lines_md(part).strip("\n")
        if u16(text) <= MAX_CONTENT or limit <= MIN_BUDGET:
            out.append(text)
        else:
            out.extend(_answer_texts(part, max(MIN_BUDGET, limit * MAX_CONTENT // max(u16(text), 1) - 1)))
    return [text for text in out if text.strip()]


def render_discord_final_answer(answer_markdown: str, head: str | None = None) -> list[dict[str, Any]]:
    """The final answer of a run (progress mode) as normal messages: `content`
    Markdown of at most 2,000 characters each, split by the one answer splitter; `head`
    (how the run ended) first, bold; [] for an empty answer without one."""
    lines = answer_lines(answer_markdown) if answer_markdown.strip() else []
    return [
        {"method": "createMessage", "params": content_message(text, silent=False)}
        for text in _answer_texts(head_lines(head, lines), ANSWER_SPLIT)
    ]


__all__ = [
    "IS_COMPONENTS_V2",
    "MAX_COMPONENTS",
    "MAX_CONTENT",
    "MAX_TEXT",
    "NO_MENTIONS",
    "SUPPRESS_EMBEDS",
    "SUPPRESS_NOTIFICATIONS",
    "accent",
    "count_components",
    "escape",
    "line_md",
    "render_content",
    "render_discord",
    "render_discord_final_answer",
    "text_displays",
    "text_size",
    "within_limits",
]
