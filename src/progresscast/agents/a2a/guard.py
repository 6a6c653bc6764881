"""What a followed agent cannot make the follower do: go elsewhere, wait forever,
or read without end.

- **Its card names where to go.** The interfaces a card offers (JSON-RPC, HTTP+JSON)
  must be on the configured URL's origin (scheme, host, port), unless the agent's
  `allowedHosts` lists their host: a card cannot send the follower to another host.
- **Every read has a deadline.** Connecting, and each read on the connection, time
  out (a stream past its idle time is resubscribed, `follow.py`), and a whole call
  (ListTasks, GetTask) has one too.
- **Every answer is bounded.** A response body past `MAX_BODY` bytes, or one event of
  a stream past `MAX_EVENT`, ends the call as a network error would (and the call is
  tried again with backoff); nothing more of it is buffered.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from urllib.parse import urlsplit

import httpx
from a2a.types import a2a_pb2 as pb

MAX_BODY = 4 * 1024 * 1024
"""Bytes of one answer (an agent card, a page of ListTasks, GetTask)."""
MAX_EVENT = 1024 * 1024
"""Bytes of one event of a stream (streams themselves may last for hours)."""
CONNECT_TIMEOUT = 10.0
"""Seconds to connect to an agent."""
FOLLOWED_BINDINGS = ("JSONRPC", "HTTP+JSON")

_PORTS = {"http": 80, "https": 443}


class CardRefused(Exception):
    """The agent card names an interface the follower may not use (one line for the user)."""


def origin(url: str) -> tuple[str, str, int | None]:
    """(scheme, host, port) of `url`, the port filled in for http and https."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:  # a port that is not a number: no origin matches it
        return scheme, "", None
    return scheme, (parts.hostname or "").lower(), port if port is not None else _PORTS.get(scheme)


def _allowed(url: str, hosts: Sequence[str]) -> bool:
    """Whether `url`'s host is listed (`host`, any port; or `host:port`)."""
    _, host, port = origin(url)
    for entry in hosts:
        entry = entry.strip().lower()
        if entry == host or (port is not None and entry == f"{host}:{port}"):
            return True
    return False


def check_card(card: pb.AgentCard, url: str, allowed_hosts: Sequence[str] = ()) -> None:
    """Raise CardRefused when an interface the follower would use is off `url`'s origin
    and its host is not in `allowed_hosts`."""
    home = origin(url)
    for interface in card.supported_interfaces:
        if interface.protocol_binding not in FOLLOWED_BINDINGS:
            continue
        if origin(interface.url) != home and not _allowed(interface.url, allowed_hosts):
            raise CardRefused(
                f"its card names the interface {interface.url!r}, which is not on {url}; "
                "add its host to allowedHosts of this [[a2a.agents]] entry to follow it there"
            )


class BodyTooLarge(httpx.TransportError):
    """An answer (or one event of a stream) over its limit: dropped like a broken connection."""


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, limit: int, *, per_event: bool, request: httpx.Request) -> None:
        self.inner = inner
        self.limit = limit
        self.per_event = per_event
        self.request = request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0  # bytes of the answer, or of the event not yet ended
        tail = b""  # the end of the last chunk, for a blank line split between two
        async for chunk in self.inner:
            if self.per_event:
                joined = tail + chunk
                ends = [i for i in (joined.find(b"\n\n"), joined.find(b"\r\n\r\n")) if i >= 0]
                if ends:  # the event read so far ends in this chunk; the next one begins
                    self._check(seen + max(min(ends) - len(tail), 0))
                    seen = len(joined) - max(joined.rfind(b"\n\n"), joined.rfind(b"\r\n\r\n"))
                else:
                    seen += len(chunk)
                tail = joined[-3:]
            else:
                seen += len(chunk)
            self._check(seen)
            yield chunk

    def _check(self, seen: int) -> None:
        if seen > self.limit:
            what = "one event of the stream" if self.per_event else "the answer"
            raise BodyTooLarge(f"{what} is over {self.limit} bytes", request=self.request)

    async def aclose(self) -> None:
        await self.inner.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    """httpx's transport, every answer bounded (see the module)."""

    def __init__(self, *, max_body: int = MAX_BODY, max_event: int = MAX_EVENT) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.max_body = max_body
        self.max_event = max_event

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            await response.aclose()
            raise BodyTooLarge(f"the answer is {declared} bytes, over {self.max_body}", request=request)
        per_event = "text/event-stream" in response.headers.get("content-type", "")
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _CappedStream(
            response.stream, self.max_event if per_event else self.max_body, per_event=per_event, request=request
        )
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


__all__ = ["CONNECT_TIMEOUT", "MAX_BODY", "MAX_EVENT", "BodyTooLarge", "CappedTransport", "CardRefused", "check_card"]
