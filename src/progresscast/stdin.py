"""stdin's bytes as they come, whatever stdin is: a terminal, a pipe, a socket, a file,
/dev/null. What the emulators' consoles and the ACP proxy read their input with."""

from __future__ import annotations

import asyncio
import os
import stat
import sys
from collections.abc import AsyncIterator

CHUNK = 65_536


async def stdin_chunks(chunk: int = CHUNK) -> AsyncIterator[bytes]:
    """stdin's bytes as they come, until it ends. The event loop watches a terminal, a
    pipe or a socket; a regular file or /dev/null it cannot (epoll refuses them, and the
    refusal comes later, as a traceback from a callback), and they never block: read as
    they are, letting the loop run between reads."""
    try:
        fd = sys.stdin.fileno()
        mode = os.fstat(fd).st_mode
    except (OSError, ValueError):  # no stdin at all: it has ended
        return
    if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(fd)):
        while data := os.read(fd, chunk):
            yield data
            await asyncio.sleep(0)
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=chunk)
    # A copy of the descriptor: the transport closes what it was given when it ends.
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(os.dup(fd), "rb"))
    while data := await reader.read(chunk):
        yield data


__all__ = ["CHUNK", "stdin_chunks"]
