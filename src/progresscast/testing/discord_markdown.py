"""Discord's Markdown as a reader sees it: the text shown, the mentions it makes, its links.

An approximation of Discord's parser good enough to judge what a bot sends: a
backslash before punctuation shows that character; nothing inside inline code or a
code block is read (a code block runs to the next ```` ``` ````); emphasis marks
(``**`` ``*`` ``__`` ``_`` ``~~`` ``||``) are markup; ``> ``, ``-# ``, ``# `` at a
line's start are markup; ``[text](url)`` is a link; ``<@id>``, ``<@!id>``, ``<@&id>``,
``<#id>`` and ``@everyone``/``@here`` are mentions (the kinds `allowed_mentions`
filters: ``everyone``, ``users``, ``roles``; a channel link is not a ping).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

_MENTION = re.compile(r"<(@!?|@&|#)(\d{1,20})>|@(everyone|here)\b")
_KINDS = {"@": "user", "@!": "user", "@&": "role", "#": "channel"}
_LINK = re.compile(r"\[([^\]\n]*)\]\((https?://[^\s)]+)\)")
_LINE_MARK = re.compile(r"^(> |>>> |-# |#{1,3} )")
_MARKUP = ("**", "__", "~~", "||", "*", "_")
_PUNCT = set("\\`*_~|<>[]()@#:-+.!>=")


@dataclass
class Read:
    text: str = ""
    """What a reader sees."""
    mentions: list[str] = field(default_factory=list)
    """Each mention: "everyone" (@everyone or @here), "user:<id>", "role:<id>", "channel:<id>"."""
    links: list[tuple[str, str]] = field(default_factory=list)
    """(url, text) of each masked link."""

    @property
    def pings(self) -> list[str]:
        """The mentions that can notify someone (channel links cannot)."""
        return [m for m in self.mentions if not m.startswith("channel:")]


def _inline(text: str, out: Read) -> str:
    shown: list[str] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in _PUNCT:
            shown.append(text[i + 1])
            i += 2
            continue
        if ch == "`":
            run = len(text[i:]) - len(text[i:].lstrip("`"))
            close = text.find("`" * run, i + run)
            if close != -1:
                code = text[i + run : close]
                shown.append(code.strip(" ") if run > 1 else code)
                i = close + run
                continue
        if ch in "<@":
            match = _MENTION.match(text, i)
            if match is not None:
                out.mentions.append("everyone" if match.group(3) else f"{_KINDS[match.group(1)]}:{match.group(2)}")
                shown.append(match.group(0))
                i = match.end()
                continue
        if ch == "[":
            match = _LINK.match(text, i)
            if match is not None:
                inner = Read()
                label = _inline(match.group(1), inner)
                out.mentions += inner.mentions
                out.links.append((match.group(2), label))
                shown.append(label)
                i = match.end()
                continue
        marker = next((m for m in _MARKUP if text.startswith(m, i)), None)
        if marker is not None:
            i += len(marker)
            continue
        shown.append(ch)
        i += 1
    return "".join(shown)


def read_markdown(source: str) -> Read:
    """What Discord shows for `source` (a message's content or a Text Display's)."""
    out = Read()
    rows: list[str] = []
    lines = source.split("\n")
    k = 0
    while k < len(lines):
        line = lines[k]
        if line.lstrip().startswith("```"):
            body: list[str] = []
            rest = line.lstrip()[3:]
            if "```" in rest:  # a one-line block
                rows.append(rest[: rest.index("```")])
                k += 1
                continue
            k += 1
            while k < len(lines) and "```" not in lines[k]:
                body.append(lines[k])
                k += 1
            if k < len(lines):
                body.append(lines[k][: lines[k].index("```")])
            rows.append("\n".join(b for b in body if b != "" or body))
            k += 1
            continue
        mark = _LINE_MARK.match(line)
        rows.append(_inline(line[mark.end() :] if mark else line, out))
        k += 1
    out.text = "\n".join(rows)
    return out


def components_text(components: list[dict[str, object]]) -> list[str]:
    """The `content` of every Text Display, nested ones included, in order."""
    out: list[str] = []
    for component in components:
        if component.get("type") == 10:
            out.append(str(component.get("content", "")))
        inner = component.get("components")
        if isinstance(inner, list):
            out += components_text(inner)
    return out


__all__ = ["Read", "components_text", "read_markdown"]
