"""What the MCP transports receive, looked at before the `mcp` SDK parses it.

JSON may carry `"\\ud800"`, which decodes to a lone surrogate. The SDK's parser refuses
such a message outright: over stdio it is dropped without an answer (the model waits
for ever), over HTTP it is a bare parse error that names nothing. So each message is
read here first: its lone surrogates become U+FFFD (the SDK then parses it), and a
tool call that carried one in its arguments has the field noted in its `_meta`, so the
tool answers a failed result naming the field and the rule, and stores nothing.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp_types as types
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..model.card import CardError, has_lone_surrogate, reject_lone_surrogates, replace_lone_surrogates

REFUSED_META_KEY = "progresscast/refusedField"
"""Set in a tool call's `_meta` here: the argument that held a lone surrogate."""


def _has_surrogate(data: Any) -> bool:
    try:
        reject_lone_surrogates(data)
    except CardError:
        return True
    return False


def _replaced(data: Any) -> Any:
    if isinstance(data, str):
        return replace_lone_surrogates(data)
    if isinstance(data, dict):
        return {replace_lone_surrogates(str(k)): _replaced(v) for k, v in data.items()}
    if isinstance(data, list):
        return [_replaced(v) for v in data]
    return data


def _note_refusal(message: Any) -> None:
    if not isinstance(message, dict) or message.get("method") != "tools/call":
        return
    params = message.get("params")
    if not isinstance(params, dict) or not isinstance(params.get("_meta", {}), dict):
        return
    try:
        reject_lone_surrogates(params.get("arguments"))
    except CardError as exc:
        params["_meta"] = {**params.get("_meta", {}), REFUSED_META_KEY: exc.field}


def guard_text(raw: str) -> str:
    """One JSON-RPC message (or batch) as text the SDK can parse (see the module doc)."""
    if "\\u" not in raw and not has_lone_surrogate(raw):
        return raw  # the common case: a lone surrogate needs an escape (or a decoded one)
    try:
        data = json.loads(raw)
    except (ValueError, RecursionError):
        return raw  # not JSON: the SDK answers its own parse error
    if not _has_surrogate(data):
        return raw
    for message in data if isinstance(data, list) else [data]:
        _note_refusal(message)
    return json.dumps(_replaced(data), ensure_ascii=False)


class StdinLines:
    """The stdio server's stdin: its lines (UTF-8, undecodable bytes replaced), each
    guarded. A daemon thread reads the descriptor itself, so a stop (SIGTERM, Ctrl-C)
    ends the wait for the next line at once and the process exits: a read that only
    the client closing stdin would end holds no one up (anyio's file wrapper reads in a
    worker thread the interpreter waits for at exit, and a daemon thread inside
    `sys.stdin`'s buffer would hold its lock as the interpreter shuts down)."""

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _lines(self) -> AsyncIterator[str]:
        loop = asyncio.get_running_loop()
        # A few lines ahead at most: the reader waits for room, as a pipe's writer does.
        queue: asyncio.Queue[str | None] = asyncio.Queue(maxsize=4)

        def hand(line: str | None) -> None:
            try:
                asyncio.run_coroutine_threadsafe(queue.put(line), loop).result()
            except RuntimeError:  # the loop is closed: the server is gone
                raise SystemExit from None

        def read() -> None:
            pending = bytearray()
            try:
                while chunk := os.read(self.fd, 1 << 16):
                    searched = len(pending)  # a long line is scanned once, not per chunk
                    pending += chunk
                    start = 0
                    while (end := pending.find(b"\n", searched)) >= 0:
                        hand(pending[start : end + 1].decode("utf-8", "replace"))
                        start = searched = end + 1
                    del pending[:start]
                if pending:
                    hand(pending.decode("utf-8", "replace"))
            except OSError:
                pass  # stdin is closed or unreadable: the end of the client's messages
            finally:
                hand(None)

        threading.Thread(target=read, name="mcp stdin", daemon=True).start()
        while (line := await queue.get()) is not None:
            yield guard_text(line)


class Owed:
    """The stdio server's streams, holding the end of stdin back until every request
    read has been answered. The SDK answers a request still running when its read side
    ends with "Connection closed" and drops its work: a script that pipes its requests
    and closes stdin lost its last write. A stop (SIGTERM, Ctrl-C) still ends at once."""

    def __init__(self) -> None:
        self._ids: set[Any] = set()
        self._answered = asyncio.Event()

    def streams(self, read: Any, write: Any) -> tuple[Any, Any]:
        """The transport's (read, write) streams, as the server is to use them."""
        return _Reading(read, self), _Writing(write, self)

    def read(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCRequest):
            self._ids.add(message.id)
            self._answered.clear()

    def sent(self, item: Any) -> None:
        message = getattr(item, "message", None)
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
            self._ids.discard(message.id)
            if not self._ids:
                self._answered.set()

    async def settled(self) -> None:
        if self._ids:
            await self._answered.wait()


class _Stream:
    """One of the transport's streams, passed through (`last_context` included, which
    the SDK may look for)."""

    def __init__(self, inner: Any, owed: Owed) -> None:
        self._inner = inner
        self._owed = owed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> Any:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        return await self._inner.__aexit__(*exc)  # type: ignore[no-any-return]


class _Reading(_Stream):
    async def receive(self) -> Any:
        try:
            item = await self._inner.receive()
        except anyio.EndOfStream:
            await self._owed.settled()
            raise
        self._owed.read(item)
        return item

    def __aiter__(self) -> _Reading:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None


class _Writing(_Stream):
    async def send(self, item: Any, /) -> None:
        await self._inner.send(item)
        self._owed.sent(item)


class GuardedBodies:
    """ASGI middleware for the streamable HTTP app: each POSTed body read with the
    gateway's reader (at most `limit` bytes; past it the reader's ApiError, 413, is
    raised to the middleware in front before the SDK sees any of it), then guarded."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        from ..http.body import read_asgi_body

        body = await read_asgi_body(scope, receive, self.limit)  # raises ApiError, 413 past the limit
        try:
            guarded = guard_text(body.decode("utf-8")).encode("utf-8")
        except UnicodeDecodeError:
            guarded = body  # not UTF-8: the SDK answers its own parse error
        await self.app(scope, _replay([{"type": "http.request", "body": guarded, "more_body": False}], receive), send)


def _replay(messages: list[Message], then: Receive) -> Receive:
    """`messages` first, then the connection's own (a streamed answer listens for the
    client going away)."""
    pending = list(messages)

    async def receive() -> Message:
        if pending:
            return pending.pop(0)
        return await then()

    return receive


__all__ = ["REFUSED_META_KEY", "GuardedBodies", "StdinLines", "guard_text"]
