"""Running the app under uvicorn until cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Sequence
from typing import Any, cast

import uvicorn
from starlette.applications import Starlette
from starlette.routing import BaseRoute
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..config.settings import Settings
from .app import create_app

log = logging.getLogger("progresscast.gateway")


def bind(listen: str, *, fallback: bool = False) -> socket.socket:
    """A listening socket for `host:port`; with `fallback`, a free port when it is taken."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP explicitly: asyncio sets TCP_NODELAY only on sockets whose `proto` says
    # TCP, and accepted connections inherit it. With proto 0, every answer's last segment
    # waits for the client's delayed ACK (≈ 40 ms per request on one connection).
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, int(port)))
    except OSError as exc:
        if not (fallback and exc.errno == errno.EADDRINUSE):
            sock.close()
            raise
        sock.bind((host, 0))
    sock.listen(128)
    sock.setblocking(False)
    return sock


class _CoalescingTransport:
    """A transport whose writes within one event-loop step go out in one `send`: uvicorn
    writes an answer's head and its body separately, two system calls (and two wake-ups
    of the client) per request otherwise."""

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport
        self._pending: list[bytes] = []

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush)
        self._pending.append(bytes(data))

    def writelines(self, chunks: Any) -> None:
        for chunk in chunks:
            self.write(chunk)

    def _flush(self) -> None:
        if self._pending:
            data = b"".join(self._pending)
            self._pending.clear()
            if not self._transport.is_closing():
                self._transport.write(data)

    def get_write_buffer_size(self) -> int:
        return self._transport.get_write_buffer_size() + sum(map(len, self._pending))

    def close(self) -> None:
        self._flush()
        self._transport.close()

    def write_eof(self) -> None:
        self._flush()
        self._transport.write_eof()

    def abort(self) -> None:
        self._pending.clear()
        self._transport.abort()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class _Protocol(HttpToolsProtocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # (uvloop's transports are not asyncio.Transport subclasses: no isinstance here.)
        super().connection_made(_CoalescingTransport(cast("asyncio.Transport", transport)))  # type: ignore[arg-type]


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


async def run_gateway(
    settings: Settings,
    redis: Any,
    *,
    readers: Any | None = None,
    sock: socket.socket | None = None,
    started: asyncio.Event | None = None,
    routes: Sequence[BaseRoute] = (),
) -> None:
    """Serve the gateway on `settings.gateway.listen` (or `sock`) until cancelled;
    `routes`: more routes, from the channel adapters."""
    sock = sock or bind(settings.gateway.listen)
    log.info("gateway and web page on %s", address(sock))
    await serve_app(create_app(settings, redis, readers=readers, routes=routes), sock, started=started)


async def serve_app(app: Starlette, sock: socket.socket, *, started: asyncio.Event | None = None) -> None:
    """Run `app` under uvicorn on a bound socket until cancelled; `started` is set once
    it accepts connections. (Tests and the demo use this to serve on a free port.)"""
    config = uvicorn.Config(
        app,
        log_level="warning",
        # The access log would record `?token=…` of page links; it stays off.
        access_log=False,
        lifespan="on",
        # Live event streams never end by themselves: give them a moment, then close.
        timeout_graceful_shutdown=2,
        # The app reads the proxy's headers itself (gateway.trustedProxies), so that
        # every way of serving it (and the tests) does the same.
        proxy_headers=False,
        http=_Protocol,
    )
    server = uvicorn.Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        if started is not None:
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            started.set()
        await asyncio.shield(task)
    except asyncio.CancelledError:
        # Cancelled from outside: end open event streams, then shut uvicorn down cleanly.
        await app.state.gateway.hub.close()
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise
    finally:
        sock.close()
