"""The one answer splitter: a long final answer as several messages, for every channel.

A run's final answer can be longer than one message of a channel allows. It is split
into runs of whole lines of at most `limit` visible units, preferring to break at a
blank line (a paragraph break) in the second half of a message, so a paragraph is
not cut in two when it need not be; a line longer than a message is split where it
must. Blank lines at either end of a part are dropped. Each channel then serialises
its parts and, where its markup makes a part longer than the channel takes, splits
that part again with a smaller limit.
"""

from __future__ import annotations

from collections.abc import Sequence

from .ir import Line, split_line, visible_units


def split_lines(lines: Sequence[Line], limit: int) -> list[list[Line]]:
    """`lines` as parts of at most `limit` visible units each (newlines counted)."""
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


__all__ = ["split_lines"]
