"""python-telegram-bot's HTTP transport on aiohttp, checking the bot's lease first.

PTB's own transport (`HTTPXRequest`: httpx → httpcore → anyio) was about half of the
adapter's CPU per Bot API call; aiohttp (C HTTP parser, no anyio layer) does the same
work for much less. The contract is PTB's `BaseRequest.do_request`: (status, body)
back, the failures raised as PTB's `TimedOut` / `NetworkError`, so PTB maps the
status codes (429 → `RetryAfter`, 400 → `BadRequest` …) and `client.classify` reads them.

Timeouts as PTB's: `pool` bounds the wait for one of `connection_pool_size` connections
(`TimedOut` "Pool timeout", never sent), `connect` the new connection (never sent),
`read` each wait for the reply. aiohttp has no write timeout of its own and its read
clock starts before the request is written: a JSON body is written at once, so the read
timeout is the read timeout; an upload's (files) is `read_timeout + write_timeout`.
"""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from telegram._utils.defaultvalue import DefaultValue  # what PTB's own transports test for
from telegram._utils.types import UploadFileDict
from telegram.error import NetworkError, TimedOut
from telegram.request import BaseRequest, RequestData
from yarl import URL

from ..store.lease import Fence

NEVER_SENT = (aiohttp.ClientConnectorError, aiohttp.ConnectionTimeoutError)
"""aiohttp's failures after which the request surely never left this process."""

_JSON = {"Content-Type": "application/json"}
_POOL_TIMEOUT = "Pool timeout: All connections in the connection pool are occupied. Request was *not* sent to Telegram."


class LeaseLost(NetworkError):
    """A Bot API call not made: the bot's lease may have passed to another process."""


def _lost() -> LeaseLost:
    return LeaseLost("not called: the bot's lease may have passed to another process")


def _seconds(value: object, default: float | None) -> float | None:
    return default if isinstance(value, DefaultValue) else value  # type: ignore[return-value]


def _body(request_data: RequestData | None, files: UploadFileDict | None) -> tuple[Any, dict[str, str] | None]:
    """A JSON body (the Bot API takes one; a form would urlencode every character of a
    long HTML text in Python, a tenth of the CPU per call), or a multipart form with files."""
    if request_data is None:
        return None, None
    if not files:
        return json.dumps(request_data.parameters, separators=(",", ":")).encode(), _JSON
    form = aiohttp.FormData(request_data.json_parameters)
    for name, (filename, content, mimetype) in files.items():
        form.add_field(name, content, filename=filename, content_type=mimetype)
    return form, None


@functools.lru_cache(maxsize=64)
def _timeout(connect: float | None, read: float | None) -> aiohttp.ClientTimeout:
    """One (immutable) timeout per pair of values, not one per call."""
    return aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect, sock_read=read)


class FencedRequest(BaseRequest):
    """The Bot API transport of the adapter. With a `fence`, the bot's lease is checked
    before every request (getUpdates included), and again once the request holds its
    connection: a request may wait for a free one for a while, and a pause (SIGSTOP)
    may fall in that wait. A holder that may have lost the lease calls nothing."""

    def __init__(
        self,
        fence: Fence | None = None,
        *,
        connection_pool_size: int = 256,
        read_timeout: float | None = 5.0,
        write_timeout: float | None = 5.0,
        connect_timeout: float | None = 5.0,
        pool_timeout: float | None = 1.0,
        media_write_timeout: float | None = 20.0,
    ) -> None:
        self.fence = fence
        self.pool_size = connection_pool_size
        self._read = read_timeout
        del write_timeout  # PTB's parameter; a JSON body is written at once (see the module doc)
        self._connect = connect_timeout
        self._pool = pool_timeout
        self._media_write = media_write_timeout
        # Our own pool gate: aiohttp's wait for a connection shares the connect timeout.
        self._slots = asyncio.Semaphore(connection_pool_size)
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[str, tuple[URL | None, aiohttp.BasicAuth | None]] = {}

    @property
    def read_timeout(self) -> float | None:
        return self._read

    async def initialize(self) -> None:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(limit=self.pool_size, ttl_dns_cache=300)
            # No cookies, as PTB's transport. Its proxies from the environment (HTTPS_PROXY …)
            # are looked up once per server (`_proxy_for`), not on every call as `trust_env` would.
            self._session = aiohttp.ClientSession(
                connector=connector, cookie_jar=aiohttp.DummyCookieJar(), headers={"User-Agent": self.USER_AGENT}
            )

    async def shutdown(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    def _proxy_for(self, url: str) -> tuple[URL | None, aiohttp.BasicAuth | None]:
        origin = url.split("/", 3)[:3]
        key = "/".join(origin)
        if key not in self._proxies:
            try:
                self._proxies[key] = get_env_proxy_for_url(URL(key))
            except LookupError:
                self._proxies[key] = (None, None)
        return self._proxies[key]

    def _check_fence(self) -> None:
        if self.fence is not None and not self.fence.is_open():
            raise _lost()

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: object = BaseRequest.DEFAULT_NONE,
        write_timeout: object = BaseRequest.DEFAULT_NONE,
        connect_timeout: object = BaseRequest.DEFAULT_NONE,
        pool_timeout: object = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        self._check_fence()
        session = self._session
        if session is None or session.closed:
            raise RuntimeError("This FencedRequest is not initialized!")
        files = request_data.multipart_data if request_data else None
        read = _seconds(read_timeout, self._read)
        # A JSON body goes into the socket's buffer at once: the read timeout alone is the
        # wait for the reply. An upload may take a while to write: its write timeout is added.
        write = _seconds(write_timeout, self._media_write) if files else 0.0
        sock_read = None if read is None or write is None else read + write
        timeout = _timeout(_seconds(connect_timeout, self._connect), sock_read)
        body, headers = _body(request_data, files)
        proxy, proxy_auth = self._proxy_for(url)
        if self._slots.locked():  # a free slot is taken at once, with no timer to arm
            try:
                async with asyncio.timeout(_seconds(pool_timeout, self._pool)):
                    await self._slots.acquire()
            except TimeoutError:
                raise TimedOut(_POOL_TIMEOUT) from None
        else:
            await self._slots.acquire()
        try:
            self._check_fence()  # it may have waited for a slot: checked again right before sending
            async with session.request(
                method, url, data=body, headers=headers, timeout=timeout, proxy=proxy, proxy_auth=proxy_auth
            ) as response:
                return response.status, await response.read()
        except TimeoutError as err:  # aiohttp's timeouts (connect, read) are TimeoutErrors
            raise TimedOut from err
        except aiohttp.ClientError as err:
            raise NetworkError(f"aiohttp.{err.__class__.__name__}: {err}") from err
        finally:
            self._slots.release()


__all__ = ["NEVER_SENT", "FencedRequest", "LeaseLost"]
