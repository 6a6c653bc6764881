"""Commands packed by hiredis at once are the bytes redis-py packs; anything else is
packed (or refused) by redis-py itself; the store's single-server client packs so."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from redis.asyncio.connection import Connection, UnixDomainSocketConnection
from redis.exceptions import DataError

from progresscast.store.connections import connect
from progresscast.store.packing import DirectPacking, packing

PLAIN = Connection(decode_responses=True)
DIRECT = packing(Connection)(decode_responses=True)


class Color(enum.StrEnum):
    red = "red"


arguments = st.one_of(
    st.text(), st.binary(), st.integers(), st.floats(allow_nan=False), st.sampled_from(["é", "\u2028", "日本", ""])
)


@given(st.lists(arguments, max_size=20))
def test_any_plain_arguments_pack_as_redis_py_packs_them(args: list[Any]) -> None:
    for name in ("EVALSHA", b"SET", "CLIENT SETNAME", b"XGROUP CREATE"):
        assert DIRECT.pack_command(name, *args) == PLAIN.pack_command(name, *args)


@pytest.mark.parametrize("value", [0.1, 1e300, -0.0, math.inf, -math.inf, 2**70, -5, True, Color.red, memoryview(b"ab")])
def test_edge_values_pack_or_fail_as_redis_py_does(value: Any) -> None:
    def packed(connection: Connection) -> Any:
        try:
            return connection.pack_command("SET", "k", value)
        except DataError as exc:
            return f"DataError: {exc}"

    assert packed(DIRECT) == packed(PLAIN)


def test_another_encoding_is_left_to_redis_py() -> None:
    latin = packing(Connection)(decode_responses=True, encoding="latin-1")
    assert latin.pack_command("SET", "k", "é") == [b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n\xe9\r\n"]


async def test_the_store_client_packs_directly_and_round_trips(redis_url: str) -> None:
    redis = connect(redis_url)
    try:
        cls = redis.connection_pool.connection_class
        assert issubclass(cls, DirectPacking)
        assert issubclass(cls, UnixDomainSocketConnection)  # the class the URL chose (the embedded socket)
        await redis.set("k", "日本 é")
        assert await redis.get("k") == "日本 é"
        script = redis.register_script("return {KEYS[1], ARGV[1], ARGV[2]}")
        assert await script(keys=["k"], args=[2**40, 0.5]) == ["k", str(2**40), "0.5"]
        await redis.client_setname("packed")
        assert await redis.client_getname() == "packed"
    finally:
        await redis.aclose()
