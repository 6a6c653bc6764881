"""POST /v1/rpc: every method, every error, and the token rules.

HTTP through httpx's ASGITransport against a real Redis (embedded, and REDIS_URL's).
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from conftest import all_keys
from progresscast.config.agents import AgentSettings
from progresscast.config.gateway import GatewaySettings, GatewayToken
from progresscast.config.settings import Settings
from progresscast.gateway import create_app
from progresscast.http.auth import Tokens
from progresscast.http.body import MAX_BODY
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store import keys
from progresscast.store.cards import CardStore, StoreError

RW = ["operator.read", "operator.write"]
TOKENS = {
    "writer": (RW, ["*"]),
    "reader": (["operator.read"], ["*"]),
    "team": (RW, ["team-*"]),
    "research": (RW, ["agent:research:*"]),
    "noscope": ([], ["*"]),
}
MAIN = Owner(agent_id="main", session_key="ticket-1")
PLAN = [
    {"step": "Reproduce", "status": "completed"},
    {"step": "Fix", "status": "in_progress"},
    {"step": "Ship", "status": "pending"},
]


def gateway_settings(**gateway: object) -> Settings:
    return Settings(
        agents=AgentSettings(default="main", known=["main", "research"]),
        gateway=GatewaySettings(
            **gateway,
            listen="127.0.0.1:0",
            tokens=[GatewayToken(token=t, scopes=s, sessions=p) for t, (s, p) in TOKENS.items()]
            + [GatewayToken(token="env:PROGRESSCAST_TEST_UNSET_TOKEN", scopes=RW)],
        ),
    )


async def card_keys(redis: Redis) -> list[str]:
    """Every key but the store's recorded layout (written on first use, not a card)."""
    return [k for k in await all_keys(redis, "pc:*") if k != keys.SHARDS]


@pytest.fixture
async def client(redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(gateway_settings(), redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        c.app = app  # type: ignore[attr-defined]
        yield c


async def call(client: httpx.AsyncClient, method: str, token: str | None = "writer", **params: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    return await client.post("/v1/rpc", json={"method": method, "params": params}, headers=headers)


def ok(response: httpx.Response) -> Any:
    body = response.json()
    assert response.status_code == 200 and body["ok"] is True, body
    return body["result"]


def error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    body = response.json()
    assert response.status_code == status, body
    assert body["ok"] is False and body["error"]["code"] == code, body
    return body["error"]


# -- methods -----------------------------------------------------------------


async def test_hello_lists_methods_and_the_agent_scope_capability(client: httpx.AsyncClient) -> None:
    result = ok(await call(client, "hello"))
    assert "progress-card-agent-scope-v1" in result["features"]["capabilities"]
    assert {"progressCard.get", "progressCard.put", "progressCard.clear", "progressCard.reset", "run.start", "run.end", "activity.put"} <= set(
        result["features"]["methods"]
    )
    assert result["agents"] == {"default": "main", "known": ["main", "research"]}
    assert result["limits"]["bodyBytes"] == 64 * 1024


async def test_hello_needs_a_token_but_no_scope(client: httpx.AsyncClient) -> None:
    error(await call(client, "hello", token=None), 401, "unauthorized")
    assert ok(await call(client, "hello", token="noscope"))["token"]["scopes"] == []


@pytest.mark.backends
async def test_put_answers_receipt_and_structured_result_then_get_returns_the_card(
    client: httpx.AsyncClient, store: CardStore
) -> None:
    result = ok(await call(client, "progressCard.put", sessionKey="ticket-1", plan=PLAN, markdown="**Found** it"))
    assert result == {
        "receipt": "Progress card updated (rev 1, 1/3 done)",
        "revision": 1,
        "steps": {"completed": 1, "total": 3},
    }
    card = ok(await call(client, "progressCard.get", sessionKey="ticket-1"))
    assert card["sessionKey"] == "ticket-1" and card["agentId"] == "main"
    assert card["displayKey"] == "agent:main:ticket-1"
    assert card["revision"] == 1 and card["plan"] == PLAN and card["markdown"] == "**Found** it"
    assert card["updatedAt"].endswith("Z")
    stored = await store.get(MAIN)
    assert stored is not None and stored.to_json() == card


async def test_get_of_a_session_without_a_card_is_null(client: httpx.AsyncClient) -> None:
    assert ok(await call(client, "progressCard.get", sessionKey="nothing-here")) is None


async def test_put_without_plan_and_clear_receipts(client: httpx.AsyncClient) -> None:
    assert ok(await call(client, "progressCard.put", sessionKey="ticket-1", markdown="note only"))["receipt"] == (
        "Progress card updated (rev 1)"
    )
    result = ok(await call(client, "progressCard.put", sessionKey="ticket-1"))
    assert result["receipt"] == "Progress card cleared" and result["revision"] == 2 and result["steps"] is None
    assert ok(await call(client, "progressCard.get", sessionKey="ticket-1")) is None


async def test_expected_revision_is_compare_and_set(client: httpx.AsyncClient, store: CardStore) -> None:
    ok(await call(client, "progressCard.put", sessionKey="ticket-1", markdown="one"))
    ok(await call(client, "progressCard.put", sessionKey="ticket-1", markdown="two", expectedRevision=1))
    err = error(await call(client, "progressCard.put", sessionKey="ticket-1", markdown="three", expectedRevision=1), 409, "conflict")
    assert err["field"] == "expectedRevision" and "revision 2" in err["message"]
    assert err["revision"] == 2  # where to retry from, for a compare-and-set writer
    card = await store.get(MAIN)
    assert card is not None and card.markdown == "two"
    for bad in ["1", 1.5, -1, True]:
        err = error(await call(client, "progressCard.put", sessionKey="ticket-1", markdown="x", expectedRevision=bad), 400, "invalid_params")
        assert err["field"] == "expectedRevision"
    assert await store.revision(MAIN) == 2


@pytest.mark.backends
async def test_put_is_admitted_at_arrival_so_a_reset_in_between_wins(
    client: httpx.AsyncClient, store: CardStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    gw = client.app.state.gateway  # type: ignore[attr-defined]
    real_put = gw.store.put

    async def reset_then_put(owner: Owner, card: CardInput, **kwargs: Any) -> Any:
        await store.reset(owner)  # a reset lands after the request arrived, before it is written
        return await real_put(owner, card, **kwargs)

    monkeypatch.setattr(gw.store, "put", reset_then_put)
    err = error(await call(client, "progressCard.put", sessionKey="ticket-1", plan=PLAN), 409, "conflict")
    assert "reset" in err["message"]
    assert await store.get(MAIN) is None


async def test_reset_clears_and_bumps_the_revision(client: httpx.AsyncClient, store: CardStore) -> None:
    ok(await call(client, "progressCard.put", sessionKey="ticket-1", plan=PLAN))
    arrived = time.monotonic() - 0.05  # a write that arrived before the reset ...
    result = ok(await call(client, "progressCard.reset", sessionKey="ticket-1"))
    assert result["revision"] == 2 and result["cleared"] is True and result["receipt"] == "Progress card cleared"
    assert await store.get(MAIN) is None
    with pytest.raises(StoreError, match="reset"):  # ... is refused when it lands after it
        await store.put(MAIN, CardInput.parse({"markdown": "late"}), arrived=arrived)
    assert await store.get(MAIN) is None


async def test_clear_like_the_cli_with_an_optional_expected_revision(client: httpx.AsyncClient, store: CardStore) -> None:
    ok(await call(client, "progressCard.put", sessionKey="ticket-1", plan=PLAN))
    arrived = time.monotonic() - 0.05  # a write that arrived before the clear ...
    err = error(await call(client, "progressCard.clear", sessionKey="ticket-1", expectedRevision=5), 409, "conflict")
    assert err["field"] == "expectedRevision"
    assert (await store.get(MAIN)) is not None
    result = ok(await call(client, "progressCard.clear", sessionKey="ticket-1", expectedRevision=1))
    assert result == {"receipt": "Progress card cleared", "revision": 2, "steps": None, "cleared": True}
    assert await store.get(MAIN) is None
    # ... still lands after it: a clear is not a reset.
    assert (await store.put(MAIN, CardInput.parse({"markdown": "late"}), arrived=arrived)).revision == 3
    error(await call(client, "progressCard.clear", token="reader", sessionKey="ticket-1"), 403, "forbidden")


@pytest.mark.backends
async def test_run_start_and_end(client: httpx.AsyncClient, store: CardStore) -> None:
    ok(await call(client, "progressCard.put", sessionKey="ticket-1", plan=PLAN))
    assert ok(await call(client, "run.start", sessionKey="ticket-1", runId="r1")) == {"runId": "r1", "state": "active"}
    assert (await store.view(MAIN)).run is RunState.active
    error(await call(client, "run.end", sessionKey="ticket-1", runId="other", state="completed"), 409, "conflict")
    assert (await store.view(MAIN)).run is RunState.active
    assert ok(await call(client, "run.end", sessionKey="ticket-1", runId="r1", state="failed")) == {"runId": "r1", "state": "failed"}
    view = await store.view(MAIN)
    assert view.run is RunState.failed and view.paused


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("run.start", {}, "runId"),
        ("run.start", {"runId": 7}, "runId"),
        ("run.end", {"runId": "r1", "state": "done"}, "state"),
        ("run.end", {"runId": "r1"}, "state"),
    ],
)
async def test_run_errors_name_the_field(client: httpx.AsyncClient, method: str, params: dict[str, Any], field: str) -> None:
    err = error(await call(client, method, sessionKey="ticket-1", **params), 400, "invalid_params")
    assert err["field"] == field and err["message"].startswith(f"{field}: ")


@pytest.mark.parametrize(
    ("usage", "field"),
    [({"inputTokens": -1}, "usage.inputTokens"), ({"costUsd": "0.1"}, "usage.costUsd"),
     ({"tokens": 3}, "usage.tokens"), ([1], "usage")],
)
async def test_a_run_end_with_bad_usage_names_the_field_and_leaves_the_run(
    client: httpx.AsyncClient, store: CardStore, usage: Any, field: str
) -> None:
    ok(await call(client, "run.start", sessionKey="ticket-1", runId="r1"))
    err = error(await call(client, "run.end", sessionKey="ticket-1", runId="r1", state="completed", usage=usage),
                400, "invalid_params")
    assert err["field"] == field and err["message"].startswith(f"{field}: ")
    assert (await store.view(MAIN)).run is RunState.active  # nothing written
    ok(await call(client, "run.end", sessionKey="ticket-1", runId="r1", state="completed",
                  usage={"inputTokens": 10, "outputTokens": 2, "costUsd": 0.01}))
    assert (await store.view(MAIN)).usage is not None


@pytest.mark.backends
async def test_activity_put_merges_headline_tool_lines_and_answer(client: httpx.AsyncClient, store: CardStore) -> None:
    ok(await call(client, "activity.put", sessionKey="ticket-1", headline="Reading the ticket"))
    ok(await call(client, "activity.put", sessionKey="ticket-1", tool="run: pytest"))
    result = ok(await call(client, "activity.put", sessionKey="ticket-1", tool="read: a.py", answer="So far"))
    assert result == {"headline": "Reading the ticket", "tools": ["run: pytest", "read: a.py"], "answer": "So far"}
    activity = await store.activity(MAIN)
    assert activity.headline == "Reading the ticket" and activity.tools == ("run: pytest", "read: a.py")
    assert ok(await call(client, "activity.put", sessionKey="ticket-1", headline="", replace=True))["tools"] == []


@pytest.mark.parametrize(("params", "field"), [({"headline": 3}, "headline"), ({"tool": ["x"]}, "tool"), ({"answer": {}}, "answer"), ({"replace": "yes"}, "replace"), ({"mood": "ok"}, "mood")])
async def test_activity_put_rejects_wrong_types(client: httpx.AsyncClient, store: CardStore, params: dict[str, Any], field: str) -> None:
    err = error(await call(client, "activity.put", sessionKey="ticket-1", **params), 400, "invalid_params")
    assert err["field"] == field
    assert (await store.activity(MAIN)).empty


# -- owners and agents -------------------------------------------------------


async def test_agent_id_and_agent_qualified_keys_name_the_same_owner(client: httpx.AsyncClient, store: CardStore) -> None:
    ok(await call(client, "progressCard.put", sessionKey="ticket-1", agentId="research", markdown="r"))
    card = ok(await call(client, "progressCard.get", sessionKey="agent:research:ticket-1"))
    assert card["agentId"] == "research" and card["markdown"] == "r"
    assert await store.get(MAIN) is None  # the default agent's card is another owner


async def test_unknown_agent_is_a_clear_error_and_writes_nothing(client: httpx.AsyncClient, redis: Redis) -> None:
    err = error(await call(client, "progressCard.put", sessionKey="ticket-1", agentId="ghost", plan=PLAN), 400, "unknown_agent")
    assert err["field"] == "agentId" and "ghost" in err["message"] and "not a configured agent" in err["message"]
    error(await call(client, "progressCard.get", sessionKey="agent:ghost:ticket-1"), 400, "unknown_agent")
    assert await card_keys(redis) == []


async def test_conflicting_agent_is_a_clear_error(client: httpx.AsyncClient, redis: Redis) -> None:
    err = error(
        await call(client, "progressCard.put", sessionKey="agent:research:ticket-1", agentId="main", plan=PLAN),
        400,
        "agent_conflict",
    )
    assert err["field"] == "agentId" and "conflicts" in err["message"] and "research" in err["message"]
    assert await card_keys(redis) == []


# -- authentication and authorization -----------------------------------------


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer wrong"},
        {"Authorization": "Bearer write"},  # only the whole token matches: not a prefix,
        {"Authorization": "Bearer writers"},  # nor a longer one,
        {"Authorization": "Bearer WRITER"},  # and case counts
        {"Authorization": "Bearer "},
        {"Authorization": "Basic writer"},
        {"Authorization": "writer"},
        {"Cookie": "progresscast_token=writer"},  # the RPC takes the header only (no CSRF)
    ],
)
async def test_no_valid_bearer_token_is_401(client: httpx.AsyncClient, redis: Redis, headers: dict[str, str]) -> None:
    response = await client.post("/v1/rpc", json={"method": "progressCard.put", "params": {"sessionKey": "ticket-1", "plan": PLAN}}, headers=headers)
    error(response, 401, "unauthorized")
    assert response.headers["www-authenticate"].startswith("Bearer")
    assert await card_keys(redis) == []


async def test_a_token_whose_env_var_is_unset_never_matches(redis: Redis, monkeypatch: pytest.MonkeyPatch) -> None:
    # Unset *before* the settings are built: the token then loads as "".
    monkeypatch.delenv("PROGRESSCAST_TEST_UNSET_TOKEN", raising=False)
    settings = Settings(gateway=GatewaySettings(tokens=[GatewayToken(token="env:PROGRESSCAST_TEST_UNSET_TOKEN", scopes=RW)]))
    assert settings.gateway.tokens[0].token == ""
    tokens = Tokens.from_settings(settings)
    assert not tokens  # no usable token: the gateway warns at start
    assert tokens.grant("") is None and tokens.grant(None) is None
    app = create_app(settings, redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        for headers in ({"Authorization": "Bearer "}, {"Authorization": "Bearer"}, {"Cookie": "progresscast_token="}):
            response = await c.post("/v1/rpc", json={"method": "hello"}, headers=headers)
            error(response, 401, "unauthorized")
            page = await c.get("/", headers=headers)
            assert page.status_code == 401


async def test_an_empty_agent_id_is_refused_not_the_default(client: httpx.AsyncClient, redis: Redis) -> None:
    err = error(await call(client, "progressCard.put", sessionKey="ticket-1", agentId="", plan=PLAN), 400, "invalid_params")
    assert err["field"] == "agentId" and "empty" in err["rule"]
    assert await all_keys(redis, "pc:*") == []


@pytest.mark.parametrize(
    ("method", "params"),
    [
        ("progressCard.put", {"plan": PLAN}),
        ("progressCard.reset", {}),
        ("run.start", {"runId": "r1"}),
        ("run.end", {"runId": "r1", "state": "completed"}),
        ("activity.put", {"headline": "h"}),
    ],
)
async def test_a_read_token_cannot_write(client: httpx.AsyncClient, redis: Redis, method: str, params: dict[str, Any]) -> None:
    err = error(await call(client, method, token="reader", sessionKey="ticket-1", **params), 403, "forbidden")
    assert "operator.write" in err["message"]
    assert await card_keys(redis) == []


async def test_a_token_without_read_scope_cannot_read(client: httpx.AsyncClient, store: CardStore) -> None:
    await store.put(MAIN, CardInput.parse({"markdown": "secret"}))
    response = await call(client, "progressCard.get", token="noscope", sessionKey="ticket-1")
    err = error(response, 403, "forbidden")
    assert "operator.read" in err["message"] and "secret" not in response.text


async def test_a_team_token_cannot_read_or_write_another_session(
    client: httpx.AsyncClient, store: CardStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = Owner(agent_id="main", session_key="other")
    await store.put(other, CardInput.parse({"markdown": "not yours"}))
    calls: list[str] = []
    gw = client.app.state.gateway  # type: ignore[attr-defined]
    for name in ("get", "put", "reset", "view"):
        real = getattr(gw.store, name)

        def spy(*args: Any, _name: str = name, _real: Any = real, **kwargs: Any) -> Any:
            calls.append(_name)
            return _real(*args, **kwargs)

        monkeypatch.setattr(gw.store, name, spy)
    response = await call(client, "progressCard.get", token="team", sessionKey="other")
    err = error(response, 403, "forbidden")
    assert "agent:main:other" in err["message"] and "not yours" not in response.text
    error(await call(client, "progressCard.put", token="team", sessionKey="other", markdown="mine"), 403, "forbidden")
    error(await call(client, "progressCard.reset", token="team", sessionKey="agent:main:other"), 403, "forbidden")
    assert calls == []  # refused before anything was read or written
    card = await store.get(other)
    assert card is not None and card.markdown == "not yours" and card.revision == 1
    # ...while its own sessions are fine, for any agent.
    ok(await call(client, "progressCard.put", token="team", sessionKey="team-a", markdown="ours"))
    ok(await call(client, "progressCard.put", token="team", sessionKey="team-a", agentId="research", markdown="ours"))
    assert ok(await call(client, "progressCard.get", token="team", sessionKey="team-a"))["markdown"] == "ours"


async def test_agent_patterns_match_the_display_key(client: httpx.AsyncClient) -> None:
    ok(await call(client, "progressCard.put", token="research", sessionKey="x", agentId="research", markdown="r"))
    ok(await call(client, "progressCard.get", token="research", sessionKey="agent:research:x"))
    error(await call(client, "progressCard.get", token="research", sessionKey="x"), 403, "forbidden")  # agent main
    # A key that merely contains "agent:research:" belongs to main: not covered.
    error(await call(client, "progressCard.get", token="research", sessionKey="agent:main:agent:research:x"), 403, "forbidden")


# -- malformed requests --------------------------------------------------------


async def post_raw(client: httpx.AsyncClient, content: bytes | Any, **headers: str) -> httpx.Response:
    return await client.post("/v1/rpc", content=content, headers={"Authorization": "Bearer writer", **headers})


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"", "empty"),
        (b"{not json", "not valid JSON"),
        (b'{"method": "hello",}', "not valid JSON"),
        (b"\xff\xfe{}", "UTF-8"),
        (b'{"method": "progressCard.put", "params": {"sessionKey": "a", "expectedRevision": NaN}}', "NaN"),
        (b"[" * 60_000, "nested too deeply"),
    ],
)
async def test_malformed_json_is_400_naming_the_problem(client: httpx.AsyncClient, body: bytes, words: str) -> None:
    err = error(await post_raw(client, body), 400, "invalid_json")
    assert words in err["message"]


@pytest.mark.parametrize(
    ("payload", "code", "words"),
    [
        ([1, 2], "invalid_request", "JSON object"),
        ({"params": {}}, "invalid_request", "method: must be a string"),
        ({"method": 5}, "invalid_request", "method: must be a string"),
        ({"method": "hello", "params": [1]}, "invalid_request", "params: must be a JSON object"),
        ({"method": "hello", "parms": {}}, "invalid_request", "parms: is not a known field"),
        ({"method": "progressCard.delete", "params": {}}, "unknown_method", "progressCard.delete"),
        ({"method": "progressCard.get", "params": {}}, "invalid_params", "sessionKey: is required"),
        ({"method": "progressCard.get", "params": {"sessionKey": 42}}, "invalid_params", "sessionKey: must be a string"),
        ({"method": "progressCard.get", "params": {"sessionKey": "a b"}}, "invalid_params", "sessionKey: must not contain spaces"),
        ({"method": "progressCard.get", "params": {"sessionKey": "a", "agentId": 1}}, "invalid_params", "agentId: must be a string"),
        ({"method": "progressCard.get", "params": {"sessionKey": "a", "plan": []}}, "invalid_params", "plan: is not a known field"),
        ({"method": "progressCard.put", "params": {"sessionKey": "a", "plan": "x"}}, "invalid_params", "plan: must be an array"),
        ({"method": "progressCard.put", "params": {"sessionKey": "a", "markdown": 5}}, "invalid_params", "markdown: must be a string"),
        (
            {"method": "progressCard.put", "params": {"sessionKey": "a", "plan": [{"step": "x", "status": "done"}]}},
            "invalid_params",
            "plan[0].status: must be one of",
        ),
        (
            {"method": "progressCard.put", "params": {"sessionKey": "a", "plan": [{"step": "x", "status": "in_progress"}, {"step": "y", "status": "in_progress"}]}},
            "invalid_params",
            "at most one step may be in_progress",
        ),
        ({"method": "progressCard.put", "params": {"sessionKey": "a", "colour": "red"}}, "invalid_params", "colour: is not a known field"),
    ],
)
async def test_wrong_shapes_are_400_naming_field_and_rule(
    client: httpx.AsyncClient, redis: Redis, payload: Any, code: str, words: str
) -> None:
    err = error(await post_raw(client, json.dumps(payload).encode()), 400, code)
    assert words in err["message"]
    assert await card_keys(redis) == []


def padded(size: int) -> bytes:
    """A valid RPC body of exactly `size` bytes (padding in JSON whitespace)."""
    body = json.dumps({"method": "progressCard.put", "params": {"sessionKey": "big", "markdown": "m"}}).encode()
    return body + b" " * (size - len(body))


async def test_a_body_of_64_kib_is_accepted_and_one_byte_more_is_413(client: httpx.AsyncClient, redis: Redis) -> None:
    ok(await post_raw(client, padded(MAX_BODY)))
    err = error(await post_raw(client, padded(MAX_BODY + 1)), 413, "body_too_large")
    assert "64 KiB" in err["message"]
    assert await CardStore(redis).revision(Owner("main", "big")) == 1


async def test_an_oversized_chunked_body_is_refused_without_a_content_length(client: httpx.AsyncClient) -> None:
    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(20):
            yield b" " * 8192

    response = await post_raw(client, chunks())
    assert "content-length" not in response.request.headers
    error(response, 413, "body_too_large")


async def test_an_oversized_content_length_is_refused_up_front(client: httpx.AsyncClient) -> None:
    err = error(await post_raw(client, b"{}", **{"Content-Length": str(2 * MAX_BODY)}), 413, "body_too_large")
    assert "65536 bytes" in err["message"]
    # Past the largest body any route takes, the app refuses it before the route runs.
    err = error(await post_raw(client, b"{}", **{"Content-Length": str(10 * MAX_BODY)}), 413, "body_too_large")
    assert "262144 bytes" in err["message"]


async def test_an_unauthenticated_caller_learns_nothing_about_its_body(client: httpx.AsyncClient) -> None:
    response = await client.post("/v1/rpc", content=b"{not json")
    error(response, 401, "unauthorized")


async def test_request_ids_are_echoed(client: httpx.AsyncClient) -> None:
    response = await post_raw(client, json.dumps({"id": 7, "method": "hello"}).encode())
    assert response.json()["id"] == 7
    response = await post_raw(client, json.dumps({"id": "a", "method": "nope"}).encode())
    assert response.json()["id"] == "a" and response.json()["ok"] is False


async def test_store_down_is_503() -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True, socket_connect_timeout=0.5)
    app = create_app(gateway_settings(), dead)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        error(await call(c, "progressCard.get", sessionKey="ticket-1"), 503, "unavailable")
    await dead.aclose()


# -- asks and Stop -------------------------------------------------------------------


@pytest.fixture
async def answering(redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    """The gateway with one more token: Ana's, which may read and answer but not write."""
    settings = gateway_settings()
    settings.gateway.tokens.append(GatewayToken(token="ana", name="Ana", scopes=["operator.read", "operator.answer"]))
    app = create_app(settings, redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as c:
        yield c


@pytest.mark.backends
async def test_an_ask_answered_with_an_answer_token_is_what_wait_answer_returns(
    answering: httpx.AsyncClient, store: CardStore
) -> None:
    made = ok(await call(answering, "progressCard.ask", sessionKey="ticket-1", kind="approval", prompt="Deploy?"))
    assert made["options"] == ["Allow", "Deny"] and len(made["askId"]) >= 22
    waiting = ok(await call(answering, "progressCard.waitAnswer", sessionKey="ticket-1", askId=made["askId"], timeoutSeconds=0))
    assert waiting["state"] == "open" and "answer" not in waiting

    first = ok(await call(answering, "progressCard.answer", token="ana", sessionKey="ticket-1", askId=made["askId"], options=["Allow"]))
    assert first["answered"] is True and first["ask"]["answer"]["by"]["name"] == "Ana"
    got = ok(await call(answering, "progressCard.waitAnswer", sessionKey="ticket-1", askId=made["askId"], timeoutSeconds=5))
    assert got["state"] == "answered" and got["answer"]["options"] == ["Allow"]
    assert got["answer"]["by"] == {"platform": "web", "destination": "web", "user": "Ana", "name": "Ana"}

    # A second answer changes nothing and is told the first.
    second = ok(await call(answering, "progressCard.answer", token="ana", sessionKey="ticket-1", askId=made["askId"], options=["Deny"]))
    assert second["answered"] is False and second["ask"]["answer"]["options"] == ["Allow"]
    stored, _ = await store.asks.get(MAIN, made["askId"])
    assert stored is not None and stored.answer is not None and stored.answer.options == ("Allow",)


async def test_wait_answer_returns_as_soon_as_a_chat_answers(answering: httpx.AsyncClient, store: CardStore) -> None:
    from progresscast.model.asks import Actor

    made = ok(await call(answering, "progressCard.ask", sessionKey="ticket-1", kind="text", prompt="Name it?"))
    waiting = asyncio.create_task(
        call(answering, "progressCard.waitAnswer", sessionKey="ticket-1", askId=made["askId"], timeoutSeconds=30)
    )
    started = time.monotonic()
    await store.asks.answer(MAIN, made["askId"], Actor("telegram", "42", "7", "Ana"), text="Heron")
    got = ok(await waiting)
    assert got["state"] == "answered" and got["answer"]["text"] == "Heron" and time.monotonic() - started < 5


async def test_answering_and_stopping_need_the_answer_scope(answering: httpx.AsyncClient, store: CardStore) -> None:
    made = ok(await call(answering, "progressCard.ask", sessionKey="ticket-1", kind="approval", prompt="Deploy?"))
    await store.start_run(MAIN, "r1", stoppable=True)
    for token in ("writer", "reader"):
        err = error(
            await call(answering, "progressCard.answer", token=token, sessionKey="ticket-1", askId=made["askId"], options=["Allow"]),
            403, "forbidden",
        )
        assert "operator.answer" in err["message"]
        error(await call(answering, "run.stop", token=token, sessionKey="ticket-1"), 403, "forbidden")
    error(await call(answering, "progressCard.ask", token="ana", sessionKey="ticket-1", prompt="x", options=["a"]), 403, "forbidden")
    assert ok(await call(answering, "progressCard.asks", token="ana", sessionKey="ticket-1"))[0]["state"] == "open"
    assert await store.asks.stop_mark(MAIN) is None

    stopped = ok(await call(answering, "run.stop", token="ana", sessionKey="ticket-1"))
    assert stopped["stopped"] is True and stopped["stop"]["by"]["name"] == "Ana"
    mark = await store.asks.stop_mark(MAIN, "r1")
    assert mark is not None and mark.by.name == "Ana"
