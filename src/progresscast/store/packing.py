"""Commands packed into the Redis protocol by hiredis at once.

redis-py hands each command's arguments to hiredis's `pack_command` only after looking
at every one of them in Python (a memoryview? bytes? a bool? an int? then encoding):
≈ 12 µs for a draft's read, a script call of 16 arguments, against ≈ 2 µs for hiredis
alone, and a first draft sends about 15 commands. hiredis packs `str` (UTF-8, strict),
`bytes`, `int` and `float` itself, byte for byte as redis-py does (tests/test_packing.py
compares them); a command with any other argument (a bool, None, a memoryview, an
enum) is left to redis-py, with its checks and its errors. Used by the single-server
client only when the connection encodes as redis-py's default (UTF-8, strict).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from redis.asyncio.connection import AbstractConnection
from redis.utils import HIREDIS_AVAILABLE

pack_command: Callable[[tuple[Any, ...]], bytes] | None = None
if HIREDIS_AVAILABLE:  # else redis-py packs in Python: nothing here to skip
    from hiredis import pack_command

_classes: dict[type[AbstractConnection], type[AbstractConnection]] = {}


class DirectPacking:
    """Mixed into a redis-py asyncio connection class (before it)."""

    def pack_command(self, *args: Any) -> list[bytes]:
        for arg in args:
            kind = type(arg)
            if kind is not str and kind is not bytes and kind is not int and kind is not float:
                return super().pack_command(*args)  # type: ignore[misc, no-any-return]
        encoder = self.encoder  # type: ignore[attr-defined]
        if encoder.encoding != "utf-8" or encoder.encoding_errors != "strict":
            return super().pack_command(*args)  # type: ignore[misc, no-any-return]
        head = args[0]
        # A command name with its subcommand ("CLIENT SETNAME") goes as two arguments.
        if (type(head) is str and " " in head) or (type(head) is bytes and b" " in head):
            args = (*head.split(), *args[1:])
        assert pack_command is not None  # (no class mixes this in without hiredis)
        return [pack_command(args)]


def packing(connection_class: type[AbstractConnection]) -> type[AbstractConnection]:
    """`connection_class` packing with hiredis at once (itself without hiredis)."""
    if pack_command is None:
        return connection_class
    if connection_class not in _classes:  # one class per base: pools of one kind share it
        _classes[connection_class] = type(f"Direct{connection_class.__name__}", (DirectPacking, connection_class), {})
    return _classes[connection_class]


__all__ = ["DirectPacking", "packing"]
