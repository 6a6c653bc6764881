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
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ._html_lexer import _SURROGATE, TelegramHTMLError, _EndTag, _Lexer, _StartTag, _Text

MAX_TEXT = 4096
"""Most characters a text message may show after entity parsing."""

MAX_RAW_TEXT = 1 << 15
"""Most UTF-8 bytes of ``text`` the Bot API accepts before parsing (32,768)."""



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
