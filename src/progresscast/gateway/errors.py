"""The one error shape every API answer uses: `{"ok": false, "error": {...}}`.

`code` is stable and machine-readable; `message` is one human sentence that names
the field and the rule when there is one (they are repeated as `field` / `rule`).
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

from ..model.card import CardError
from ..store.cards import StoreError


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        rule: str | None = None,
        revision: int | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.rule = rule
        self.revision = revision

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
        headers = {"WWW-Authenticate": 'Bearer realm="progresscast"'} if self.status == 401 else None
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
