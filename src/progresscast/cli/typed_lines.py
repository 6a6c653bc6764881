"""The emulators' consoles: lines typed on stdin handed over one by one, whatever stdin is
(a terminal, a pipe, a file, /dev/null), while what the chat shows is printed."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TextIO

from ..stdin import stdin_chunks

Typed = Callable[[str], Awaitable[None]]


MAX_LINE_BYTES = 16_384
"""The longest line the console sends (4,096 characters of up to four bytes: a Telegram
message's own limit); a longer one, a paste gone wrong, is said and dropped whole."""


async def serve_typing(printer: Callable[[], Coroutine[Any, Any, None]], typed: Typed, out: TextIO) -> None:
    """Print what the chat shows while the lines typed on stdin go to `typed`; keep
    serving once stdin closes, until Ctrl-C."""
    shown = asyncio.create_task(printer())
    try:
        await read_lines(typed, out)
        print("(input closed: still serving until Ctrl-C)", file=out, flush=True)
        await asyncio.Event().wait()
    finally:
        shown.cancel()


async def read_lines(typed: Typed, out: TextIO) -> None:
    """Hand every line typed on stdin to `typed`, until stdin closes; what is read is
    bounded by MAX_LINE_BYTES, whatever stdin holds."""
    lines = Lines(out)
    async for chunk in stdin_chunks():
        for line in lines.feed(chunk):
            await _typed(typed, line)
    for line in lines.end():
        await _typed(typed, line)


class Lines:
    """Bytes in, whole lines out; a line longer than MAX_LINE_BYTES is said on `out` and
    dropped, up to its end."""

    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.held = b""
        self.dropping = False
        """Within a line already found too long: what comes up to its end is dropped too."""

    def feed(self, chunk: bytes) -> list[str]:
        *whole, self.held = (self.held + chunk).split(b"\n")
        lines = [line for line in (self._kept(raw) for raw in whole) if line is not None]
        if len(self.held) > MAX_LINE_BYTES:
            self._refuse()
            self.held = b""
        return lines

    def end(self) -> list[str]:
        last = self._kept(self.held) if self.held else None
        self.held = b""
        return [] if last is None else [last]

    def _kept(self, raw: bytes) -> str | None:
        if self.dropping:  # the rest of a line already refused
            self.dropping = False
            return None
        if len(raw) > MAX_LINE_BYTES:
            self._refuse()
            self.dropping = False
            return None
        return raw.decode(errors="replace")

    def _refuse(self) -> None:
        if not self.dropping:
            print(f"  (a line of more than {MAX_LINE_BYTES:,} bytes was not sent)", file=self.out, flush=True)
        self.dropping = True


async def _typed(typed: Typed, line: str) -> None:
    text = line.strip()
    if text:
        await typed(text)
