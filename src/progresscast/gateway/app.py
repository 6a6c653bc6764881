"""The Starlette app: routes, static files and the security headers on every answer."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..config.settings import Settings
from ..store.cards import CardStore
from . import a2a_push, health, pages, rpc, sse
from .auth import Tokens
from .hub import EventHub
from .state import Gateway
from .telegram_webhook import TelegramWebhooks

log = logging.getLogger("progresscast.gateway")

STATIC = Path(__file__).resolve().parent.parent / "static"

# No inline script or style anywhere, nothing from other origins, and the one HTML
# sink (the card fragment) must go through the `progresscast-card` Trusted Types policy.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self'",
        "connect-src 'self'",
        "form-action 'self'",
        "base-uri 'none'",
        "frame-ancestors 'none'",
        "require-trusted-types-for 'script'",
        "trusted-types progresscast-card",
    ]
)

SECURITY_HEADERS = [
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),  # `?token=` must never leak through Referer
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
]


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every HTTP answer (pages, API, static files)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {name.lower() for name, _ in message.get("headers", [])}
                extra = [(n, v) for n, v in SECURITY_HEADERS if n not in present]
                message = {**message, "headers": [*message.get("headers", []), *extra]}
            await send(message)

        await self.app(scope, receive, send_with_headers)


def create_app(
    settings: Settings,
    redis: Any,
    *,
    readers: Any | None = None,
    heartbeat: float = 15.0,
    routes: Sequence[BaseRoute] = (),
) -> Starlette:
    """The gateway for `settings` on `redis` (the commands client); `readers`: the
    client for the live hub's blocking reads (default: `redis`). `heartbeat`: seconds
    between SSE comments; `routes`: more routes, from the channel adapters (Slack's
    commands)."""
    hub = EventHub(readers if readers is not None else redis)
    gateway = Gateway(
        settings=settings,
        redis=redis,
        store=CardStore(redis),
        tokens=Tokens.from_settings(settings),
        hub=hub,
        heartbeat=heartbeat,
    )
    if not gateway.tokens:
        log.warning("no [[gateway.tokens]] with a token: every request will be refused (401)")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        await hub.close()

    app = Starlette(
        routes=[
            # The API first: routes are tried in order, and a write should not pay for the pages'.
            Route("/v1/rpc", rpc.rpc, methods=["POST"]),
            Route("/", pages.index, methods=["GET"], name="index"),
            Route("/login", pages.login_form, methods=["GET"]),
            Route("/login", pages.login, methods=["POST"]),
            Route("/logout", pages.logout, methods=["POST"]),
            Route("/sessions/{key:path}", pages.session, methods=["GET"], name="session"),
            Route("/v1/a2a/push", a2a_push.push, methods=["POST"]),
            Route("/v1/events", sse.events, methods=["GET"]),
            Route("/v1/card", pages.card_fragment, methods=["GET"]),
            Route("/healthz", health.healthz, methods=["GET"]),
            Route("/metrics", health.metrics_page, methods=["GET"]),
            Route("/telegram/{path:path}", TelegramWebhooks(settings, redis).receive, methods=["POST"]),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
            *routes,
        ],
        lifespan=lifespan,
    )
    app.state.gateway = gateway
    app.add_middleware(SecurityHeaders)
    return app
