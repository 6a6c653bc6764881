"""What every `progresscast emulator …` command does alike: run the emulator on its
port (a port in use is a mistake of the command line)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol

from ..config.errors import ConfigError


class Emulator(Protocol):
    def start(self) -> Awaitable[object]: ...

    def stop(self) -> Awaitable[object]: ...


@contextlib.asynccontextmanager
async def listening(emulator: Emulator, port: int) -> AsyncIterator[None]:
    """The emulator running for the block, stopped on the way out."""
    try:
        await emulator.start()
    except OSError as exc:
        raise ConfigError(f"--port: cannot listen on 127.0.0.1:{port} ({exc.strerror})") from None
    try:
        yield
    finally:
        await emulator.stop()


__all__ = ["Emulator", "listening"]
