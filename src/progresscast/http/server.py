"""A listening socket bounded in time and number, for every server of ours: its address,
uvicorn's configuration with our limits (a head and a body deadline, an idle timeout,
a cap on connections), quiet ends for clients that leave mid-request, and uvicorn as a
guest of an event loop whose owner handles the process's signals."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import socket
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, cast

import uvicorn
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..config.gateway import GatewaySettings
from ..failure_log import FailureLog

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


REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"content-length: 25\r\nconnection: close\r\n\r\ntoo many open connections"
)
"""The answer to a connection past `gateway.maxConnections`, written before it is closed."""

_dropped = FailureLog(log)
"""One line a minute per kind of connection dropped for a limit: a flood is not a log flood."""


class _Config(uvicorn.Config):
    """uvicorn's settings plus the limits each of our connections keeps."""

    limits: GatewaySettings


class _Protocol(HttpToolsProtocol):
    """uvicorn's HTTP protocol, bounded in time and number. uvicorn closes a connection
    idle after an answer (`timeout_keep_alive`), but it gives a request's head and body
    all the time in the world and counts connections only once a head is complete
    (`limit_concurrency`): a connection that never finishes its head is never refused.
    So: a deadline for the head (from the connection's start, or from its first byte
    after an answer), one for the whole body, and a cap checked as a connection comes in."""

    def __init__(self, config: uvicorn.Config, *args: Any, **kwargs: Any) -> None:
        super().__init__(config, *args, **kwargs)
        self.limits = cast("_Config", config).limits
        self._deadline: asyncio.TimerHandle | None = None
        self._awaiting_head = True
        self._refused = False

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if len(self.connections) >= self.limits.maxConnections:
            self._refused = True
            cast("asyncio.Transport", transport).write(REFUSED)
            transport.close()
            _dropped.warning(
                "refused", "refused a connection: %d are open (gateway.maxConnections)", len(self.connections)
            )
            return
        # (uvloop's transports are not asyncio.Transport subclasses: no isinstance here.)
        super().connection_made(_CoalescingTransport(cast("asyncio.Transport", transport)))  # type: ignore[arg-type]
        self._arm(self.limits.headerTimeout, "head")

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        if not self._refused:
            super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        if self._awaiting_head and self._deadline is None:  # the first byte after an answer
            self._arm(self.limits.headerTimeout, "head")
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._arm(self.limits.bodyTimeout, "body")
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        # Before uvicorn's, which returns early for a body it discards (an early 413).
        self._disarm()
        self._awaiting_head = True
        super().on_message_complete()

    def _arm(self, seconds: float, part: str) -> None:
        self._disarm()
        self._deadline = self.loop.call_later(seconds, self._expired, part)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def _expired(self, part: str) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        # A route waiting for the rest of a body is told the client went away.
        self.transport.close()
        setting = "headerTimeout" if part == "head" else "bodyTimeout"
        seconds = self.limits.headerTimeout if part == "head" else self.limits.bodyTimeout
        _dropped.log_at(
            logging.INFO, part, "closed a connection that sent no whole request %s within %g s (gateway.%s)",
            part, seconds, setting,
        )


class _QuietDisconnects:
    """A client that goes away in the middle of its body (or is cut off by the body's
    deadline) ends its request quietly: there is no one left to answer, and uvicorn
    would log the route's ClientDisconnect as a traceback."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await self.app(scope, receive, send)
        except ClientDisconnect:
            log.debug("a client went away before its request's body was read: %r", scope.get("path"))


def limited_config(app: ASGIApp, limits: GatewaySettings, **options: Any) -> uvicorn.Config:
    """uvicorn's settings for every server the project runs: our protocol with the
    connection limits of `limits`, quiet disconnects, no access log."""
    config = _Config(
        _QuietDisconnects(app),
        log_level="warning",
        # The access log would record `?token=…` of page links; it stays off.
        access_log=False,
        http=_Protocol,
        ws="none",  # no route takes a WebSocket: an upgrade is not handed to another protocol
        # (uvicorn's hint says int; the timer takes any number of seconds.)
        timeout_keep_alive=cast("int", limits.idleTimeout),
        **options,
    )
    config.limits = limits
    return config


class GuestServer(uvicorn.Server):
    """uvicorn in an event loop whose owner handles the process's signals: `serve` and
    `demo` (SIGTERM and Ctrl-C), a test's emulator (pytest). uvicorn's own capture takes
    SIGTERM and SIGINT while it runs and raises them again once it has stopped: a second
    SIGTERM to `serve` in the middle of the shutdown the first one began."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_until_cancelled(
    config: uvicorn.Config,
    sock: socket.socket,
    *,
    started: asyncio.Event | None = None,
    closing: Callable[[], Awaitable[None]] | None = None,
) -> None:
    """Serve under uvicorn (a `GuestServer`) on a bound socket until cancelled; `started`
    is set once it accepts connections. Cancelled: `closing` ends what never ends by
    itself (live event streams), then uvicorn shuts down cleanly, then the cancel goes on."""
    server = GuestServer(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    try:
        if started is not None:
            while not server.started and not task.done():
                await asyncio.sleep(0.01)
            started.set()
        await asyncio.shield(task)
    except asyncio.CancelledError:
        if closing is not None:
            await closing()
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        raise
    finally:
        sock.close()


def address(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"
