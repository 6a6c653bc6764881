"""The one error shape every API answer uses: `{"ok": false, "error": {...}}`, and
the exception handlers that make it (app.py registers them; routes only raise).

`code` is stable and machine-readable; `message` is one human sentence that names
the field and the rule when there is one (they are repeated as `field` / `rule`).
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from redis.exceptions import RedisError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..model.card import CardError, has_lone_surrogate
from ..store.cards import StoreError

log = logging.getLogger("progresscast.gateway")


@dataclasses.dataclass(eq=False)
class ApiError(Exception):
    status: int
    code: str
    message: str
    _: dataclasses.KW_ONLY
    field: str | None = None
    rule: str | None = None
    revision: int | None = None
    headers: dict[str, str] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        super().__init__(self.message)

    def to_json(self) -> dict[str, Any]:
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.field:
            error["field"] = self.field
        if self.rule:
            error["rule"] = self.rule
        if self.revision is not None:
            error["revision"] = self.revision
        return {"ok": False, "error": error}

    def response(self, extra: dict[str, Any] | None = None) -> JSONResponse:
        headers = dict(self.headers)
        if self.status == 401:
            headers["WWW-Authenticate"] = 'Bearer realm="progresscast"'
        body = self.to_json()
        if extra:
            body.update(extra)
        return JSONResponse(body, status_code=self.status, headers=headers)


def unauthorized() -> ApiError:
    return ApiError(401, "unauthorized", "a valid token is required (Authorization: Bearer <token>)")


def missing_scope(scope: str) -> ApiError:
    return ApiError(403, "forbidden", f"this token lacks the scope {scope}")


def session_forbidden(display_key: str) -> ApiError:
    return ApiError(403, "forbidden", f"this token may not touch the session {display_key}")


def from_card_error(exc: CardError) -> ApiError:
    """A rule broken by the request (400), or a write the store refused (409)."""
    field, rule = exc.field or None, exc.rule
    if isinstance(exc, StoreError):
        # `revision`: where the card is now, so a compare-and-set writer can retry against it.
        return ApiError(409, "conflict", str(exc), field=field, rule=rule, revision=exc.revision)
    code = "invalid_params"
    if field == "agentId" and "not a configured agent" in rule:
        code = "unknown_agent"
    elif field == "agentId" and "conflicts" in rule:
        code = "agent_conflict"
    return ApiError(400, code, str(exc), field=field, rule=rule)


def store_unavailable() -> ApiError:
    return ApiError(503, "unavailable", "the card store is not answering; try again")


# -- exception handlers --------------------------------------------------------
# Starlette calls these for what a route raises. A route that echoes a JSON-RPC-style
# `id` (the RPC) leaves it in `request.state.echo_id`.


def echo(request: Request) -> dict[str, Any]:
    """`{"id": …}` to add to an answer, so a client can match answers to calls."""
    request_id = getattr(request.state, "echo_id", None)
    if isinstance(request_id, str) and has_lone_surrogate(request_id):
        return {}  # refused as `id`; it cannot be encoded to be echoed
    if isinstance(request_id, (str, int)) and not isinstance(request_id, bool):
        return {"id": request_id}
    return {}


async def on_api_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return exc.response(echo(request))


async def on_card_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, CardError)
    return from_card_error(exc).response(echo(request))


async def on_store_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RedisError)
    log.warning("%r: the card store is not answering: %s", request.url.path, exc)
    return store_unavailable().response(echo(request))
