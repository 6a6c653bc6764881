"""The HTTP gateway (docs/http-api.md): RPC, live events, and the web page.

    app.py     the Starlette app, routes, security headers, exceptions → answers
    errors.py  the one error shape, and the exception handlers that make it
    body.py    reading a request body: streamed, refused (413) past its limit
    auth.py    tokens, scopes, session patterns, the token-strength rule
    state.py   what every route shares (settings, store, tokens, live streams)
    rpc.py     POST /v1/rpc and its methods
    sse.py     GET /v1/events (Server-Sent Events)
    hub.py     one change-stream reader fanned out to every event stream
    pages.py   /, /sessions/{key}, /v1/card, login and logout
    health.py  /healthz and /metrics, cheap and cached
    a2a_push.py  POST /v1/a2a/push: A2A servers' push notifications
    telegram_webhook.py  POST /telegram/<path>: Telegram bots' webhooks
    server.py  uvicorn, until cancelled
"""

from .app import create_app
from .server import run_gateway

__all__ = ["create_app", "run_gateway"]
