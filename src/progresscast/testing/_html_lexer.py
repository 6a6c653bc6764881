"""Telegram's HTML parse mode, lexical layer: the input as a stream of text runs, start
tags and end tags (the rules are in telegram_html.py, which builds entities from them)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

ERROR_PREFIX = "Bad Request: can't parse entities: "


class TelegramHTMLError(ValueError):
    """Telegram refused the HTML; ``description`` is the Bot API's word-for-word answer."""

    def __init__(self, reason: str) -> None:
        self.reason = reason
        self.description = ERROR_PREFIX + reason
        super().__init__(self.description)



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
