"""Telegram classic: `sendMessage` payloads in parse_mode=HTML.

Only tags Telegram accepts are produced (`b i u s code pre blockquote a`), line
breaks are "\n", and every piece of agent text goes through `html.escape`. Entities
follow Telegram's nesting rules: `code`/`pre` never contain or sit inside another
entity, links and code are not put inside a blockquote, and a message carries at
most 100 entities (formatting past that is dropped, never the text). Visible text
is at most 4,096 UTF-16 units (stricter than Telegram's code-point count), the raw
text at most 32,768 UTF-8 bytes: when long link targets would break that, links
turn into plain text.
"""

from __future__ import annotations

import html
import re
import sys
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from markupsafe import Markup

from ..config.base import RenderSettings
from ..model.view import View
from .answer import answer_lines, split_answer
from .draft import compose
from .ending import head_lines
from .ir import Line, Span, u16
from .templates import template, theme

MAX_TEXT = 4096
MAX_RAW_BYTES = 32_768
MAX_ENTITIES = 100

_LINK_PREVIEW = {"is_disabled": True}


@dataclass(frozen=True, slots=True)
class Block:
    """A run of lines the frame template wraps: "lines", "pre" or "quote"."""

    kind: str
    lang: str | None
    body: Markup


def _spans_html(spans: tuple[Span, ...], code: bool, links: bool, budget: list[int]) -> str:
    """Spans as HTML with properly nested tags; `budget[0]` counts entities left."""
    text, opened = _free_spans_html(spans, code, links)
    if opened <= budget[0]:
        # With budget for every tag the line opens, no tag is refused along the way:
        # the same HTML as below.
        budget[0] -= opened
        return text
    return _budget_spans_html(spans, code, links, budget)


@lru_cache(maxsize=4096)
def _free_spans_html(spans: tuple[Span, ...], code: bool, links: bool) -> tuple[str, int]:
    """A line's HTML with no entity limit, and how many tags it opens (cached: most
    lines of a draft are the same as in the previous render)."""
    budget = [sys.maxsize]
    text = _budget_spans_html(spans, code, links, budget)
    return text, sys.maxsize - budget[0]


def _budget_spans_html(spans: tuple[Span, ...], code: bool, links: bool, budget: list[int]) -> str:
    out: list[str] = []
    stack: list[tuple[str, str | None]] = []
    for span in spans:
        if not span.text:
            continue
        want: list[tuple[str, str | None]] = []
        if span.href and links:
            want.append(("a", span.href))
        marks = span.marks
        if "code" in marks:
            if code and len(marks) == 1 and not want:
                want.append(("code", None))
            marks = tuple(m for m in marks if m != "code")
        want += [(m, None) for m in marks]
        k = 0
        while k < len(stack) and k < len(want) and stack[k] == want[k]:
            k += 1
        if len(want) - k > budget[0]:
            want, k = [], 0
        for tag, _ in reversed(stack[k:]):
            out.append(f"</{tag}>")
        del stack[k:]
        for tag, href in want[k:]:
            out.append(f'<a href="{html.escape(href or "", quote=True)}">' if tag == "a" else f"<{tag}>")
            stack.append((tag, href))
            budget[0] -= 1
        out.append(html.escape(span.text, quote=False))
    for tag, _ in reversed(stack):
        out.append(f"</{tag}>")
    return "".join(out)


def to_blocks(lines: list[Line], links: bool = True) -> list[Block]:
    """Group fitted lines into the blocks the frame template wraps."""
    budget = [MAX_ENTITIES]
    blocks: list[Block] = []
    plain_run: list[str] = []

    def flush() -> None:
        if plain_run:
            blocks.append(Block("lines", None, Markup("\n".join(plain_run))))
            plain_run.clear()

    i = 0
    while i < len(lines):
        line = lines[i]
        if line.block is None:
            plain_run.append(_spans_html(line.spans, True, links, budget))
            i += 1
            continue
        j = i
        while j < len(lines) and lines[j].block == line.block and lines[j].group == line.group:
            j += 1
        group = lines[i:j]
        i = j
        if all(g.blank for g in group) or budget[0] < 1:
            plain_run.extend(_spans_html(g.spans, False, False, budget) for g in group)
            continue
        flush()
        budget[0] -= 1
        if line.block == "pre":
            body = "\n".join(html.escape(g.text, quote=False) for g in group)
            blocks.append(Block("pre", line.lang, Markup(body)))
        else:
            body = "\n".join(_spans_html(g.spans, False, False, budget) for g in group)
            blocks.append(Block("quote", None, Markup(body)))
    flush()
    return blocks


_TAG = re.compile(r"<[^>]*>")


def _visible(text: str) -> int:
    return u16(html.unescape(_TAG.sub("", text)))


def to_html(lines: list[Line], templates_dir: str | Path | None = None) -> str:
    """The fitted lines as Telegram HTML, inside the raw-size limit."""
    frame = template("telegram/draft.j2", templates_dir)
    text = frame.render(blocks=to_blocks(lines))
    if len(text) * 4 > MAX_RAW_BYTES and len(text.encode()) > MAX_RAW_BYTES:
        text = frame.render(blocks=to_blocks(lines, links=False))
    if templates_dir is not None and (
        _visible(text) > MAX_TEXT or len(text.encode()) > MAX_RAW_BYTES or not text.strip()
    ):
        # An override template added visible text the fit did not count: the packaged one.
        return to_html(lines, None)
    return text


def wrap_message(text: str) -> dict[str, Any]:
    """The `sendMessage` parameters of a classic message."""
    return {"text": text, "parse_mode": "HTML", "link_preview_options": dict(_LINK_PREVIEW)}


def _message(text: str) -> dict[str, Any]:
    return {"method": "sendMessage", "params": wrap_message(text)}


def render_telegram(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The Bot API call that shows this view's draft in a chat, or None when the draft
    should not exist (mode `off`, or nothing to show: the adapter deletes the draft).

    Classic (`settings.rich` False): `sendMessage` with HTML text. Rich: see
    `rich.render_rich`. No chat_id/message_id: the adapter adds them (and switches to
    `editMessageText` for an existing draft)."""
    if settings.rich:
        from .rich import render_rich

        return render_rich(view, settings, templates_dir=templates_dir)
    lines = compose(view, settings, theme("telegram", templates_dir), budget=MAX_TEXT)
    if not lines:
        return None
    return _message(to_html(lines, templates_dir))


def render_final_answer_messages(
    answer_markdown: str, *, head: str | None = None, templates_dir: str | Path | None = None
) -> list[dict[str, Any]]:
    """The final answer of a run (progress mode) as normal messages: `sendMessage`
    payloads in Telegram HTML, each at most 4,096 visible characters — as many as the
    text needs, split at paragraph breaks where possible; `head` (how the run ended)
    first, bold; [] for an empty answer without one."""
    return [_message(to_html(chunk, templates_dir)) for chunk in answer_chunks(answer_markdown, head)]


_MENTION = re.compile(r"@(?=\w)")


def no_mentions(text: str) -> str:
    """Text whose `@name` Telegram does not take for a mention (which would notify that
    person): a word joiner after the `@`, invisible. Card text never carries one (it is
    cleaned away on input), so the only ones are ours."""
    return _MENTION.sub("@\u2060", text)


def answer_chunks(answer_markdown: str, head: str | None = None) -> list[list[Line]]:
    """The final answer's lines (under `head`), split into messages of at most 4,096
    visible characters."""
    lines = answer_lines(answer_markdown)
    return split_answer(head_lines(no_mentions(head) if head else None, lines), MAX_TEXT)


__all__ = [
    "MAX_TEXT",
    "answer_chunks",
    "no_mentions",
    "render_final_answer_messages",
    "render_telegram",
    "to_blocks",
    "to_html",
    "wrap_message",
]

