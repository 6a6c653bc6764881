"""The gateway's transport: what uvicorn writes in one event-loop step goes out in one send."""

from __future__ import annotations

import asyncio
from typing import Any

from progresscast.http.server import _CoalescingTransport


class Recorder(asyncio.Transport):
    """A transport that records what reaches the socket."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[bytes] = []
        self.closed = False

    def write(self, data: Any) -> None:
        self.sent.append(bytes(data))

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True

    def get_write_buffer_size(self) -> int:
        return 0

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return ("127.0.0.1", 1) if name == "peername" else default


async def test_an_answers_head_and_body_go_out_in_one_send() -> None:
    raw = Recorder()
    transport = _CoalescingTransport(raw)
    transport.write(b"HTTP/1.1 200 OK\r\n\r\n")
    transport.write(b'{"ok":true}')
    assert raw.sent == [] and transport.get_write_buffer_size() == 30
    await asyncio.sleep(0)  # the end of this loop step
    assert raw.sent == [b'HTTP/1.1 200 OK\r\n\r\n{"ok":true}']
    transport.write(b"next")
    await asyncio.sleep(0)
    assert raw.sent[-1] == b"next"
    assert transport.get_extra_info("peername") == ("127.0.0.1", 1)  # the rest is the socket's


async def test_close_sends_what_is_pending_first_and_abort_drops_it() -> None:
    raw = Recorder()
    transport = _CoalescingTransport(raw)
    transport.write(b"last words")
    transport.close()
    assert raw.sent == [b"last words"] and raw.closed
    await asyncio.sleep(0)
    assert raw.sent == [b"last words"]  # nothing twice

    raw = Recorder()
    transport = _CoalescingTransport(raw)
    transport.write(b"dropped")
    raw.abort = lambda: setattr(raw, "closed", True)  # type: ignore[method-assign]
    transport.abort()
    await asyncio.sleep(0)
    assert raw.sent == [] and raw.closed
