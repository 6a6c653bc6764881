"""Telegram's HTML parse mode (``parse_mode=HTML``), checked as strictly as Telegram does.

The Bot API refuses a whole call when it cannot parse the markup, and answers with a
precise description. This module follows the same rules and raises
:class:`TelegramHTMLError` with the same words, so a test can assert on the exact
description Telegram would send. Byte offsets in error texts count bytes of the UTF-8
encoded input; entity offsets and lengths count UTF-16 code units — both as Telegram
reports them.

The rules, as Telegram applies them:

* Tags: ``b strong i em u ins s strike del tg-spoiler span code pre blockquote a
  tg-emoji tg-time``. Any other start tag fails the call (``<br>``, ``<p>``, ``<ul>``);
  so does ``<br/>``, because a tag name runs up to whitespace or ``>`` and is therefore
  ``br/``. A lone ``<`` in text is a start tag with an empty name. Tag names are
  case-insensitive (ASCII); attribute names are not.
* Attributes: a value is quoted (``'`` or ``"``, character references decoded) or a bare
  token of letters, digits, ``.`` and ``-`` (lower-cased) that must end at whitespace or
  ``>``; an attribute may have no value. Unknown attributes are ignored. Telegram reads
  ``href`` of ``a``, ``class="language-…"`` of ``code``, ``class="tg-spoiler"`` of
  ``span`` (required), ``emoji-id`` of ``tg-emoji``, ``expandable`` of ``blockquote`` and
  ``unix`` / ``format`` of ``tg-time``. A NUL character ends a tag like the end of text.
* End tags close the innermost open tag; their name is compared case-insensitively and
  may be left out (``</>``).
* Character references: only ``&lt; &gt; &amp; &quot;`` and numeric ``&#NN;`` /
  ``&#xHH;`` (lower-case ``x``, at most nine characters before the optional ``;``) are
  decoded. Anything else starting with ``&`` — ``&nbsp;``, ``&copy;``, ``&#X41;``, a
  bare ``&`` — stays in the text as typed; there is no "unsupported entity" error.
  A reference to a surrogate code point makes the whole text invalid.
* Entities: a tag enclosing no text makes no entity. ``<a>`` without ``href`` links its
  own text; ``tg://user?id=N`` makes a ``text_mention``; a URL Telegram would not accept
  makes no entity. ``<pre>`` and a ``<code class="language-x">`` spanning exactly the
  same text merge into one ``pre`` with that language; a ``code`` alone loses its
  language. ``tg-time`` with a non-positive ``unix`` makes no entity. Entities are
  ordered by offset, longer first, then by kind (block quotes outermost, then ``pre``,
  ``code``, ``date_time``, links, then the text styles, custom emoji innermost).

Telegram's later clean-up of entities nested where it forbids them (for example inside
``code``) is not reproduced; its trimming of the text is, in :func:`fix_text`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, NamedTuple

MAX_TEXT = 4096
"""Most characters a text message may show after entity parsing."""

MAX_RAW_TEXT = 1 << 15
"""Most UTF-8 bytes of ``text`` the Bot API accepts before parsing (32,768)."""

ERROR_PREFIX = "Bad Request: can't parse entities: "


class TelegramHTMLError(ValueError):
    """Telegram refused the HTML; ``description`` is the Bot API's word-for-word answer."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.description = ERROR_PREFIX + reason
        super().__init__(self.description)


# Which JSON field of a MessageEntity carries ``Entity.extra``, per entity type:
# (field name, from extra to JSON, from JSON to extra).
_EXTRA_FIELDS: dict[str, tuple[str, Any, Any]] = {
    "text_link": ("url", lambda x: x, lambda v: v),
    "pre": ("language", lambda x: x, lambda v: v or None),
    "custom_emoji": ("custom_emoji_id", str, lambda v: v),
    "text_mention": (
        "user",
        lambda x: {"id": int(x), "is_bot": False, "first_name": ""},
        lambda v: (v or {}).get("id"),
    ),
}


class Entity(NamedTuple):
    """One MessageEntity: ``(type, offset, length[, extra])``, offsets in UTF-16 units.

    ``extra`` is what the type carries: the URL of a ``text_link``, the language of a
    ``pre`` (absent when none), the id of a ``custom_emoji``, the user id of a
    ``text_mention``, ``(unix_time, format)`` of a ``date_time``.
    """

    type: str
    offset: int
    length: int
    extra: Any = None

    def to_api(self) -> dict[str, Any]:
        """The Bot API ``MessageEntity`` JSON object."""
        api: dict[str, Any] = {"type": self.type, "offset": self.offset, "length": self.length}
        if self.extra is not None:
            if self.type == "date_time":
                api["unix_time"], fmt = self.extra
                if fmt:
                    api["date_time_format"] = fmt
            elif self.type in _EXTRA_FIELDS:
                key, dump, _ = _EXTRA_FIELDS[self.type]
                api[key] = dump(self.extra)
        return api

    @classmethod
    def from_api(cls, obj: dict[str, Any]) -> Entity:
        """Read a Bot API ``MessageEntity`` (as sent in an ``entities`` parameter)."""
        kind = str(obj["type"])
        if kind == "date_time":
            extra: Any = (obj.get("unix_time"), obj.get("date_time_format") or "")
        elif kind in _EXTRA_FIELDS:
            key, _, load = _EXTRA_FIELDS[kind]
            extra = load(obj.get(key))
        else:
            extra = None
        return cls(kind, int(obj["offset"]), int(obj["length"]), extra)


@dataclass(frozen=True)
class ParsedText:
    """What a message shows: the visible text and its entities."""

    text: str
    entities: list[Entity] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Visible length in UTF-16 code units (Telegram's offset unit)."""
        return utf16_len(self.text)

    def entities_api(self) -> list[dict[str, Any]]:
        return [e.to_api() for e in self.entities]


def utf16_len(text: str) -> int:
    """Length in UTF-16 code units: astral characters (most emoji) count twice."""
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def visible_length(html: str) -> int:
    """UTF-16 length of the text ``html`` shows — the strict count to hold under MAX_TEXT.

    Telegram itself counts code points after trimming; this counts UTF-16 units
    before trimming, so it is never smaller: text that passes here passes there.
    Raises :class:`TelegramHTMLError` when Telegram would refuse the HTML.
    """
    return utf16_len(parse(html).text)


# =========================================================================================
# Lexical layer: the input as a stream of text runs, start tags and end tags.
# =========================================================================================

_TAG_NAMES = frozenset(
    "a b strong i em u ins s strike del tg-spoiler span code pre blockquote tg-emoji tg-time".split()
)

_NEXT_SPECIAL = re.compile(r"[<&]")
_BLANKS = re.compile(r"[ \t\r\n\v]*")
_NAME = re.compile(r"[^ \t\r\n\v>\0]*")
_ATTR_NAME = re.compile(r"[^ \t\r\n\v>\0=/\"']*")
_BARE_VALUE = re.compile(r"[A-Za-z0-9.\-]*")
_WORD_END = frozenset(" \t\r\n\v>\0")
_CHAR_REF = re.compile(r"&(?:#x(?P<hex>[0-9a-fA-F]+)|#(?P<dec>[0-9]+)|(?P<name>[A-Za-z]+));?")
_NAMED_REFS = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_SURROGATE = re.compile("[\ud800-\udfff]")


def _char_ref(source: str, at: int, stop: int) -> tuple[str, int] | None:
    """The character a reference at ``source[at] == '&'`` stands for, and where it ends.

    None when Telegram would keep the ``&`` as a literal character.
    """
    m = _CHAR_REF.match(source, at, stop)
    if m is None:
        return None
    if m["name"] is not None:
        char = _NAMED_REFS.get(m["name"])
        return None if char is None else (char, m.end())
    digits_end = m.end("hex") if m["hex"] is not None else m.end("dec")
    if digits_end - at > 9:
        return None
    code = int(m["hex"], 16) if m["hex"] is not None else int(m["dec"])
    if not 0 < code < 0x10FFFF:
        return None
    return chr(code), m.end()


def _printable(text: str) -> str:
    """``text`` as the server would echo it: lone surrogates become U+FFFD."""
    if _SURROGATE.search(text) is None:
        return text
    return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


class _Text(NamedTuple):
    text: str


class _StartTag(NamedTuple):
    name: str
    attrs: list[tuple[str, str | None]]
    at: int  # index of its '<' in the input


class _EndTag(NamedTuple):
    name: str
    at: int
    complete: bool  # False: the text ran out (or hit NUL) before its '>'


_Token = _Text | _StartTag | _EndTag


class _Lexer:
    """Splits the input into tokens, raising Telegram's errors for malformed start tags.

    An unfinished end tag is reported through ``_EndTag.complete`` instead, because
    Telegram first complains when there is no open tag to end at all.
    """

    def __init__(self, source: str) -> None:
        self.src = source
        self._nul = -1  # index of the next NUL character (len(source) when none)

    def _tag_limit(self, at: int) -> int:
        """Where a tag starting at ``at`` must end: inside a tag, NUL acts as the end of text."""
        if self._nul < at:
            found = self.src.find("\0", at)
            self._nul = len(self.src) if found < 0 else found
        return self._nul

    def _skip(self, pattern: re.Pattern[str], pos: int, stop: int) -> int:
        """The index after the run of ``pattern`` starting at ``pos``."""
        m = pattern.match(self.src, pos, stop)
        return pos if m is None else m.end()

    def byte_offset(self, index: int) -> int:
        return len(self.src[:index].encode("utf-8", "surrogatepass"))

    def fail(self, what: str, index: int) -> TelegramHTMLError:
        """Telegram's error for ``what`` went wrong at ``self.src[index]``."""
        return TelegramHTMLError(f"{what} at byte offset {self.byte_offset(index)}")

    def tokens(self) -> Iterator[_Token]:
        src, pos, size = self.src, 0, len(self.src)
        run: list[str] = []
        while pos < size:
            m = _NEXT_SPECIAL.search(src, pos)
            if m is None:
                run.append(src[pos:])
                break
            run.append(src[pos : m.start()])
            pos = m.start()
            if src[pos] == "&":
                ref = _char_ref(src, pos, size)
                if ref is None:
                    run.append("&")
                    pos += 1
                else:
                    run.append(ref[0])
                    pos = ref[1]
                continue
            if run:
                yield _Text("".join(run))
                run = []
            stop = self._tag_limit(pos)
            if src.startswith("/", pos + 1):
                token, pos = self._end_tag(pos, stop)
                yield token
                if not token.complete:
                    return
            else:
                start, pos = self._start_tag(pos, stop)
                yield start
        if run:
            yield _Text("".join(run))

    def _end_tag(self, at: int, stop: int) -> tuple[_EndTag, int]:
        name_end = self._skip(_NAME, at + 2, stop)
        name = _printable(self.src[at + 2 : name_end]).translate(_ASCII_LOWER)
        close = self._skip(_BLANKS, name_end, stop)
        if close < stop and self.src[close] == ">":
            return _EndTag(name, at, True), close + 1
        return _EndTag(name, at, False), close

    def _start_tag(self, at: int, stop: int) -> tuple[_StartTag, int]:
        src = self.src
        name_end = self._skip(_NAME, at + 1, stop)
        if name_end >= stop:
            raise self.fail("Unclosed start tag", at)
        tag = _printable(src[at + 1 : name_end]).translate(_ASCII_LOWER)
        if tag not in _TAG_NAMES:
            raise self.fail(f'Unsupported start tag "{tag}"', at)

        attrs: list[tuple[str, str | None]] = []
        pos = name_end
        while src[pos] != ">":
            pos = self._skip(_BLANKS, pos, stop)
            if pos < stop and src[pos] == ">":
                break
            key_end = self._skip(_ATTR_NAME, pos, stop)
            if key_end == pos:
                raise self.fail(f'Empty attribute name in the tag "{tag}"', at)
            key = _printable(src[pos:key_end])
            pos = self._skip(_BLANKS, key_end, stop)
            if pos >= stop:
                raise self.fail(f'Unclosed start tag "{tag}"', at)
            if src[pos] != "=":
                attrs.append((key, None))
                continue
            pos = self._skip(_BLANKS, pos + 1, stop)
            if pos >= stop:
                raise self.fail(f'Unclosed start tag "{tag}"', at)
            value, pos = self._attr_value(pos, stop)
            if pos >= stop:
                raise self.fail("Unclosed start tag", at)
            attrs.append((key, value))
        return _StartTag(tag, attrs, at), pos + 1

    def _attr_value(self, pos: int, stop: int) -> tuple[str, int]:
        src = self.src
        quote = src[pos]
        if quote not in "'\"":
            end = self._skip(_BARE_VALUE, pos, stop)
            if end < stop and src[end] not in _WORD_END:
                raise self.fail("Unexpected end of name token", pos)
            return src[pos:end].lower(), end
        closing = src.find(quote, pos + 1, stop)
        end = stop if closing < 0 else closing
        parts: list[str] = []
        cursor = pos + 1
        while (amp := src.find("&", cursor, end)) >= 0:
            parts.append(src[cursor:amp])
            ref = _char_ref(src, amp, end)
            if ref is None:
                parts.append("&")
                cursor = amp + 1
            else:
                parts.append(ref[0])
                cursor = ref[1]
        parts.append(src[cursor:end])
        return _printable("".join(parts)), (end if closing < 0 else end + 1)


# =========================================================================================
# Structural layer: a stack of open tags turning closed tags into entities.
# =========================================================================================

# Order of entities that cover the same text: lower first (outermost).
_RANK = {
    "blockquote": 0,
    "expandable_blockquote": 0,
    "pre": 11,
    "code": 20,
    "date_time": 30,
    "text_link": 49,
    "text_mention": 49,
    "bold": 90,
    "italic": 91,
    "underline": 92,
    "strikethrough": 93,
    "spoiler": 94,
    "custom_emoji": 99,
}
_RANK_PRE_WITH_LANGUAGE = 10

_STYLES = {
    "b": "bold",
    "strong": "bold",
    "i": "italic",
    "em": "italic",
    "u": "underline",
    "ins": "underline",
    "s": "strikethrough",
    "strike": "strikethrough",
    "del": "strikethrough",
    "tg-spoiler": "spoiler",
    "span": "spoiler",
}

_TIME_FORMAT = re.compile(r"[tTdDwW]*|[rR]")
_EMOJI_ID = re.compile(r"-?[0-9]{1,19}")
_USER_LINK = re.compile(r"tg://user\?id=([0-9]+)", re.IGNORECASE)
_WEB_LINK = re.compile(r"https?://[^\s/?#]", re.IGNORECASE)
_BARE_DOMAIN = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}(?:[/?#]\S*)?", re.IGNORECASE)


def _last_value(attrs: list[tuple[str, str | None]], key: str, prefix: str = "") -> str | None:
    """The last value of attribute ``key`` that starts with ``prefix``, without the prefix."""
    found = None
    for name, value in attrs:
        if name == key and value is not None and value.startswith(prefix):
            found = value[len(prefix) :]
    return found


def _leading_int(value: str) -> int:
    """The integer a ``unix`` attribute starts with (0 when none), ignoring what follows."""
    m = re.match(r"(-?)([0-9]{0,10})", value.lstrip())
    assert m is not None
    number = int(m[2] or 0)
    return -number if m[1] else number


def _accepted_url(url: str) -> str | None:
    """The link Telegram keeps for ``url`` (bare domains get ``http://``), or None."""
    if url.lower().startswith(("tg:", "ton:", "tonsite:")) or _WEB_LINK.match(url):
        return url
    if _BARE_DOMAIN.fullmatch(url):
        return "http://" + url
    return None


@dataclass
class _OpenTag:
    tag: str
    info: Any  # what the tag's attributes said, see _Builder.open
    start: int  # UTF-16 offset of its first character
    first_piece: int  # index into _Builder.pieces of its first text


@dataclass
class _Made:
    kind: str
    offset: int
    length: int
    extra: Any = None
    rank: int = 0


class _Builder:
    """Consumes the tokens: collects the visible text, tracks open tags, makes entities."""

    def __init__(self, lexer: _Lexer) -> None:
        self.lexer = lexer
        self.pieces: list[str] = []
        self.units = 0
        self.open_tags: list[_OpenTag] = []
        self.made: list[_Made] = []

    def run(self) -> ParsedText:
        for token in self.lexer.tokens():
            if isinstance(token, _Text):
                self.pieces.append(token.text)
                self.units += utf16_len(token.text)
            elif isinstance(token, _StartTag):
                self.open(token)
            else:
                self.close(token)
        if self.open_tags:
            raise TelegramHTMLError(
                f'Can\'t find end tag corresponding to start tag "{self.open_tags[-1].tag}"'
            )
        text = "".join(self.pieces)
        if _SURROGATE.search(text):
            raise TelegramHTMLError(
                "Text contains invalid Unicode characters after decoding HTML entities, "
                "check for unmatched surrogate code units"
            )
        ordered = sorted(self.made, key=lambda m: (m.offset, -m.length, m.rank))
        # A code entity's language only served to merge it into a pre; it is not shown.
        return ParsedText(
            text, [Entity(m.kind, m.offset, m.length, None if m.kind == "code" else m.extra) for m in ordered]
        )

    def open(self, token: _StartTag) -> None:
        tag, attrs = token.name, token.attrs
        info: Any = None
        if tag == "a":
            info = _last_value(attrs, "href")
        elif tag == "code":
            info = _last_value(attrs, "class", "language-")
        elif tag == "span":
            if _last_value(attrs, "class", "tg-") != "spoiler":
                raise self.lexer.fail('Tag "span" must have class "tg-spoiler"', token.at)
        elif tag == "tg-emoji":
            info = _last_value(attrs, "emoji-id") or ""
        elif tag == "blockquote":
            info = any(name == "expandable" for name, _ in attrs)
        elif tag == "tg-time":
            unix = _last_value(attrs, "unix")
            info = (_leading_int(unix) if unix is not None else 0, _last_value(attrs, "format") or "")
        self.open_tags.append(_OpenTag(tag, info, self.units, len(self.pieces)))

    def close(self, token: _EndTag) -> None:
        if not self.open_tags:
            raise self.lexer.fail("Unexpected end tag", token.at)
        if not token.complete:
            raise self.lexer.fail("Unclosed end tag", token.at)
        top = self.open_tags[-1]
        if token.name and token.name != top.tag:
            raise TelegramHTMLError(
                f"Unmatched end tag at byte offset {self.lexer.byte_offset(token.at)}, "
                f'expected "</{top.tag}>", found "</{token.name}>"'
            )
        self.open_tags.pop()
        if self.units > top.start:
            self.emit(top, self.units - top.start)

    def add(self, kind: str, offset: int, length: int, extra: Any = None) -> None:
        self.made.append(_Made(kind, offset, length, extra, _RANK[kind]))

    def emit(self, top: _OpenTag, length: int) -> None:
        tag, info, offset = top.tag, top.info, top.start
        if tag in _STYLES:
            self.add(_STYLES[tag], offset, length)
        elif tag == "blockquote":
            self.add("expandable_blockquote" if info else "blockquote", offset, length)
        elif tag == "tg-emoji":
            if not _EMOJI_ID.fullmatch(info) or int(info) == 0 or not -(1 << 63) <= int(info) < 1 << 63:
                raise TelegramHTMLError("Invalid custom emoji identifier specified")
            self.add("custom_emoji", offset, length, info)
        elif tag == "tg-time":
            unix, fmt = info
            if not _TIME_FORMAT.fullmatch(fmt):
                raise TelegramHTMLError("Invalid date format used")
            if unix > 0:
                self.add("date_time", offset, length, (unix, fmt))
        elif tag == "a":
            self.link(info or "".join(self.pieces[top.first_piece :]), offset, length)
        elif tag in ("pre", "code"):
            self.code_block(tag, info, offset, length)

    def link(self, url: str, offset: int, length: int) -> None:
        mention = _USER_LINK.fullmatch(url)
        if mention:
            self.add("text_mention", offset, length, int(mention[1]))
        elif (accepted := _accepted_url(url)) is not None:
            self.add("text_link", offset, length, accepted)

    def code_block(self, tag: str, language: str | None, offset: int, length: int) -> None:
        # A pre and a code with a language around exactly the same text are one code
        # block with that language, whichever of the two is the outer tag.
        prev = self.made[-1] if self.made else None
        if prev is not None and (prev.offset, prev.length) == (offset, length):
            if tag == "pre" and prev.kind == "code" and prev.extra:
                prev.kind, prev.rank = "pre", _RANK_PRE_WITH_LANGUAGE
                return
            if tag == "code" and language and prev.kind == "pre" and prev.rank != _RANK_PRE_WITH_LANGUAGE:
                prev.extra, prev.rank = language, _RANK_PRE_WITH_LANGUAGE
                return
        self.add(tag, offset, length, language if tag == "code" else None)


def parse(html: str) -> ParsedText:
    """Parse ``html`` the way the Bot API parses ``parse_mode=HTML`` text.

    Raises :class:`TelegramHTMLError` with Telegram's description when it would refuse it.
    """
    return _Builder(_Lexer(html)).run()


# =========================================================================================
# What the server keeps.
# =========================================================================================


def fix_text(parsed: ParsedText) -> ParsedText:
    """Trim the way Telegram does before storing a message.

    Trailing spaces and newlines go, entities are cut to the new end; leading spaces
    and newlines go only up to the first entity. An all-blank text comes back empty.
    """
    text = parsed.text.rstrip(" \n")
    if not text:
        return ParsedText("", [])
    end = utf16_len(text)
    entities = [
        e._replace(length=min(e.length, end - e.offset)) for e in parsed.entities if e.offset < end
    ]
    # Leading blanks are plain BMP characters, so their count is also a UTF-16 count.
    blank_prefix = len(text) - len(text.lstrip(" \n"))
    cut = min([blank_prefix, *(e.offset for e in entities)])
    cut = max(cut, 0)
    if cut:
        text = text[cut:]
        entities = [e._replace(offset=e.offset - cut) for e in entities]
    entities.sort(key=lambda e: (e.offset, -e.length, _RANK.get(e.type, 50)))
    return ParsedText(text, entities)
