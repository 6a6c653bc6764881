"""Telegram rich messages: `sendRichMessage` payloads (richMessages = true).

`rich_message` is an InputRichMessage with `blocks`: paragraph blocks
(`{"type": "paragraph", "text": RichText}`) and, when there is a plan, exactly one
`list` block whose items (`RichBlockListItem`) are the shown steps:

    {"label": "3.", "value": 3, "type": "1", "has_checkbox": true, "is_checked": false,
     "blocks": [{"type": "paragraph", "text": …}]}

* the label/value is the step's position in the plan, so a selection's gaps show;
* `is_checked` is true for completed steps only. A skipped step is not checked — a
  ticked box would claim work that was not done — it shows `⏭️` and is struck
  through instead (it still counts as done in `k/N complete`, as receipts count it);
* the checkbox says done / not done, so completed and pending items carry no icon;
  in progress (`▶️`, bold), blocked (`⛔`), skipped (`⏭️`, struck through) and paused
  (`⏸️`) ones keep theirs, so every state stays distinct;
* the same layout and selection as the classic draft (see `draft.py`), blank lines
  dropped; code lines become `code` RichText, quoted lines `italic`, links `url`.

Limits: at most 32,768 characters and 500 blocks (list items and their blocks
counted); the draft is fitted to 30,000 characters of text to leave room for what a
client counts besides it.

Note: Bot API 10.1's InputRichMessage documents only `html`/`markdown`; `blocks` is
the 10.2 form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.view import View
from .draft import compose
from .ir import MARK_ORDER, Line, Span
from .templates import theme

MAX_RICH_TEXT = 32_768
MAX_RICH_BLOCKS = 500
RICH_BUDGET = 30_000

_MARKS = {"b": "bold", "i": "italic", "u": "underline", "s": "strikethrough", "code": "code"}
_NO_ICON = frozenset({"completed", "pending"})


def _parts(spans: tuple[Span, ...], extra: tuple[str, ...] = ()) -> list[Any]:
    runs: list[tuple[str, tuple[str, ...], str | None]] = []
    for span in spans:
        if not span.text:
            continue
        kept = tuple(m for m in MARK_ORDER if m in span.marks or m in extra)
        if runs and runs[-1][1:] == (kept, span.href):
            runs[-1] = (runs[-1][0] + span.text, kept, span.href)
        else:
            runs.append((span.text, kept, span.href))
    parts: list[Any] = []
    for text, marks, href in runs:
        node: Any = text
        for mark in reversed(marks):
            node = {"type": _MARKS[mark], "text": node}
        if href:
            node = {"type": "url", "text": node, "url": href}
        if parts and isinstance(node, str) and isinstance(parts[-1], str):
            parts[-1] += node
        else:
            parts.append(node)
    return parts


def _collapse(parts: list[Any]) -> Any:
    merged: list[Any] = []
    for part in parts:
        if merged and isinstance(part, str) and isinstance(merged[-1], str):
            merged[-1] += part
        else:
            merged.append(part)
    parts = merged
    if not parts:
        return ""
    return parts[0] if len(parts) == 1 else parts


def rich_text(spans: tuple[Span, ...], extra: tuple[str, ...] = ()) -> Any:
    """Spans as RichText: a string, or an array of strings and typed objects."""
    return _collapse(_parts(spans, extra))


def _paragraph(text: Any) -> dict[str, Any]:
    return {"type": "paragraph", "text": text}


def _item(line: Line) -> dict[str, Any]:
    state = line.state or "pending"
    icon = () if state in _NO_ICON else line.spans[: line.prefix]
    extra = ("s",) if state == "skipped" else ()  # strike the text, not the icon
    body = _collapse([*_parts(icon), *_parts(line.spans[line.prefix :], extra)])
    number = line.index + 1
    return {
        "label": f"{number}.",
        "blocks": [_paragraph(body)],
        "has_checkbox": True,
        "is_checked": state == "completed",
        "value": number,
        "type": "1",
    }


def to_rich_blocks(lines: list[Line]) -> list[dict[str, Any]]:
    """Paragraph blocks, the steps as one list block; a code block is one paragraph."""
    blocks: list[dict[str, Any]] = []
    items: list[dict[str, Any]] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if line.kind == "step":
            if items is None:
                items = []
                blocks.append({"type": "list", "items": items})
            items.append(_item(line))
            continue
        if line.block == "pre":
            code = [line.text]
            while i < len(lines) and lines[i].block == "pre" and lines[i].group == line.group:
                code.append(lines[i].text)
                i += 1
            if any(c.strip() for c in code):
                blocks.append(_paragraph({"type": "code", "text": "\n".join(code).strip("\n")}))
            continue
        if line.blank:
            continue
        text = rich_text(line.spans, ("i",) if line.block == "quote" else ())
        blocks.append(_paragraph(text))
    return blocks


def render_rich(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    lines = compose(
        view, settings, theme("telegram", templates_dir), budget=RICH_BUDGET, max_items=MAX_RICH_BLOCKS - 2
    )
    if not lines:
        return None
    return {"method": "sendRichMessage", "params": {"rich_message": {"blocks": to_rich_blocks(lines)}}}
