"""`POST /v1/a2a/push[?agent=ID]`: what an A2A server's push sender posts.

The body is one `StreamResponse` JSON (or a bare Task / status / artifact event). The
token comes in `X-A2A-Notification-Token`, `A2A-Notification-Token` or
`Authorization: Bearer`; it is a gateway token, and it needs `operator.write` for the
session the update belongs to (its context, else its task). The update then goes
through the same ordering as every other source: a push older than what a follower
already applied changes nothing.

401 without a valid token, 403 for a missing scope or session (checked before
anything is written), 400 naming the field for a body that is not an update, 413
for a body over 64 KiB, 503 when Redis does not answer. The answer says what happened:
`applied`, `stale`, `duplicate`, `untimed`, `future` (a timestamp more than
`a2a.maxClockSkew` ahead of the store's clock) or `reset` (the card was reset after the
push arrived). The session is always one of the `?agent=` agent (else the default
agent): a context id naming another agent is a session key of that one (a2a/apply.py).
"""

from __future__ import annotations

import time

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..agents.a2a.apply import Source, UpdateApplier
from ..agents.a2a.mapping import parse_update
from ..http import errors
from ..http.auth import WRITE, bearer
from ..http.body import MAX_BODY, parse_json, read_body
from .state import gateway_of


def _token(request: Request) -> str | None:
    for header in ("x-a2a-notification-token", "a2a-notification-token"):
        value = request.headers.get(header, "").strip()
        if value:
            return value
    return bearer(request)


async def push(request: Request) -> Response:
    arrived = time.monotonic()
    gw = gateway_of(request)
    grant = gw.tokens.grant(_token(request))
    if grant is None:
        raise errors.unauthorized()
    if not grant.can(WRITE):
        raise errors.missing_scope(WRITE)
    update = parse_update(parse_json(await read_body(request, MAX_BODY)))
    if update is None:
        return JSONResponse({"ok": True, "result": {"outcome": "ignored", "reason": "a message shows nothing"}})
    applier = UpdateApplier.configured(gw.redis, request.query_params.get("agent") or None, gw.settings)
    owner = applier.owner_of(update)
    if not grant.may_touch(owner):
        raise errors.session_forbidden(owner.display_key)
    applied = await applier.apply(update, Source.push, arrived=arrived)
    result = {"outcome": applied.outcome.value, "sessionKey": owner.session_key, "agentId": owner.agent_id}
    if applied.plan_problem:
        result["planNotApplied"] = applied.plan_problem
    return JSONResponse({"ok": True, "result": result})
