"""The Starlette app: routes, static files, the security headers on every answer, and
the one place exceptions become answers (JSON for the API, pages for the pages)."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from redis.exceptions import RedisError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from uvicorn.middleware.proxy_headers import ProxyHeadersMiddleware

from ..config.settings import Settings
from ..http import errors
from ..http.auth import Tokens
from ..http.body import DeclaredLimit
from ..http.errors import ApiError
from ..model.card import CardError
from ..store.cards import CardStore
from . import a2a_push, health, pages, rpc, sse
from .hub import EventHub
from .state import Gateway, StreamSlots
from .telegram_webhook import MAX_UPDATE_BYTES, TelegramWebhooks

log = logging.getLogger("progresscast.gateway")

MAX_ANY_BODY = MAX_UPDATE_BYTES
"""The largest body any route takes (a Telegram update); each route has its own limit."""

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


# -- exceptions → answers -------------------------------------------------------
# A route raises; these answer. A page's route (pages.answers_with_pages) is answered
# with a page, every other route with the API's JSON error shape.


def _on_page(request: Request) -> bool:
    return bool(getattr(request.state, "page", False))


async def _api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    if _on_page(request):
        return pages.error_page(request, exc.status, exc.message)
    return await errors.on_api_error(request, exc)


async def _card_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CardError)
    if _on_page(request):
        return pages.error_page(request, errors.from_card_error(exc).status, str(exc))
    return await errors.on_card_error(request, exc)


async def _store_error(request: Request, exc: Exception) -> Response:
    response = await errors.on_store_error(request, exc)  # logged there, once
    return pages.error_page(request, 503, "") if _on_page(request) else response


async def _page_refusal(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, pages.PageRefusal)
    return exc.response


EXCEPTION_HANDLERS = {
    ApiError: _api_error,
    CardError: _card_error,
    RedisError: _store_error,
    pages.PageRefusal: _page_refusal,
}


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
        streams=StreamSlots(settings.gateway.maxStreamsPerToken),
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
        exception_handlers=EXCEPTION_HANDLERS,
    )
    app.state.gateway = gateway
    app.state.probes = health.Probes(redis, settings)
    # Added innermost first: the proxy's headers are read before anything else, and the
    # body limit's refusals carry the security headers.
    app.add_middleware(DeclaredLimit, limit=MAX_ANY_BODY)
    app.add_middleware(SecurityHeaders)
    trusted = settings.gateway.trustedProxies
    app.add_middleware(
        ProxyHeadersMiddleware,
        trusted_hosts=trusted if trusted is not None else os.environ.get("FORWARDED_ALLOW_IPS", "127.0.0.1,::1"),
    )
    return app
