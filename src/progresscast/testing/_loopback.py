"""The loopback server an emulator runs on: a Starlette app served by uvicorn on
127.0.0.1 (a free port, kept across stop and start), and `wait_for` on what it records.

An emulator subclasses `LoopbackServer`, builds its `app`, and calls `_notify()`
whenever something a test may wait for changed (a call arrived, a message changed).
Stopping and starting again emulates the service being unreachable for a while:
the emulator's state is kept, and so is the port.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import socket
from collections.abc import Callable
from typing import Any, Self

import uvicorn
from starlette.types import ASGIApp

from ..http.server import GuestServer


class LoopbackServer:
    """Serve `app` on loopback; use as ``async with Emulator(...) as emu``."""

    name = "emulator"
    """For the error raised when the server stops while starting."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._port = 0
        self._server: GuestServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._changed = asyncio.Event()
        self.closing = asyncio.Event()
        """Set while stopping: held answers end at once."""

    async def start(self) -> Self:
        """Serve on a free port — or, after :meth:`stop`, on the same one again."""
        self.closing.clear()
        # IPPROTO_TCP, so that asyncio sets TCP_NODELAY on accepted connections (no
        # delayed-ACK stall of ≈ 40 ms per answer).
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self._port))
        self._port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app, lifespan="off", log_config=None, log_level="warning", access_log=False,
            timeout_graceful_shutdown=1,
        )
        self._server = GuestServer(config)
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        while not self._server.started:
            if self._task.done():
                self._task.result()  # raises what stopped the server
                raise RuntimeError(f"the {self.name} stopped while starting")
            await asyncio.sleep(0.01)
        return self

    async def stop(self) -> None:
        self.closing.set()
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = self._task = None

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
        """Wait until ``predicate()`` is truthy and return its value; TimeoutError after ``timeout``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = predicate()
            if inspect.isawaitable(value):
                value = await value
            if value:
                return value
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise TimeoutError(f"condition still false after {timeout} s")
            # Woken by every change; the short cap also lets time-based predicates progress.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout=min(remaining, 0.05))

    async def hold(self, seconds: float) -> None:
        """Hold an answer (a timeout the client sees), ended early by :meth:`stop`."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.closing.wait(), timeout=seconds)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


async def end_task(task: asyncio.Task[None] | None) -> None:
    """Cancel an emulator's background task (a sender) and wait until it has ended."""
    if task is None:
        return
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


__all__ = ["LoopbackServer", "end_task"]
