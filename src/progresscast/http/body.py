"""Reading a request's body: streamed, and stopped at a limit before anything (a
signature check, a JSON parser, the MCP SDK) looks at it.

Every route that reads a body reads it here, on every server the project runs (the
gateway's RPC, A2A push, Telegram webhook, login, Slack and Discord routes; the MCP
server over HTTP). A body over its limit is refused with 413 as soon as it is known to be over —
from its `Content-Length`, or after `limit + 1` bytes of a chunked one — so a client
cannot make the process hold more than the limit, whatever it sends. What the client
sends after the refusal is dropped by the server as it arrives (uvicorn discards the
body of an answered request), never kept. (Closing the connection instead would make
the kernel reset it while unread bytes wait, and a client sending would lose the 413.)
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from starlette.datastructures import Headers
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ApiError

MAX_BODY = 64 * 1024
"""The gateway's API bodies (RPC, A2A push) and Slack's."""


def _size(limit: int) -> str:
    if limit % (1024 * 1024) == 0:
        return f"{limit // (1024 * 1024)} MiB"
    return f"{limit // 1024} KiB" if limit % 1024 == 0 else f"{limit} bytes"


def too_large(limit: int) -> ApiError:
    return ApiError(413, "body_too_large", f"the request body is over {_size(limit)} ({limit} bytes)")


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The body, at most `limit` bytes; raises ApiError: 413 `body_too_large` past the
    limit, 400 for a `Content-Length` that is not a number."""
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.strip().isdigit():
            raise ApiError(400, "invalid_request", "the Content-Length header is not a number")
        if int(declared) > limit:
            raise too_large(limit)
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            raise too_large(limit)
        body += chunk
    return bytes(body)


class DeclaredLimit:
    """ASGI middleware: a request whose `Content-Length` is over `limit` is answered 413
    whatever its route (one that never reads a body too), before the route runs. A
    chunked body is bounded by the reader of the route that reads it."""

    def __init__(self, app: ASGIApp, *, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            declared = Headers(scope=scope).get("content-length", "").strip()
            if declared.isdigit() and int(declared) > self.limit:
                await too_large(self.limit).response()(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def read_asgi_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """`read_body` for an ASGI app that is not a Starlette route (a middleware)."""
    return await read_body(Request(scope, receive), limit)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def parse_json(body: bytes) -> Any:
    if not body.strip():
        raise ApiError(400, "invalid_json", "the request body is empty; send a JSON object")
    try:
        return json.loads(body.decode("utf-8"), parse_constant=_no_constants)
    except UnicodeDecodeError:
        raise ApiError(400, "invalid_json", "the request body is not valid UTF-8") from None
    except json.JSONDecodeError as exc:
        raise ApiError(
            400,
            "invalid_json",
            f"the request body is not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}",
        ) from None
    except ValueError as exc:
        raise ApiError(400, "invalid_json", f"the request body is not valid JSON: {exc}") from None
    except RecursionError:
        raise ApiError(400, "invalid_json", "the request body is nested too deeply") from None


def raw_form(data: bytes) -> dict[str, str]:
    """Form-encoded `data` (a query, a form body), bytes that are not UTF-8 kept as lone
    surrogates (the last of each name wins)."""
    return dict(parse_qsl(data.decode("latin-1"), keep_blank_values=True, errors="surrogateescape"))


__all__ = [
    "MAX_BODY",
    "DeclaredLimit",
    "parse_json",
    "raw_form",
    "read_asgi_body",
    "read_body",
    "too_large",
]
