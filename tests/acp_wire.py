"""A transport for the ACP SDK's connections that records every byte it sends and
receives: the tests compare what the agent wrote with what the editor read.

The SDK frames messages as it always does (one JSON object per line, its own
serialisation); this only keeps a copy of each line on its way.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

LIMIT = 50 * 1024 * 1024


class Recorded:
    """An `acp` Transport over a reader and a write function, keeping both directions' bytes."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        write: Callable[[bytes], Awaitable[None]],
        record: Callable[[str, bytes], None],
    ) -> None:
        self.reader = reader
        self.write = write
        self.record = record

    async def send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, separators=(",", ":")) + "\n").encode("utf-8")
        self.record("out", data)
        await self.write(data)

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self.reader.readline()
            if not line:
                return None
            self.record("in", line)
            if line.strip():
                message: dict[str, Any] = json.loads(line)
                return message

    async def close(self) -> None:
        return None
