"""A minimal keep-alive HTTP/1.1 client for the benchmarks.

httpx costs ≈ 0.5 ms of client CPU per request, as much as the gateway itself; this
client writes one request and reads one `Content-Length` answer, so what is measured
is the server. It speaks only what the gateway answers (no chunking, no redirects).
"""

from __future__ import annotations

import asyncio
import socket


class HTTPConnection:
    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        sock = self._writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def post(self, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
        if self._writer is None:
            await self.connect()
        assert self._reader is not None and self._writer is not None
        head = [f"POST {path} HTTP/1.1", f"Host: {self.host}:{self.port}", f"Content-Length: {len(body)}",
                "Content-Type: application/json"]
        head += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self._writer.write(("\r\n".join(head) + "\r\n\r\n").encode() + body)
        status_line = await self._reader.readline()
        if not status_line:
            await self.close()
            raise ConnectionError("the server closed the connection")
        status = int(status_line.split(b" ", 2)[1])
        length = 0
        close = False
        while True:
            line = await self._reader.readline()
            if line in (b"\r\n", b""):
                break
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"connection" and value.strip().lower() == b"close":
                close = True
        data = await self._reader.readexactly(length) if length else b""
        if close:
            await self.close()
        return status, data

    async def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            try:
                await self._writer.wait_closed()
            except OSError:
                pass
        self._reader = self._writer = None
