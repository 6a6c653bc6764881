"""The one answer splitter: a run's final answer as the lines of as many messages as
its length needs, each at most `limit` visible UTF-16 units, split at a paragraph
break in the second half of a message where there is one; a line longer than a
message is split (no ellipsis). Every channel serialises the chunks its own way."""

from __future__ import annotations

from .ir import Line, split_line, visible_units
from .markdown import markdown_lines


def split_lines(lines: list[Line], limit: int) -> list[list[Line]]:
    """Lines in runs of at most `limit` visible units, without leading or trailing blank lines."""
    pieces: list[Line] = []
    for line in lines:
        while line.length > limit:
            head, line = split_line(line, limit)
            pieces.append(head)
        pieces.append(line)
    chunks: list[list[Line]] = []
    current: list[Line] = []
    for line in pieces:
        while current and visible_units([*current, line]) > limit:
            cut = next((k for k in range(len(current) - 1, len(current) // 2, -1) if current[k].blank), None)
            if cut is None:
                chunks.append(current)
                current = []
            else:
                chunks.append(current[:cut])
                current = current[cut + 1 :]
        current.append(line)
    chunks.append(current)
    out = []
    for chunk in chunks:
        while chunk and chunk[0].blank:
            chunk = chunk[1:]
        while chunk and chunk[-1].blank:
            chunk = chunk[:-1]
        if chunk:
            out.append(chunk)
    return out


def answer_chunks(answer_markdown: str, limit: int) -> list[list[Line]]:
    """The final answer's lines, split into messages of at most `limit` visible units
    ([] for an empty answer)."""
    lines = list(markdown_lines(answer_markdown, "answer")) if answer_markdown else []
    return split_lines(lines, limit)


__all__ = ["answer_chunks", "split_lines"]
