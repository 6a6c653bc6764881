"""`POST /v1/rpc`: `{"method", "params"}` → `{"ok": true, "result"}` or an error.

HTTP status follows the error: 400 for a request that breaks a rule (bad JSON,
wrong type, an unknown or conflicting agent, an unknown method), 413 for a body
over 64 KiB, 401 without a valid token, 403 for a missing scope or a session the token
may not touch (checked before anything is read or written), 409 when the store
refuses a well-formed write (stale `expectedRevision`, a reset in between, a run
that is not the current one), 503 when Redis does not answer.
"""

from __future__ import annotations

import re
import time
from collections.abc import Awaitable, Callable
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from ..http import errors
from ..http.auth import ANSWER, PAGE_METHODS, READ, WRITE, Grant, bearer, page_token
from ..http.body import MAX_BODY, parse_json, read_body
from ..http.errors import ApiError
from ..model.activity import MAX_TOOL_LINES
from ..model.asks import Actor, AskInput
from ..model.card import (
    MAX_MARKDOWN_BYTES,
    MAX_NOTE_CHARS,
    MAX_STEP_BYTES,
    MAX_STEPS,
    CardError,
    CardInput,
    reject_lone_surrogates,
)
from ..model.history import DEFAULT_LIMIT, MAX_LIMIT
from ..model.owners import Owner
from ..model.timing import Usage
from ..model.view import TERMINAL, RunState
from .state import Gateway, gateway_of


def _version() -> str:
    try:
        return version("progresscast")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0"


CAPABILITIES = [
    "progress-card-v1",
    "progress-card-agent-scope-v1",  # agentId / agent:<id>:<key> name the owner
    "progress-card-expected-revision-v1",
    "progress-card-reset-v1",
    "progress-card-keep-markdown-v1",
    "progress-card-history-v1",
    "run-lifecycle-v1",
    "activity-v1",
    "events-sse-v1",
    "asks-v1",  # progressCard.ask / waitAnswer / withdraw / answer, run.stop
]

EVENTS = ["progressCard.changed", "activity.changed", "run.started", "run.ended", "ask.changed", "run.stop"]

Params = dict[str, Any]
Handler = Callable[[Gateway, Grant, Params, float], Awaitable[Any]]
"""(gateway, the caller's grant, params, when the request arrived: `time.monotonic()`)."""


# -- reading the request ------------------------------------------------------

# Strict UTF-8 decoding refuses encoded surrogates, so in JSON text a lone surrogate can
# only come from a `\uD800`-`\uDFFF` escape: a body without one needs no walk over it.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


def may_hold_surrogates(body: bytes) -> bool:
    return _SURROGATE_ESCAPE.search(body) is not None


def _envelope(data: Any, *, surrogates: bool = True) -> tuple[str, Params]:
    """Method and params; `surrogates` False when the body cannot hold a lone surrogate."""
    if not isinstance(data, dict):
        raise ApiError(400, "invalid_request", 'the body must be a JSON object {"method": ..., "params": {...}}')
    try:
        if surrogates:
            reject_lone_surrogates(data)
    except CardError as exc:
        # Inside params, fields are named as every other params error names them.
        field = exc.field.removeprefix("params.")
        code = "invalid_params" if exc.field.startswith("params.") else "invalid_request"
        raise ApiError(400, code, f"{field}: {exc.rule}", field=field, rule=exc.rule) from None
    unknown = sorted(set(data) - {"method", "params", "id"})
    if unknown:
        rule = "is not a known field"
        raise ApiError(400, "invalid_request", f"{unknown[0]}: {rule}", field=unknown[0], rule=rule)
    method = data.get("method")
    if not isinstance(method, str):
        raise ApiError(400, "invalid_request", "method: must be a string", field="method", rule="must be a string")
    params = data.get("params", {})
    if params is None:
        params = {}
    if not isinstance(params, dict):
        rule = "must be a JSON object"
        raise ApiError(400, "invalid_request", f"params: {rule}", field="params", rule=rule)
    return method, params


def _bad(field: str, rule: str) -> ApiError:
    return ApiError(400, "invalid_params", f"{field}: {rule}", field=field, rule=rule)


def _only(params: Params, allowed: set[str]) -> None:
    for name in params:
        if name not in allowed:
            raise _bad(name, "is not a known field")


def _optional_str(params: Params, name: str) -> str | None:
    value = params.get(name)
    if value is not None and not isinstance(value, str):
        raise _bad(name, "must be a string")
    return value


RUN_ID_RULE = "must be a non-empty string of at most 200 characters"


def _run_id(params: Params) -> str:
    value = params.get("runId")
    if not isinstance(value, str):
        raise _bad("runId", RUN_ID_RULE)
    return value  # the store checks the rest of the rule


def _owner(gw: Gateway, grant: Grant, params: Params) -> Owner:
    """Resolve the owner and check the token may touch it — before anything is read."""
    if "sessionKey" not in params:
        raise _bad("sessionKey", "is required")
    owner = gw.owner(params["sessionKey"], params.get("agentId"))
    if not grant.may_touch(owner):
        raise errors.session_forbidden(owner.display_key)
    return owner


# -- methods ------------------------------------------------------------------

OWNER_FIELDS = {"sessionKey", "agentId"}


async def hello(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    return {
        "server": {"name": "progresscast", "version": _version()},
        "features": {
            "methods": sorted(METHODS),
            "capabilities": CAPABILITIES,
            "events": EVENTS,
        },
        "agents": {"default": gw.settings.agents.default, "known": sorted(gw.settings.agents.known_set)},
        "limits": {
            "bodyBytes": MAX_BODY,
            "steps": MAX_STEPS,
            "stepBytes": MAX_STEP_BYTES,
            "noteChars": MAX_NOTE_CHARS,
            "markdownBytes": MAX_MARKDOWN_BYTES,
            "toolLines": MAX_TOOL_LINES,
        },
        "token": {"scopes": sorted(grant.scopes), "sessions": list(grant.sessions)},
    }


async def card_get(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS)
    card = await gw.store.get(_owner(gw, grant, params))
    return card.to_json() if card else None


async def card_put(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    owner = _owner(gw, grant, params)
    expected = _expected_revision(params)
    keep = params.get("keepMarkdown", False)
    if not isinstance(keep, bool):
        raise _bad("keepMarkdown", "must be true or false")
    if keep and "markdown" in params:
        raise _bad("markdown", "must be absent with keepMarkdown (the card's note is kept)")
    card = CardInput.parse({k: v for k, v in params.items() if k not in OWNER_FIELDS | PUT_OPTIONS})
    # Admitted at arrival: a reset that lands after the request arrived, before it is
    # written, wins (the write script compares the reset's time with the arrival's).
    result = await gw.store.put(owner, card, expected_revision=expected, arrived=arrived, keep_markdown=keep)
    return {"receipt": result.receipt, **result.to_json()}


PUT_OPTIONS = {"expectedRevision", "keepMarkdown"}


def _expected_revision(params: Params) -> int | None:
    expected = params.get("expectedRevision")
    if expected is not None and (type(expected) is not int or expected < 0):
        raise _bad("expectedRevision", "must be a non-negative integer")
    return expected


async def card_clear(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"expectedRevision"})
    owner = _owner(gw, grant, params)
    result = await gw.store.clear(owner, expected_revision=_expected_revision(params), arrived=arrived)
    return {"receipt": result.receipt, **result.to_json()}


async def card_history(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"limit", "before"})
    owner = _owner(gw, grant, params)
    limit = params.get("limit", DEFAULT_LIMIT)
    if type(limit) is not int or not 1 <= limit <= MAX_LIMIT:
        raise _bad("limit", f"must be an integer from 1 to {MAX_LIMIT}")
    before = params.get("before")
    if before is not None and (type(before) is not int or before < 1):
        raise _bad("before", "must be a positive integer (a revision)")
    entries = await gw.store.history(owner, limit=limit, before=before)
    return [e.to_json() for e in entries]


async def card_reset(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS)
    result = await gw.store.reset(_owner(gw, grant, params))
    return {"receipt": result.receipt, **result.to_json()}


async def run_start(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"runId"})
    owner = _owner(gw, grant, params)
    run_id = _run_id(params)
    await gw.store.start_run(owner, run_id)
    return {"runId": run_id, "state": RunState.active.value}


async def run_end(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"runId", "state", "usage"})
    owner = _owner(gw, grant, params)
    state = params.get("state")
    ended = [s.value for s in RunState if s in TERMINAL]
    if state not in ended:
        raise _bad("state", f"must be one of {', '.join(ended)}")
    run_id = _run_id(params)
    usage = Usage.parse(params["usage"]) if params.get("usage") is not None else None  # CardError → 400
    if not await gw.store.end_run(owner, run_id, RunState(state), usage=usage):
        rule = f"'{run_id}' is not the current run of this session"
        raise ApiError(409, "conflict", f"runId: {rule}", field="runId", rule=rule)
    return {"runId": run_id, "state": state}


async def activity_put(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"headline", "tool", "answer", "replace"})
    owner = _owner(gw, grant, params)
    headline, tool, answer = (_optional_str(params, n) for n in ("headline", "tool", "answer"))
    replace = params.get("replace", False)
    if not isinstance(replace, bool):
        raise _bad("replace", "must be true or false")
    activity = await gw.store.update_activity(owner, headline=headline, tool=tool, answer=answer, replace=replace)
    return activity.to_json()


# -- asks and Stop (docs/answering.md) ------------------------------------------------

ASK_FIELDS = {"kind", "prompt", "detail", "options", "multi", "allowText", "timeoutSeconds", "source"}
MAX_WAIT = 60


async def ask(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | ASK_FIELDS)
    owner = _owner(gw, grant, params)
    body = {k: v for k, v in params.items() if k in ASK_FIELDS}
    body.setdefault("source", "api")
    made = await gw.store.asks.open(owner, AskInput.parse(body))
    return {"askId": made.ask_id, "expiresAt": made.to_json()["expiresAt"], "options": list(made.options)}


def _ask_id(params: Params) -> str:
    value = params.get("askId")
    if not isinstance(value, str) or not 1 <= len(value) <= 64:
        raise _bad("askId", "must be a non-empty string (the id `progressCard.ask` returned)")
    return value


async def wait_answer(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"askId", "timeoutSeconds"})
    owner = _owner(gw, grant, params)
    ask_id = _ask_id(params)
    timeout = params.get("timeoutSeconds", 30)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 <= timeout <= MAX_WAIT:
        raise _bad("timeoutSeconds", f"must be a number from 0 to {MAX_WAIT}")
    found = await gw.store.asks.wait(owner, ask_id, float(timeout))
    if found is None:
        raise _unknown_ask()
    shown = found.to_json()
    return {"state": shown["state"], **({"answer": shown["answer"]} if "answer" in shown else {}), "ask": shown}


def _unknown_ask() -> ApiError:
    rule = "is not an ask of this session (or it ended over a day ago)"
    return ApiError(404, "not_found", f"askId: {rule}", field="askId", rule=rule)


async def withdraw(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"askId"})
    owner = _owner(gw, grant, params)
    closing = await gw.store.asks.withdraw(owner, _ask_id(params))
    if closing.ask is None:
        raise _unknown_ask()
    return {"withdrawn": closing.outcome == "ok", "ask": closing.ask.to_json()}


async def answer(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS | {"askId", "options", "text"})
    owner = _owner(gw, grant, params)
    options = params.get("options")
    if options is not None and (not isinstance(options, list) or not all(isinstance(o, str) for o in options)):
        raise _bad("options", "must be an array of labels")
    text = _optional_str(params, "text")
    closing = await gw.store.asks.answer(owner, _ask_id(params), _web_actor(grant), options=options, text=text)
    if closing.ask is None:
        raise _unknown_ask()
    return {"answered": closing.outcome == "ok", "ask": closing.ask.to_json()}


async def asks_list(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS)
    asks, now = await gw.store.asks.all(_owner(gw, grant, params))
    return [a.to_json(now) for a in asks]


async def run_stop(gw: Gateway, grant: Grant, params: Params, arrived: float) -> Any:
    _only(params, OWNER_FIELDS)
    owner = _owner(gw, grant, params)
    outcome, mark = await gw.store.asks.stop(owner, _web_actor(grant))
    if outcome == "norun":
        rule = "has no active run to stop"
        raise ApiError(409, "conflict", f"sessionKey: {rule}", field="sessionKey", rule=rule)
    return {"stopped": outcome == "ok", "stop": mark.to_json() if mark else None}


def _web_actor(grant: Grant) -> Actor:
    """An answer given with a gateway token is signed with the token's name."""
    return Actor("web", "web", grant.name, grant.name)


METHODS: dict[str, tuple[str | None, Handler]] = {
    "hello": (None, hello),
    "progressCard.get": (READ, card_get),
    "progressCard.put": (WRITE, card_put),
    "progressCard.clear": (WRITE, card_clear),
    "progressCard.reset": (WRITE, card_reset),
    "progressCard.history": (READ, card_history),
    "run.start": (WRITE, run_start),
    "run.end": (WRITE, run_end),
    "activity.put": (WRITE, activity_put),
    "progressCard.ask": (WRITE, ask),
    "progressCard.waitAnswer": (WRITE, wait_answer),
    "progressCard.withdraw": (WRITE, withdraw),
    "progressCard.asks": (READ, asks_list),
    "progressCard.answer": (ANSWER, answer),
    "run.stop": (ANSWER, run_stop),
}


# -- the endpoint -------------------------------------------------------------


async def rpc(request: Request) -> Response:
    """Errors are raised, and answered by the app's exception handlers (errors.py),
    which echo the request's `id` once it is known."""
    arrived = time.monotonic()
    gw = gateway_of(request)
    # Who first: an unauthenticated caller learns nothing, not even about its JSON.
    token = bearer(request)
    from_page = token is None and (token := page_token(request)) is not None
    grant = gw.tokens.grant(token)
    if grant is None:
        raise errors.unauthorized()
    body = await read_body(request, MAX_BODY)
    data = parse_json(body)
    if isinstance(data, dict):
        request.state.echo_id = data.get("id")
    method, params = _envelope(data, surrogates=may_hold_surrogates(body))
    if method not in METHODS:
        raise ApiError(
            400, "unknown_method", f"method: '{method}' is not one of {', '.join(sorted(METHODS))}",
            field="method", rule="is not a known method",
        )
    if from_page and method not in PAGE_METHODS:
        rule = f"is not one the page may call with its sign-in ({', '.join(sorted(PAGE_METHODS))})"
        raise ApiError(403, "forbidden", f"method: {rule}; send an Authorization header", field="method", rule=rule)
    scope, handler = METHODS[method]
    if scope is not None and not grant.can(scope):
        raise errors.missing_scope(scope)
    result = await handler(gw, grant, params, arrived)
    return JSONResponse({"ok": True, "result": result, **errors.echo(request)})
