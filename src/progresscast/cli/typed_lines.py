"""The emulators' consoles: lines typed on stdin handed over one by one, whatever stdin is
(a terminal, a pipe, a file, /dev/null), while what the chat shows is printed."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TextIO

Typed = Callable[[str], Awaitable[None]]


async def serve_typing(printer: Callable[[], Coroutine[Any, Any, None]], typed: Typed, out: TextIO) -> None:
    """Print what the chat shows while the lines typed on stdin go to `typed`; keep
    serving once stdin closes, until Ctrl-C."""
    shown = asyncio.create_task(printer())
    try:
        await read_lines(typed)
        print("(input closed: still serving until Ctrl-C)", file=out, flush=True)
        await asyncio.Event().wait()
    finally:
        shown.cancel()


async def read_lines(typed: Typed) -> None:
    """Hand every line typed on stdin to `typed`, until stdin closes."""
    loop = asyncio.get_running_loop()
    mode = os.fstat(sys.stdin.fileno()).st_mode
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or sys.stdin.isatty()):
        # A regular file or /dev/null cannot be watched by the event loop (epoll refuses
        # them); it never blocks, so it is read as it is.
        for line in sys.stdin:
            await _typed(typed, line)
        return
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    while line := await reader.readline():
        await _typed(typed, line.decode(errors="replace"))


async def _typed(typed: Typed, line: str) -> None:
    text = line.strip()
    if text:
        await typed(text)
