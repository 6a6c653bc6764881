"""What every `progresscast emulator …` command does alike: run the emulator on its
port (a port in use is a mistake of the command line), and print the config section
that points an adapter at it."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable
from typing import Protocol, TextIO

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


def print_config(out: TextIO, platform: str, then: str, values: dict[str, str]) -> None:
    """`[channels.<platform>]` with `values` (strings), and how to go on (`then`)."""
    print(f"Point the {platform.capitalize()} adapter at it (then run {then}):", file=out)
    print(f"  [channels.{platform}]", file=out)
    for name, value in values.items():
        print(f'  {name} = "{value}"', file=out)


__all__ = ["Emulator", "listening", "print_config"]
