"""Who is asking, and what they may touch (`[[gateway.tokens]]`, docs/http-api.md).

A request carries a token either as `Authorization: Bearer <token>` (API clients)
or in the `progresscast_token` cookie (the web page, and the EventSource and
fetches it makes). The RPC endpoint takes the header, and the cookie only for the
page's own buttons (`page_token`): PAGE_METHODS, sent by the page's script with the
header `X-Progresscast: 1` from this origin — a cross-site form cannot set that
header, a cross-origin script cannot send it without a CORS preflight nobody
answers, and the cookie is `SameSite=Strict` besides (docs/security.md).

Session patterns are shell globs (`fnmatch`, case-sensitive). A pattern that starts
with `agent:` is matched against the owner's display key `agent:<agentId>:<key>`, so
it can pin the agent; any other pattern is matched against the plain session key,
for every agent. So `team-*` covers `team-a` of any agent, and
`agent:research:*` covers every session of the `research` agent only.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import HTTPConnection

from ..config.errors import ConfigError
from ..config.gateway import ADMIN_SCOPE, ANSWER_SCOPE, MIN_TOKEN_CHARS, READ_SCOPE, WRITE_SCOPE, GatewayToken
from ..config.settings import Settings
from ..model.owners import Owner, session_matches

READ = READ_SCOPE
WRITE = WRITE_SCOPE
ANSWER = ANSWER_SCOPE
COOKIE = "progresscast_token"


@dataclass(frozen=True)
class Grant:
    """What one valid token allows."""

    scopes: frozenset[str]
    sessions: tuple[str, ...]
    name: str = "web"
    """Who holds the token: how an answer or a Stop given with it is signed."""

    def can(self, scope: str) -> bool:
        return scope in self.scopes or ADMIN_SCOPE in self.scopes

    def may_touch(self, owner: Owner) -> bool:
        return any(session_matches(pattern, owner) for pattern in self.sessions)


class Tokens:
    """The configured tokens, compared in constant time."""

    def __init__(self, tokens: list[GatewayToken]) -> None:
        # A token whose `env:NAME` was unset loads as "": it must never match anything.
        self._tokens = [
            (t.token.encode(), Grant(frozenset(t.scopes), tuple(t.sessions), t.name or "web"))
            for t in tokens
            if t.token
        ]

    @classmethod
    def from_settings(cls, settings: Settings) -> Tokens:
        return cls(settings.gateway.tokens)

    def __bool__(self) -> bool:
        return bool(self._tokens)

    def any_grants(self, scope: str, owner: Owner) -> bool:
        """Does some configured token have `scope` for `owner`?"""
        return any(grant.can(scope) and grant.may_touch(owner) for _, grant in self._tokens)

    def grant(self, token: str | None) -> Grant | None:
        if not token:
            return None
        given = token.encode()
        found = None
        # Compare against every token (no early exit) so timing does not tell which matched.
        for secret, grant in self._tokens:
            if hmac.compare_digest(secret, given) and found is None:
                found = grant
        return found


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False  # a name: it may resolve to anything


def check_token_strength(settings: Settings, listen: str) -> list[str]:
    """Tokens shorter than MIN_TOKEN_CHARS: a ConfigError naming the first when `listen`
    (host:port) reaches beyond loopback, else one warning per short token, returned."""
    host = listen.rpartition(":")[0] or "127.0.0.1"
    short = [
        (f"gateway.tokens[{i}].token", len(t.token)) for i, t in enumerate(settings.gateway.tokens)
        if t.token and len(t.token) < MIN_TOKEN_CHARS
    ]  # fmt: skip
    metrics = settings.gateway.metricsToken
    if metrics and len(metrics) < MIN_TOKEN_CHARS:
        short.append(("gateway.metricsToken", len(metrics)))
    if short and not is_loopback(host):
        where, n = short[0]
        raise ConfigError(
            f"{where}: {n} characters is too short to listen on {listen} (beyond loopback); "
            f"use at least {MIN_TOKEN_CHARS} (e.g. openssl rand -hex 24)"
        )
    return [
        f"{where}: {n} characters is short (at least {MIN_TOKEN_CHARS} are required beyond loopback)"
        for where, n in short
    ]


def bearer(conn: HTTPConnection) -> str | None:
    header = conn.headers.get("authorization", "")
    scheme, _, value = header.partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip() or None


def cookie(conn: HTTPConnection) -> str | None:
    return conn.cookies.get(COOKIE) or None


PAGE_HEADER = "x-progresscast"
"""The header the page's script sends with an RPC call made with the cookie."""
PAGE_METHODS = frozenset({"progressCard.answer", "run.stop"})
"""The RPC methods the cookie may call: the web card's buttons, nothing else."""


def same_origin(conn: HTTPConnection) -> bool:
    """Does the browser say this request comes from a page of this origin
    (`Sec-Fetch-Site: same-origin`; where a browser does not send that, an `Origin`, if
    any, naming this host)? A form or script on another site is refused."""
    site = conn.headers.get("sec-fetch-site")
    if site is not None:
        return site == "same-origin"
    origin = conn.headers.get("origin")
    return origin is None or urlsplit(origin).netloc == conn.headers.get("host", "")


def page_token(conn: HTTPConnection) -> str | None:
    """The cookie's token for an RPC call from the page's own script: it sends
    `X-Progresscast: 1` and comes from this origin (`same_origin`). None otherwise: the
    cookie is not a credential here."""
    if conn.headers.get(PAGE_HEADER) != "1" or not same_origin(conn):
        return None
    return cookie(conn)
