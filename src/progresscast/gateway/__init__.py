"""The HTTP gateway (docs/http-api.md): RPC, live events, and the web page.

    app.py     the Starlette app, routes, security headers
    auth.py    tokens, scopes, session patterns
    rpc.py     POST /v1/rpc and its methods
    sse.py     GET /v1/events (Server-Sent Events)
    hub.py     one change-stream reader fanned out to every event stream
    pages.py   /, /sessions/{key}, /v1/card, login and logout
    telegram_webhook.py  POST /telegram/<path>: Telegram bots' webhooks
    server.py  uvicorn, until cancelled
"""

from .app import create_app
from .server import run_gateway

__all__ = ["create_app", "run_gateway"]
