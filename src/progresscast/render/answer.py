"""The one answer splitter: a run's final answer as messages of at most `limit` visible
units, so the same answer reads the same in every channel."""

from __future__ import annotations

from .ir import Line, split_line, visible_units
from .markdown import markdown_lines


def answer_lines(answer_markdown: str) -> list[Line]:
    """The answer's Markdown as lines ([] for an empty answer)."""
    return list(markdown_lines(answer_markdown, "answer")) if answer_markdown else []


def split_answer(lines: list[Line], limit: int) -> list[list[Line]]:
    """Lines split into messages of at most `limit` visible units. A message breaks at a
    blank line in its second half where there is one (a paragraph stays whole rather
    than a message ending half empty), else where the next line does not fit; a line
    longer than a message is split. No message starts or ends with a blank line."""
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


__all__ = ["answer_lines", "split_answer"]
