"""What every route of one gateway app shares: settings, store, tokens, live events."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from starlette.requests import HTTPConnection

from ..config.settings import Settings
from ..http import errors
from ..http.auth import READ, Tokens, bearer, cookie
from ..http.body import raw_form
from ..http.errors import ApiError
from ..model.owners import Owner, resolve_owner
from ..store.cards import CardStore
from .hub import EventHub


class StreamSlots:
    """Live streams open per token in this process, at most `limit` each: a leaked or
    greedy token cannot hold every connection (and every hub subscription)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: dict[str, int] = {}

    def take(self, token: str) -> None:
        """One slot for `token`, or ApiError 429."""
        held = self._open.get(token, 0)
        if held >= self.limit:
            raise ApiError(
                429, "too_many_streams",
                f"this token already has {held} live event streams open here "
                "(gateway.maxStreamsPerToken); close one and try again",
                headers={"Retry-After": "5"},
            )  # fmt: skip
        self._open[token] = held + 1

    def give_back(self, token: str) -> None:
        held = self._open.get(token, 0) - 1
        if held > 0:
            self._open[token] = held
        else:
            self._open.pop(token, None)


@dataclass
class Gateway:
    settings: Settings
    redis: Any
    store: CardStore
    tokens: Tokens
    hub: EventHub
    heartbeat: float = 15.0
    """Seconds between SSE comments when nothing happens, so dead clients are noticed."""
    streams: StreamSlots = field(default_factory=lambda: StreamSlots(20))
    """The live event streams open per token (`gateway.maxStreamsPerToken`)."""

    def owner(self, session_key: object, agent_id: object = None) -> Owner:
        """Resolve an owner; raises CardError naming `sessionKey` or `agentId`."""
        return resolve_owner(
            session_key,
            agent_id,
            known_agents=self.settings.agents.known_set,
            default_agent=self.settings.agents.default,
        )


def readable_owner(conn: HTTPConnection) -> Owner:
    """The owner named by `?sessionKey=…[&agentId=…]`, checked against the caller's token
    (header or cookie) for `operator.read`. Raises ApiError (401/403/400) or CardError."""
    gw = gateway_of(conn)
    grant = gw.tokens.grant(bearer(conn) or cookie(conn))
    if grant is None:
        raise errors.unauthorized()
    if not grant.can(READ):
        raise errors.missing_scope(READ)
    query = raw_query(conn)
    if "sessionKey" not in query:
        raise ApiError(400, "invalid_params", "sessionKey: is required", field="sessionKey", rule="is required")
    owner = gw.owner(query["sessionKey"], query.get("agentId") or None)
    if not grant.may_touch(owner):
        raise errors.session_forbidden(owner.display_key)
    return owner


# Starlette decodes paths and queries replacing bytes that are not UTF-8 with U+FFFD,
# which would name another session. These keep them as lone surrogates instead, so
# resolving the owner refuses them naming the field.


def raw_path(conn: HTTPConnection) -> str:
    """The request path as sent, percent-decoded."""
    raw: bytes | None = conn.scope.get("raw_path")
    if raw is None:
        return conn.url.path
    return unquote(raw.decode("latin-1"), errors="surrogateescape")


def raw_query(conn: HTTPConnection) -> dict[str, str]:
    """The query parameters as sent (the last of each name wins, as in Starlette)."""
    query: bytes = conn.scope.get("query_string", b"")
    return raw_form(query)


def gateway_of(conn: HTTPConnection) -> Gateway:
    gateway: Gateway = conn.app.state.gateway
    return gateway
