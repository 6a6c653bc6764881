"""The small document model every renderer fits and then serialises.

A draft is a list of `Line`s; a line is a tuple of `Span`s (text plus marks) and may
belong to a block (`pre` or `quote`) that spans several consecutive lines. Fitting
(cutting lines, dropping lines) works on this model, where every visible character
is known, so the limits hold before any HTML, rich-message JSON or text is produced.

Lengths are counted in UTF-16 code units everywhere (`u16`): that is how Telegram
measures entity offsets, it is never smaller than the code-point count Telegram uses
for its 4,096 limit, and for text without astral characters (emoji) it is simply the
number of characters.
"""

from __future__ import annotations

import bisect
import itertools
import re
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from ..model.card import SHOWN_AS_SPACE

ELLIPSIS = "…"

# Marks a span may carry, outermost first when serialised.
MARK_ORDER = ("b", "i", "u", "s", "code")

# Characters that would break lines or that Telegram may refuse, replaced by a space in
# running text: C0/C1 controls (tab and newline included), line/paragraph separators.
_BREAKERS = SHOWN_AS_SPACE
_SURROGATES = re.compile("[\ud800-\udfff]")
# Whitespace left at either side of a cut `…` is dropped. (Cuts themselves only fall
# between user-perceived characters: see `clusters`.)
_DANGLING_TAIL = re.compile(r"\s+$")
_DANGLING_HEAD = re.compile(r"^\s+")


def u16(text: str) -> int:
    """Length in UTF-16 code units (astral characters count twice)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le", "surrogatepass")) >> 1


@lru_cache(maxsize=4096)
def plain(text: str) -> str:
    """Agent text made safe for one line: whitespace collapsed, controls and lone
    surrogates replaced. Cached: the same step texts come back on every render."""
    if _SURROGATES.search(text):
        text = _SURROGATES.sub("\ufffd", text)
    return " ".join(_BREAKERS.sub(" ", text).split())


def clean_code(text: str) -> str:
    """Text of a code line: controls other than tab removed, surrogates replaced."""
    text = _SURROGATES.sub("\ufffd", text)
    return re.sub("[\x00-\x08\x0a-\x1f\x7f-\x9f\u2028\u2029]", " ", text)


def _attaches(ch: str) -> bool:
    """Whether `ch` belongs to the character before it (one user-perceived character):
    joiners, variation selectors, emoji modifiers, tag characters, the keycap mark and
    combining marks."""
    o = ord(ch)
    if o < 0x300:
        return False
    return (
        o == 0x200D
        or 0xFE00 <= o <= 0xFE0F
        or 0x1F3FB <= o <= 0x1F3FF
        or 0xE0020 <= o <= 0xE007F
        or o == 0x20E3
        or unicodedata.category(ch) in ("Mn", "Me", "Mc")
    )


def _is_regional(ch: str) -> bool:
    return "\U0001f1e6" <= ch <= "\U0001f1ff"


def clusters(text: str) -> list[int]:
    """Where each user-perceived character (an approximation of Unicode's extended
    grapheme clusters good for emoji: ZWJ sequences, flags, keycaps, skin tones, tag
    sequences, combining marks) starts, plus len(text). Cuts happen only there."""
    starts: list[int] = []
    i, n = 0, len(text)
    while i < n:
        starts.append(i)
        j = i + 1
        if _is_regional(text[i]) and j < n and _is_regional(text[j]):
            j += 1  # a flag is a pair of regional indicators
        while j < n and (_attaches(text[j]) or text[j - 1] == "\u200d"):
            j += 1
        i = j
    starts.append(n)
    return starts


def _simple(text: str) -> bool:
    """No astral characters and nothing that attaches to its neighbour: cut anywhere."""
    return text.isascii() or (u16(text) == len(text) and not any(_attaches(ch) for ch in text))


@lru_cache(maxsize=64)
def _cut_points(text: str) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """Where `text` may be cut (each user-perceived character's start, and its end) with
    the UTF-16 units before each; None when it may be cut anywhere. Cached: fitting a
    long line to a size cuts the same text at many lengths."""
    if _simple(text):
        return None
    starts = clusters(text)
    before = [0]
    for a, b in itertools.pairwise(starts):
        before.append(before[-1] + u16(text[a:b]))
    return tuple(starts), tuple(before)


def _prefix_units(text: str, units: int) -> str:
    """The longest prefix of `text` at most `units` UTF-16 units long that ends between
    two user-perceived characters."""
    if units <= 0:
        return ""
    points = _cut_points(text)
    if points is None:
        return text[:units]
    starts, before = points
    return text[: starts[bisect.bisect_right(before, units) - 1]]


def _suffix_units(text: str, units: int) -> str:
    """The longest suffix of `text` at most `units` UTF-16 units long that starts at a
    user-perceived character."""
    if units <= 0:
        return ""
    points = _cut_points(text)
    if points is None:
        return text[-units:] if units < len(text) else text
    starts, before = points
    return text[starts[bisect.bisect_left(before, before[-1] - units)] :]


def middle_cut(text: str, limit: int) -> str:
    """Cut to at most `limit` units with `…` in the middle, keeping both ends."""
    if u16(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    budget = limit - 1
    head = _DANGLING_TAIL.sub("", _prefix_units(text, budget - budget // 2))
    tail = _DANGLING_HEAD.sub("", _suffix_units(text, budget // 2))
    return head + ELLIPSIS + tail


def end_cut(text: str, limit: int) -> str:
    """Cut to at most `limit` units, ending with `…` when cut."""
    if u16(text) <= limit:
        return text
    if limit <= 1:
        return ELLIPSIS[:limit]
    return _DANGLING_TAIL.sub("", _prefix_units(text, limit - 1)) + ELLIPSIS


@dataclass(frozen=True, slots=True)
class Span:
    text: str
    marks: tuple[str, ...] = ()
    """Subset of MARK_ORDER, in that order."""
    href: str | None = None
    """An http(s) URL the text links to."""


@dataclass(frozen=True, slots=True)
class Line:
    spans: tuple[Span, ...] = ()
    kind: str = "text"
    """header (the label and `k/N`), label (the label alone), attention, headline (the
    activity's), tool, step, summary, bar (the note's own bar), note, answer, blank."""
    state: str | None = None
    """For steps: completed, in_progress, pending, blocked, skipped or paused."""
    block: str | None = None
    """None, "pre" or "quote": consecutive lines of the same block and group form one."""
    group: int = 0
    lang: str | None = None
    prefix: int = 0
    """How many leading spans are decoration (an icon) that cuts must keep."""
    index: int = -1
    """For steps: the position in the plan (0-based)."""
    length: int = field(init=False, compare=False)
    """Visible length in UTF-16 units, computed once."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "length", sum(u16(s.text) for s in self.spans))

    @property
    def text(self) -> str:
        return "".join(s.text for s in self.spans)

    @property
    def blank(self) -> bool:
        return not any(s.text.strip() for s in self.spans)

    def with_spans(self, spans: tuple[Span, ...]) -> Line:
        return replace(self, spans=spans)


def _take(spans: tuple[Span, ...], units: int, *, from_end: bool) -> list[Span]:
    """The spans of at most `units` from the start (or, `from_end`, the end), the last
    one taken cut to fit; the cut edge keeps no dangling whitespace."""
    part_of, dangling = (_suffix_units, _DANGLING_HEAD) if from_end else (_prefix_units, _DANGLING_TAIL)
    out: list[Span] = []
    for span in reversed(spans) if from_end else spans:
        if units <= 0:
            break
        n = u16(span.text)
        if n <= units:
            out.append(span)
            units -= n
        else:
            part = part_of(span.text, units)
            if part:
                out.append(Span(part, span.marks, span.href))
            break
    if out:
        edge = out[-1]
        trimmed = dangling.sub("", edge.text)
        out[-1] = Span(trimmed, edge.marks, edge.href)
        if not trimmed:
            out.pop()
    if from_end:
        out.reverse()
    return out


def cut_spans(spans: tuple[Span, ...], limit: int, how: str = "middle") -> tuple[Span, ...]:
    """Cut a run of spans to at most `limit` units: `middle` keeps both ends, `end` the
    start, `front` the end; the `…` is plain text."""
    total = sum(u16(s.text) for s in spans)
    if total <= limit:
        return spans
    if limit <= 0:
        return ()
    dots = Span(ELLIPSIS)
    budget = limit - 1
    if how == "end":
        return (*_take(spans, budget, from_end=False), dots)
    if how == "front":
        return (dots, *_take(spans, budget, from_end=True))
    head = _take(spans, budget - budget // 2, from_end=False)
    tail = _take(spans, budget // 2, from_end=True)
    if head and tail and (head[-1].marks, head[-1].href) == (tail[0].marks, tail[0].href):
        dots = Span(ELLIPSIS, head[-1].marks, head[-1].href)  # one entity, not two
    return (*head, dots, *tail)


def cut_line(line: Line, limit: int, how: str = "middle") -> Line:
    """Cut a line to at most `limit` units, keeping its decoration prefix whole."""
    if line.length <= limit:
        return line
    keep = line.spans[: line.prefix]
    used = sum(u16(s.text) for s in keep)
    body = cut_spans(line.spans[line.prefix :], max(limit - used, 0), how)
    if used > limit:  # a limit smaller than the icon: cut everything
        return line.with_spans(cut_spans(line.spans, limit, how))
    return line.with_spans((*keep, *body))


def visible_units(lines: list[Line] | tuple[Line, ...]) -> int:
    """Visible length of lines joined by newlines."""
    if not lines:
        return 0
    return sum(line.length for line in lines) + len(lines) - 1


def spaced(text: str) -> tuple[str, str, str]:
    """`text` as its leading white space, its core and its trailing white space (all of
    a blank text is its lead): marks wrap the core alone, as Markdown-like syntaxes read
    a mark next to a space as text."""
    core = text.strip()
    start = len(text) - len(text.lstrip())
    return text[:start], core, text[start + len(core) :]


def merge_runs(spans: Sequence[Span]) -> list[Span]:
    """Adjacent spans with the same marks and link merged into one."""
    out: list[Span] = []
    for span in spans:
        if not span.text:
            continue
        if out and (out[-1].marks, out[-1].href) == (span.marks, span.href):
            out[-1] = Span(out[-1].text + span.text, span.marks, span.href)
        else:
            out.append(span)
    return out


def runs_by_group(lines: Sequence[Line], group: Callable[[Line], str]) -> list[tuple[str, list[Line]]]:
    """The lines in runs of one group (`group(line)`), in order: what a channel makes one
    block of. Blank lines are left out, but inside a `text` run (a paragraph break in the
    note or the answer)."""
    runs: list[tuple[str, list[Line]]] = []
    for line in lines:
        if line.blank:
            if runs and runs[-1][0] == "text":
                runs[-1][1].append(line)
            continue
        kind = group(line)
        if not runs or runs[-1][0] != kind:
            runs.append((kind, []))
        runs[-1][1].append(line)
    return runs


def split_line(line: Line, units: int) -> tuple[Line, Line]:
    """Split a line after at most `units` units (no ellipsis): the head and the rest."""
    head: list[Span] = []
    rest: list[Span] = []
    left = units
    for span in line.spans:
        if rest or left <= 0:
            rest.append(span)
            continue
        n = u16(span.text)
        if n <= left:
            head.append(span)
            left -= n
            continue
        part = _prefix_units(span.text, left)
        if part:
            head.append(Span(part, span.marks, span.href))
        rest.append(Span(span.text[len(part) :], span.marks, span.href))
        left = 0
    if not head and rest:  # a single character wider than `units`: take it anyway
        first = rest[0]
        head = [Span(first.text[0], first.marks, first.href)]
        rest[0] = Span(first.text[1:], first.marks, first.href)
    return replace(line, spans=tuple(head), prefix=0), replace(line, spans=tuple(rest), prefix=0)
