"""`progresscast mcp --http`: the MCP server over streamable HTTP, and what guards it.

Every request passes, in this order and before any of its body is read:

1. `Host` and `Origin`, checked by the `mcp` SDK's transport security (DNS rebinding):
   allowed are the listen address (and, on loopback, `localhost` and the other
   loopback names) plus `mcp.allowedHosts`. A wrong `Host` is 421, a wrong `Origin` 403.
2. `Authorization: Bearer <token>`: a gateway token (`[[gateway.tokens]]`, the same
   model as the gateway's) with `operator.write` for the session this server writes.
   401 without a token or with an unknown one, 403 for one without the scope or the
   session.
3. The body, read by the gateway's reader: at most MAX_BODY bytes (413 past it),
   then guarded for lone surrogates (mcp_input) and handed to the SDK.

Without a configured token that could pass step 2 the command does not start.
Its connections keep the gateway's limits (`[gateway]` headerTimeout, bodyTimeout,
idleTimeout, maxConnections; gateway/server.py).
"""

from __future__ import annotations

import sys
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from ..config.errors import ConfigError
from ..config.settings import Settings
from ..http import errors
from ..http.auth import WRITE, Tokens, bearer, check_token_strength, is_loopback
from ..http.errors import ApiError
from ..model.owners import Owner
from .mcp_input import GuardedBodies

MAX_BODY = 1024 * 1024
"""The largest card (50 steps, a note each, 8 KiB of Markdown) as JSON with every
character escaped stays well under this."""

INVALID_REQUEST = -32600
"""JSON-RPC's code for a request the server will not take."""
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def _host_port(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host and not host.startswith("[") else f"{host}:{port}"


def security_settings(host: str, port: int, settings: Settings) -> TransportSecuritySettings:
    """The SDK's DNS-rebinding protection, always on: the listen address (every loopback
    name, when it is loopback) and `mcp.allowedHosts`."""
    names = [host, *(LOOPBACK_NAMES if is_loopback(host) else ())]
    hosts = list(dict.fromkeys([_host_port(n, port) for n in names] + settings.mcp.allowedHosts))
    origins = [f"{scheme}://{h}" for h in hosts for scheme in ("http", "https")]
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def check_tokens(settings: Settings, owner: Owner, listen: tuple[str, int]) -> None:
    """Raise ConfigError unless some configured token may write `owner`'s card, or for
    a short token beyond loopback; print a warning for a short one on loopback."""
    if not Tokens.from_settings(settings).any_grants(WRITE, owner):
        raise ConfigError(
            f"gateway.tokens: --http needs a configured token with {WRITE} for {owner.display_key} "
            "(clients send it as Authorization: Bearer); none is configured"
        )
    for warning in check_token_strength(settings, _host_port(*listen)):
        print(f"progresscast mcp: warning: {warning}", file=sys.stderr, flush=True)


class BearerGate:
    """Steps 1 and 2 of the module doc, in front of the body guard and the SDK."""

    def __init__(self, app: ASGIApp, *, tokens: Tokens, owner: Owner, security: TransportSecuritySettings) -> None:
        self.app = app
        self.tokens = tokens
        self.owner = owner
        self.security = TransportSecurityMiddleware(security)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        refused = await self.security.validate_request(request, is_post=request.method == "POST")
        if refused is not None:
            await refused(scope, receive, send)
            return
        grant = self.tokens.grant(bearer(request))
        problem = None
        if grant is None:
            problem = errors.unauthorized()
        elif not grant.can(WRITE):
            problem = errors.missing_scope(WRITE)
        elif not grant.may_touch(self.owner):
            problem = errors.session_forbidden(self.owner.display_key)
        if problem is not None:
            await refusal(problem)(scope, receive, send)
            return
        try:
            await self.app(scope, receive, send)
        except ApiError as exc:  # the body guard's, before the SDK answered anything
            await refusal(exc)(scope, receive, send)


def refusal(exc: ApiError) -> Response:
    """A refusal as a JSON-RPC error (the status kept): MCP clients show its message."""
    body = {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": exc.message}}
    kept = {k: v for k, v in exc.response().headers.items() if k == "www-authenticate"}
    return JSONResponse(body, status_code=exc.status, headers=kept)


async def serve_http(server: Server[Any], settings: Settings, owner: Owner, listen: tuple[str, int]) -> None:
    """Serve `server` on `listen` until cancelled (check_tokens first)."""
    from ..http.server import address, bind, limited_config, serve_until_cancelled

    host, port = listen
    sock = bind(_host_port(host, port))
    port = sock.getsockname()[1]  # port 0: the one the system chose
    security = security_settings(host, port, settings)
    sdk = server.streamable_http_app(host=host, transport_security=security, max_request_body_size=MAX_BODY)
    app = BearerGate(
        GuardedBodies(sdk, limit=MAX_BODY), tokens=Tokens.from_settings(settings), owner=owner, security=security
    )
    print(f"progresscast mcp: streamable HTTP on {address(sock)}/mcp", file=sys.stderr, flush=True)
    config = limited_config(app, settings.gateway, lifespan="on")
    await serve_until_cancelled(config, sock)  # the caller stops it: Ctrl-C, SIGTERM


__all__ = ["MAX_BODY", "BearerGate", "check_tokens", "security_settings", "serve_http"]
