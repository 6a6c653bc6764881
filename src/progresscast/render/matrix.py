"""Matrix: the draft as an `m.notice` with a plain `body` and an HTML `formatted_body`.

`render_matrix(view, settings)` returns `{"method": "m.room.message", "params":
content, "fallback": …}`, or None when the draft should not exist (mode `off`, or
nothing to show: the adapter redacts it). The layout and the selection are the
shared ones (`draft.compose`); this module only serialises the fitted lines.

    {"msgtype": "m.notice", "body": "<the lines as text>",
     "format": "org.matrix.custom.html", "formatted_body": "<the lines as HTML>",
     "m.mentions": {}}

The HTML uses only the tags and attributes the Matrix spec recommends clients
accept, and is sanitised to exactly that subset with bleach after it is built:
lines are joined with `<br>`, the checklist is a `<ul>` whose items start with the
state's mark (✅ ▶️ ⬜ ⛔ ⏭️ ⏸️, from `templates/matrix/theme.j2`), the active step
`<strong>`, a skipped step's text `<del>`; the note's Markdown becomes `<strong>`,
`<em>`, `<del>`, `<code>`, `<pre><code class="language-…">`, `<blockquote>` and
`<a href>` (http and https links written as Markdown links only). Every piece of
agent text is escaped, so `<script>` arrives as text. A live run its agent can stop
ends with an italic `React ⏹️ to stop` (Matrix has no buttons: the reaction is the
control), counted in the draft's characters.

`"m.mentions": {}` says the event mentions nobody: clients and servers that honour
intentional mentions (the spec since v1.7, Synapse) then ignore `@room`, user ids
and display names in the text. The adapter's edits carry it too, outside and inside
`m.new_content` (`edit_content`).

Size: an event is at most 65,536 bytes, the envelope (ids, hashes, signatures)
included. An edit carries the content twice (its `m.new_content`, and the text again
as its fallback), so the content is fitted until its edit is at most
`MAX_CONTENT_BYTES`: the draft is fitted to 12,000 visible characters first, then
with links as plain text, then to half as many again. `fallback` (shown when the
server refuses the content) is the plain `body` alone.

The final answer: the shared splitter's parts (`answer.split_answer`), each an
`m.text` (a normal message, which notifies as one) with the same HTML and no mention.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import bleach

from ..config.base import RenderSettings
from ..model.view import RunState, View
from .answer import answer_lines, split_answer
from .draft import compose
from .ending import head_lines
from .ir import Line, Span, merge_runs, u16
from .templates import Theme, theme

EVENT_TYPE = "m.room.message"
NOTICE = "m.notice"
TEXT = "m.text"
HTML_FORMAT = "org.matrix.custom.html"

MAX_EVENT_BYTES = 65_536
MAX_CONTENT_BYTES = 60_000
"""The most bytes of JSON the content of the largest event a draft makes (its edit)
may take; the rest of `MAX_EVENT_BYTES` is left for the event's envelope."""
DRAFT_BUDGET = 12_000
ANSWER_CHUNK = 12_000
MIN_BUDGET = 200

# The HTML subset of the Matrix spec (m.room.message, org.matrix.custom.html).
MATRIX_TAGS = frozenset(
    "font del h1 h2 h3 h4 h5 h6 blockquote p a ul ol sup sub li b i u strong em s code hr br div "
    "table thead tbody tr th td caption pre span img details summary".split()
)
MATRIX_PROTOCOLS = frozenset({"http", "https", "ftp", "mailto", "magnet"})
_CODE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,32}")
_COLOR = re.compile(r"#[0-9A-Fa-f]{6}")
_SAFE_URL = re.compile(r"(?i)https?://[^\s\x00-\x1f\x7f]+")

_TAGS = {"b": "strong", "i": "em", "u": "u", "s": "del", "code": "code"}


def _attr_ok(tag: str, name: str, value: str) -> bool:
    if tag == "a":
        return name in ("href", "target")
    if tag == "ol":
        return name == "start" and value.isdigit()
    if tag == "code":
        return name == "class" and bool(_CODE_CLASS.fullmatch(value))
    if tag in ("font", "span") and name in ("data-mx-color", "data-mx-bg-color", "color"):
        return bool(_COLOR.fullmatch(value))
    if tag == "span":
        return name == "data-mx-spoiler"
    if tag == "img":
        return name in ("width", "height", "alt", "title") or (name == "src" and value.startswith("mxc://"))
    return False


_CLEANER = bleach.sanitizer.Cleaner(
    tags=MATRIX_TAGS, attributes=_attr_ok, protocols=MATRIX_PROTOCOLS, strip=True, strip_comments=True
)


def sanitize(fragment: str) -> str:
    """An HTML fragment reduced to the Matrix subset: other tags dropped (their text
    kept, escaped), other attributes and link schemes removed, comments removed."""
    return str(_CLEANER.clean(fragment))


# --- lines as HTML -------------------------------------------------------------------


def _spans_html(spans: Sequence[Span], links: bool, extra: tuple[str, ...] = ()) -> str:
    out = []
    for span in merge_runs(spans):
        text = html.escape(span.text, quote=False)
        for mark in reversed(tuple(dict.fromkeys((*span.marks, *extra)))):
            tag = _TAGS.get(mark)
            if tag is not None:
                text = f"<{tag}>{text}</{tag}>"
        if links and span.href and _SAFE_URL.fullmatch(span.href):
            text = f'<a href="{html.escape(span.href, quote=True)}">{text}</a>'
        out.append(text)
    return "".join(out)


def line_html(line: Line, links: bool = True) -> str:
    """One fitted line as inline HTML: its icon, then its text (a skipped step's struck)."""
    extra = ("s",) if line.kind == "step" and line.state == "skipped" else ()
    head = _spans_html(line.spans[: line.prefix], links)
    return head + _spans_html(line.spans[line.prefix :], links, extra)


def to_html(lines: Sequence[Line], links: bool = True) -> str:
    """Fitted lines as a Matrix HTML fragment (see the module doc)."""
    items: list[tuple[bool, str]] = []  # (a block element?, html)
    i = 0
    while i < len(lines):
        line = lines[i]
        j = i + 1
        if line.kind == "step":
            while j < len(lines) and lines[j].kind == "step":
                j += 1
            rows = "".join(f"<li>{line_html(step, links)}</li>" for step in lines[i:j])
            items.append((True, f"<ul>{rows}</ul>"))
        elif line.block in ("pre", "quote"):
            while j < len(lines) and lines[j].block == line.block and lines[j].group == line.group:
                j += 1
            group = lines[i:j]
            if line.block == "pre":
                body = "\n".join(html.escape(g.text, quote=False) for g in group)
                named = line.lang and _CODE_CLASS.fullmatch(f"language-{line.lang}")
                lang = f' class="language-{line.lang}"' if named else ""
                items.append((True, f"<pre><code{lang}>{body}</code></pre>"))
            else:
                items.append((True, "<blockquote>" + "<br>".join(line_html(g, links) for g in group) + "</blockquote>"))
        else:
            items.append((False, line_html(line, links)))
        i = j
    out: list[str] = []
    after_block = True  # what was written last is a block element (or nothing)
    for k, (block, text) in enumerate(items):
        # a blank line: a paragraph break between two runs of text, nothing beside a block
        if not block and not text.strip() and (after_block or k == len(items) - 1 or items[k + 1][0]):
            continue
        if not block and not after_block:
            out.append("<br>")
        out.append(text)
        after_block = block
    return sanitize("".join(out))


def body_text(lines: Sequence[Line]) -> str:
    """The lines as plain text: what clients without HTML show, and notifications."""
    return "\n".join(line.text for line in lines).strip("\n")


# --- contents and their size ------------------------------------------------------------


def content_of(lines: Sequence[Line], msgtype: str = NOTICE, links: bool = True) -> dict[str, Any]:
    return {
        "msgtype": msgtype,
        "body": body_text(lines),
        "format": HTML_FORMAT,
        "formatted_body": to_html(lines, links),
        "m.mentions": {},
    }


def plain_content(content: dict[str, Any]) -> dict[str, Any]:
    """The content without its HTML: what is shown when the server refuses it."""
    return {"msgtype": content["msgtype"], "body": content["body"], "m.mentions": {}}


def edit_content(content: dict[str, Any], event_id: str) -> dict[str, Any]:
    """The content of an edit (`m.replace`) of `event_id` to show `content`: the new
    content in `m.new_content` (without a relation: an edit keeps its event's thread),
    the text again as the fallback for clients that do not know edits, and no mention
    on either."""
    new = {k: v for k, v in content.items() if k != "m.relates_to"}
    new["m.mentions"] = {}
    return {
        "msgtype": content["msgtype"],
        "body": "* " + str(content["body"]),
        "m.mentions": {},
        "m.new_content": new,
        "m.relates_to": {"rel_type": "m.replace", "event_id": event_id},
    }


_SAMPLE_EVENT_ID = "$" + "x" * 43


def json_size(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode())


def fits(content: dict[str, Any]) -> bool:
    """Does the content fit in an event — also as the edit that shows it?"""
    return json_size(edit_content(content, _SAMPLE_EVENT_ID)) <= MAX_CONTENT_BYTES


def _call(content: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": EVENT_TYPE,
        "params": content,
        "fallback": {"method": EVENT_TYPE, "params": plain_content(content)},
    }


def stop_hint(view: View, matrix_theme: Theme) -> str:
    """How to stop a live run its agent can stop, not stopped yet (Matrix has no
    buttons: a reaction on the draft, `matrix.presses`); "" otherwise."""
    if not view.stoppable or view.run is not RunState.active or view.stop is not None:
        return ""
    return matrix_theme.word("stop_hint")


def render_matrix(
    view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
) -> dict[str, Any] | None:
    """The `m.room.message` that shows this view's draft (with its `fallback`), or None
    when the draft should not exist. No room, thread or event id: the adapter adds them
    (and turns a send into an edit of an existing draft)."""
    matrix_theme = theme("matrix", templates_dir)
    hint = stop_hint(view, matrix_theme)
    budget = DRAFT_BUDGET
    while True:
        # The hint is the draft's last line, as a Stop button is under a draft elsewhere:
        # outside the card's rows, inside its characters.
        lines = compose(view, settings, matrix_theme, budget=budget - (u16(hint) + 1 if hint else 0))
        if not lines:
            return None
        if hint:
            lines = [*lines, Line((Span(hint, ("i",)),), kind="hint")]
        for links in (True, False):
            content = content_of(lines, NOTICE, links)
            if fits(content):
                return _call(content)
        if budget <= MIN_BUDGET:
            return _call(plain_content(content))
        budget //= 2


def _answer_contents(lines: list[Line], limit: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for chunk in split_answer(lines, limit):
        content = content_of(chunk, TEXT)
        if not fits(content):
            content = content_of(chunk, TEXT, links=False)
        if fits(content) or limit <= MIN_BUDGET:
            out.append(content if fits(content) else plain_content(content))
        else:
            out.extend(_answer_contents(chunk, limit // 2))
    return out


def render_matrix_final_answer(answer_markdown: str, head: str | None = None) -> list[dict[str, Any]]:
    """The final answer of a run (progress mode) as normal messages, each within the
    event size limit; `head` (how the run ended) first, bold; [] for an empty answer
    without one."""
    lines = answer_lines(answer_markdown) if answer_markdown.strip() else []
    return [_call(content) for content in _answer_contents(head_lines(head, lines), ANSWER_CHUNK)]


__all__ = [
    "EVENT_TYPE",
    "HTML_FORMAT",
    "MATRIX_TAGS",
    "MAX_CONTENT_BYTES",
    "MAX_EVENT_BYTES",
    "NOTICE",
    "TEXT",
    "content_of",
    "edit_content",
    "fits",
    "json_size",
    "plain_content",
    "render_matrix",
    "render_matrix_final_answer",
    "sanitize",
    "stop_hint",
    "to_html",
]
