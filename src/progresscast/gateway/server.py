"""Running the gateway's app under uvicorn until cancelled (the socket and its limits:
http/server.py)."""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Sequence
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute

from ..config.gateway import GatewaySettings
from ..config.settings import Settings
from ..http.server import address, bind, limited_config, serve_until_cancelled
from .app import create_app

log = logging.getLogger("progresscast.gateway")


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
    # The gateway's own app carries its settings; another app (an emulator's, a test's)
    # gets the defaults' limits.
    gateway = getattr(app.state, "gateway", None)
    config = limited_config(
        app,
        gateway.settings.gateway if gateway is not None else GatewaySettings(),
        lifespan="on",
        # Live event streams never end by themselves: give them a moment, then close.
        timeout_graceful_shutdown=2,
        # The app reads the proxy's headers itself (gateway.trustedProxies), so that
        # every way of serving it (and the tests) does the same.
        proxy_headers=False,
    )
    # SIGTERM and Ctrl-C are serve's and demo's to handle: they cancel this.
    await serve_until_cancelled(
        config, sock, started=started, closing=gateway.hub.close if gateway is not None else None
    )
