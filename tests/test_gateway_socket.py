"""The gateway's listening socket: accepted connections get TCP_NODELAY.

Without it an answer's last segment waits for the client's delayed ACK, and every
request on one connection takes ≈ 40 ms. asyncio sets TCP_NODELAY only on sockets
whose protocol says TCP, so this is a property of how `bind` creates the socket.
"""

from __future__ import annotations

import asyncio
import socket

import pytest

from progresscast.http.server import bind


@pytest.mark.parametrize("listen", ["127.0.0.1:0", "[::1]:0"])
async def test_accepted_connections_have_tcp_nodelay(listen: str) -> None:
    try:
        sock = bind(listen)
    except OSError as exc:  # no IPv6 on this machine
        pytest.skip(f"cannot bind {listen}: {exc}")
    seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer: socket.socket = writer.get_extra_info("socket")
        seen.set_result(peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
        writer.close()

    # The same call uvicorn makes with the socket it is given.
    server = await asyncio.start_server(accepted, sock=sock)
    host, port = sock.getsockname()[:2]
    try:
        _, writer = await asyncio.open_connection(host, port)
        assert await asyncio.wait_for(seen, 5) != 0
        writer.close()
    finally:
        server.close()
        await server.wait_closed()
