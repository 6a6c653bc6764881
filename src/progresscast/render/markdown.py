"""Markdown notes and answers, converted once per content (functools.lru_cache).

* `note_parts(source)` — a note's own progress bar and the rest of the note: a
  `<progress aria-label="…" value="k" max="N">` (with or without `</progress>`) that
  comes first in the note is kept as a `NoteBar` when its numbers check out
  (0 ≤ value ≤ max, max > 0; other attributes are ignored), and dropped otherwise.
  A `<progress>` anywhere else is raw HTML like any other, and is dropped.
* `markdown_lines(source, kind)` — markdown-it-py tokens → `ir.Line`s, the form the
  Telegram (classic and rich) and text renderers fit and serialise: headings become
  bold lines, list items `•` / `1.` lines (nested ones indented), code blocks `pre`
  lines (with their language), block quotes `quote` lines, tables `a | b` rows,
  emphasis/strong/strikethrough marks, links `href` spans for http(s) URLs only.
  Images show their alt text; soft line breaks stay line breaks, as a chat shows them.
* `markdown_web_html(source)` — markdown-it-py HTML, images reduced to their alt text,
  headings shifted down two levels (the card is not the page), links
  `rel="nofollow noopener noreferrer"` and only absolute http(s) and mailto ones (a
  relative or scheme-less link is its text); then sanitised with bleach to ordinary
  formatting tags, http/https/mailto links and no other attributes.
* `note_summary(source)` — the note on one line (its lines joined with one space),
  "Progress updated" for a note that is only a bar.

Raw HTML, the same for every channel: an inline `<br>` is a line break; the text
inside `<script>`, `<style>`, `<iframe>`, `<object>`, `<template>`, `<noscript>` and
`<textarea>` is dropped with the tags, inline or as blocks (an element left open
hides the rest of the note, as it would in a browser); every other tag is dropped and
its text kept.

All are pure functions of the text, so the caches are safe to share.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from html import escape, unescape
from typing import Any

import bleach
from markdown_it import MarkdownIt
from markdown_it.token import Token

from .ir import MARK_ORDER, Line, Span, clean_code, middle_cut, plain

MAX_HREF = 2048
"""Longer link targets are shown as plain text."""

_HTTP = re.compile(r"(?i)https?://[^\s/?#]+")
_MAILTO = re.compile(r"(?i)mailto:[^\s/?#]+@")
_LANG = re.compile(r"[A-Za-z0-9_+#.-]{1,32}")
_INLINE_BAD = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _parser() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])


_MD = _parser()

# --- raw HTML that is not simply dropped ---------------------------------------------

_HIDDEN_TAG = re.compile(r"<(/?)(script|style|iframe|object|template|noscript|textarea)(?=[\s/>])[^>]*>", re.I)
_BR = re.compile(r"</?br\s*/?>", re.I)


def _scan_hidden(html: str, hidden: str | None) -> str | None:
    """The script-like element we are inside after `html` (None: outside any)."""
    for match in _HIDDEN_TAG.finditer(html):
        closing, name = match.group(1), match.group(2).lower()
        if hidden is None and not closing:
            hidden = name
        elif closing and name == hidden:
            hidden = None
    return hidden


def _visible_tokens(tokens: list[Token]) -> list[Token]:
    """Tokens with the content of script-like elements removed (inline and across
    blocks) and an inline `<br>` turned into a hard break. Closing tokens are kept so
    marks and links stay balanced; a paragraph left without text goes."""
    hidden: str | None = None
    out: list[Token] = []
    skip_close = False
    for token in tokens:
        if token.type == "html_block":
            hidden = _scan_hidden(token.content, hidden)
            out.append(token)  # shown by no renderer
            continue
        if token.type == "inline":
            children: list[Token] = []
            for child in token.children or ():
                if child.type == "html_inline":
                    if hidden is None and _BR.fullmatch(child.content.strip()):
                        children.append(Token("hardbreak", "br", 0))
                    else:
                        hidden = _scan_hidden(child.content, hidden)
                    continue
                if hidden is None or child.nesting == -1:
                    children.append(child)
            token.children = children
            if out and out[-1].type == "paragraph_open" and not any(_shows(c) for c in children):
                out.pop()
                skip_close = True
                continue
            out.append(token)
            continue
        if token.type == "paragraph_close" and skip_close:
            skip_close = False
            continue
        if hidden is not None and token.type in ("fence", "code_block"):
            continue
        out.append(token)
    return out


def _shows(token: Token) -> bool:
    if token.type in ("text", "code_inline"):
        return bool(token.content.strip())
    return token.type == "image"


# --- the note's own progress bar -------------------------------------------------------

_BAR = re.compile(
    r"""\A\s*<progress((?:\s+[^\s"'>/=]+(?:\s*=\s*(?:"[^"]*"|'[^']*'|[^\s"'=<>`]+))?)*)\s*/?>"""
    r"(?:[^<]*</progress\s*>)?",
    re.I,
)
_ATTR = re.compile(r"""([^\s"'>/=]+)(?:\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'=<>`]+)))?""")
_NUMBER = re.compile(r"\d{1,9}(?:\.\d{1,6})?|\.\d{1,6}")
MAX_BAR_LABEL = 120
"""A longer bar label is cut with a middle `…`."""


@dataclass(frozen=True, slots=True)
class NoteBar:
    """A note's own progress bar: `<progress aria-label value max>` first in the note."""

    label: str
    """The aria-label as plain text ("" when it had none)."""
    value: float
    max: float

    @property
    def count(self) -> str:
        """`value/max`, integers without a decimal point."""
        return f"{number_text(self.value)}/{number_text(self.max)}"

    @property
    def caption(self) -> str:
        """What the bar says: its label, or `value/max` without one."""
        return self.label or self.count

    def cells(self, width: int = 10) -> int:
        """How many of the cells of a text bar are filled (full only when done)."""
        if self.value >= self.max:
            return self.width(width)
        return int(self.value * self.width(width) // self.max)

    def width(self, width: int = 10) -> int:
        """Cells of a text bar: one per unit for a small whole max, else `width`."""
        return int(self.max) if self.max == int(self.max) and self.max <= width else width


def number_text(value: float) -> str:
    """A bar's number as written: integers without a decimal point."""
    return str(int(value)) if value == int(value) else f"{value:g}"


def _bar(attrs: str) -> NoteBar | None:
    found: dict[str, str] = {}
    for match in _ATTR.finditer(attrs):
        name = match.group(1).lower()
        if name in ("aria-label", "value", "max") and name not in found:
            raw = next((g for g in match.groups()[1:] if g is not None), "")
            found[name] = unescape(raw)
    value, top = found.get("value", "").strip(), found.get("max", "").strip()
    if not (_NUMBER.fullmatch(value) and _NUMBER.fullmatch(top)):
        return None
    if float(top) <= 0 or float(value) > float(top):
        return None
    label = middle_cut(plain(found.get("aria-label", "")), MAX_BAR_LABEL)
    return NoteBar(label=label, value=float(value), max=float(top))


@lru_cache(maxsize=256)
def note_parts(source: str) -> tuple[NoteBar | None, str]:
    """The note's own progress bar (None without a valid one) and the rest of the note.
    A leading `<progress>` element is always taken out: kept as the bar when valid."""
    match = _BAR.match(source)
    if match is None:
        return None, source
    return _bar(match.group(1)), source[match.end() :]


def _inline_text(text: str) -> str:
    return _INLINE_BAD.sub(" ", text)


def _link(href: str | None) -> str | None:
    if not href or len(href) > MAX_HREF or not _HTTP.match(href):
        return None
    return href


def _sorted_marks(marks: list[str], code: bool = False) -> tuple[str, ...]:
    found = set(marks)
    if code:
        found.add("code")
    return tuple(m for m in MARK_ORDER if m in found)


def _trim(spans: list[Span]) -> tuple[Span, ...]:
    """Whitespace left at the edges of a line (around dropped raw HTML) removed."""
    while spans and not spans[0].text.strip():
        spans.pop(0)
    while spans and not spans[-1].text.strip():
        spans.pop()
    if spans:
        first = spans[0]
        spans[0] = Span(first.text.lstrip(), first.marks, first.href)
        last = spans[-1]
        spans[-1] = Span(last.text.rstrip(), last.marks, last.href)
    return tuple(spans)


class _Converter:
    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.out: list[Line] = []
        self.quote = 0
        self.group = 0
        self.quote_group = 0
        self.lists: list[list[Any]] = []  # [ordered, next number]
        self.marker: str | None = None
        self.heading = False
        self.row: list[tuple[Span, ...]] | None = None
        self.in_head = False

    # -- output helpers ------------------------------------------------------------
    def _emit(self, spans: tuple[Span, ...], block: str | None = None, lang: str | None = None) -> None:
        group = 0
        if self.quote:
            block, group, lang = "quote", self.quote_group, None
        elif block == "pre":
            group = self.group
        self.out.append(Line(spans, kind=self.kind, block=block, group=group, lang=lang))

    def _separate(self) -> None:
        """A blank line before a new block, except inside lists."""
        if self.lists or not self.out or self.out[-1].blank:
            return
        self._emit(())

    def _indent(self, first: bool) -> Span | None:
        if not self.lists:
            return None
        depth = len(self.lists) - 1
        if first and self.marker is not None:
            text = "  " * depth + self.marker
            self.marker = None
            return Span(text)
        return Span("  " * (depth + 1))

    # -- inline --------------------------------------------------------------------
    def _inline(self, token: Token) -> list[tuple[Span, ...]]:
        lines: list[list[Span]] = [[]]
        marks: list[str] = ["b"] if self.heading else []
        href: str | None = None

        def add(text: str, code: bool = False) -> None:
            if not text:
                return
            text = _inline_text(text)
            use_code = code and not marks and href is None
            span = Span(text, _sorted_marks(marks, use_code), href)
            cur = lines[-1]
            if cur and cur[-1].marks == span.marks and cur[-1].href == span.href:
                cur[-1] = Span(cur[-1].text + text, span.marks, span.href)
            else:
                cur.append(span)

        for child in token.children or ():
            kind = child.type
            if kind == "text":
                add(child.content)
            elif kind in ("softbreak", "hardbreak"):
                lines.append([])
            elif kind == "code_inline":
                add(child.content, code=True)
            elif kind in ("strong_open", "em_open", "s_open"):
                marks.append({"strong_open": "b", "em_open": "i", "s_open": "s"}[kind])
            elif kind in ("strong_close", "em_close", "s_close"):
                mark = {"strong_close": "b", "em_close": "i", "s_close": "s"}[kind]
                for k in range(len(marks) - 1, -1, -1):
                    if marks[k] == mark:
                        del marks[k]
                        break
            elif kind == "link_open":
                href = _link(str(child.attrGet("href") or ""))
            elif kind == "link_close":
                href = None
            elif kind == "image":
                add("".join(c.content for c in child.children or () if c.type in ("text", "code_inline")))
            elif kind == "html_inline":
                continue
            elif child.content:
                add(child.content)
        return [_trim(line) for line in lines]

    def _paragraph(self, token: Token) -> None:
        for k, spans in enumerate(self._inline(token)):
            lead = self._indent(k == 0)
            if lead is not None:
                spans = (lead, *spans)
            if spans:
                self._emit(spans)

    # -- blocks --------------------------------------------------------------------
    def run(self, tokens: list[Token]) -> list[Line]:
        for token in tokens:
            kind = token.type
            if kind == "paragraph_open" or kind == "heading_open":
                if not token.hidden:
                    self._separate()
                self.heading = kind == "heading_open"
            elif kind == "heading_close":
                self.heading = False
            elif kind == "inline":
                if self.row is not None:
                    self.row.append(tuple(s for line in self._inline(token) for s in line))
                else:
                    self._paragraph(token)
            elif kind in ("bullet_list_open", "ordered_list_open"):
                self._separate()
                if self.marker is not None:  # a list opening a list item
                    self._emit((self._indent(True) or Span(""),))
                start = token.attrGet("start")
                self.lists.append([kind == "ordered_list_open", int(start) if start else 1])
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.lists.pop()
            elif kind == "list_item_open":
                ordered, number = self.lists[-1]
                if ordered:
                    self.marker = f"{number}. "
                    self.lists[-1][1] = number + 1
                else:
                    self.marker = "• " if len(self.lists) == 1 else "◦ "
            elif kind == "list_item_close":
                self.marker = None
            elif kind == "blockquote_open":
                if not self.quote:
                    self._separate()
                    self.quote_group += 1
                self.quote += 1
            elif kind == "blockquote_close":
                self.quote -= 1
            elif kind in ("fence", "code_block"):
                self._separate()
                if self.marker is not None:
                    self._emit((self._indent(True) or Span(""),))
                info = token.info.split()[0] if token.info.split() else ""
                lang = info if _LANG.fullmatch(info) else None
                self.group += 1
                for text in token.content.rstrip("\n").split("\n"):
                    self._emit((Span(clean_code(text)),) if text else (), block="pre", lang=lang)
            elif kind == "hr":
                self._separate()
                self._emit((Span("———"),))
            elif kind == "table_open":
                self._separate()
            elif kind == "thead_open":
                self.in_head = True
            elif kind == "thead_close":
                self.in_head = False
            elif kind == "tr_open":
                self.row = []
            elif kind == "tr_close":
                cells = self.row or []
                self.row = None
                spans: list[Span] = []
                for k, cell in enumerate(cells):
                    if k:
                        spans.append(Span(" | "))
                    if self.in_head:
                        cell = tuple(Span(s.text, _sorted_marks([*s.marks, "b"]), s.href) for s in cell)
                    spans.extend(cell)
                lead = self._indent(True)
                self._emit(tuple([lead, *spans] if lead else spans))
            # html_block, *_close of paragraphs and tables: nothing to show
        while self.out and self.out[-1].blank:
            self.out.pop()
        return self.out


@lru_cache(maxsize=256)
def markdown_lines(source: str, kind: str = "note") -> tuple[Line, ...]:
    """The Markdown `source` as lines (blank lines between blocks), cached by content."""
    if not source or not source.strip():
        return ()
    return tuple(_Converter(kind).run(_visible_tokens(_MD.parse(source))))


@lru_cache(maxsize=256)
def compact_lines(source: str, kind: str = "note") -> tuple[Line, ...]:
    """`markdown_lines` without blank lines (progress drafts), cached by content."""
    return tuple(line for line in markdown_lines(source, kind) if not line.blank)


# --- web ------------------------------------------------------------------------------

WEB_TAGS = frozenset(
    "p br hr strong em b i s del code pre blockquote ul ol li h3 h4 h5 h6 a "
    "table thead tbody tr th td".split()
)
_CODE_CLASS = re.compile(r"language-[A-Za-z0-9_+#.-]{1,32}")


def _attr_ok(tag: str, name: str, value: str) -> bool:
    if tag == "a":
        return name in ("href", "title", "rel")
    if tag == "ol":
        return name == "start" and value.isdigit()
    if tag == "code":
        return name == "class" and bool(_CODE_CLASS.fullmatch(value))
    return False


def _web_parser() -> MarkdownIt:
    md = _parser()

    def drop(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        return ""

    def image(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        return escape("".join(c.content for c in token.children or () if c.type in ("text", "code_inline")))

    def heading_open(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        level = min(int(tokens[idx].tag[1]) + 2, 6)
        return f"<h{level}>"

    def heading_close(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        level = min(int(tokens[idx].tag[1]) + 2, 6)
        return f"</h{level}>\n"

    def link_open(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        # Only absolute http(s) and mailto links: a relative one is a click on the
        # gateway itself (a login link carrying someone else's token); its text stays.
        # Links do not nest, so the next link_close is this one's.
        href = str(tokens[idx].attrGet("href") or "")
        env["link_shown"] = len(href) <= MAX_HREF and bool(_HTTP.match(href) or _MAILTO.match(href))
        if not env["link_shown"]:
            return ""
        tokens[idx].attrSet("rel", "nofollow noopener noreferrer")
        return str(self.renderToken(tokens, idx, options, env))

    def link_close(self: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        return str(self.renderToken(tokens, idx, options, env)) if env.pop("link_shown", True) else ""

    md.add_render_rule("html_block", drop)
    md.add_render_rule("html_inline", drop)
    md.add_render_rule("image", image)
    md.add_render_rule("heading_open", heading_open)
    md.add_render_rule("heading_close", heading_close)
    md.add_render_rule("link_open", link_open)
    md.add_render_rule("link_close", link_close)
    return md


_WEB_MD = _web_parser()
_CLEANER = bleach.sanitizer.Cleaner(
    tags=WEB_TAGS,
    attributes=_attr_ok,
    protocols=frozenset({"http", "https", "mailto"}),
    strip=True,
    strip_comments=True,
)


@lru_cache(maxsize=128)
def markdown_web_html(source: str) -> str:
    """The Markdown `source` as a sanitised HTML fragment, cached by content."""
    if not source or not source.strip():
        return ""
    tokens = _visible_tokens(_WEB_MD.parse(source))
    return str(_CLEANER.clean(_WEB_MD.renderer.render(tokens, _WEB_MD.options, {}))).strip()


@lru_cache(maxsize=256)
def note_summary(source: str) -> str | None:
    """The note on one line: its text lines joined with one space (the bar left out);
    "Progress updated" for a note that is only a bar; None for a note with nothing to show."""
    bar, rest = note_parts(source)
    text = " ".join(line.text.strip() for line in compact_lines(rest) if line.text.strip())
    if text:
        return text
    return PROGRESS_UPDATED if bar is not None else None


PROGRESS_UPDATED = "Progress updated"
"""What a note that is only a progress bar says where a one-line summary is needed."""
