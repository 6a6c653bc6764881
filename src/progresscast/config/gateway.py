"""`[gateway]`: the HTTP gateway's address, its tokens and what it trusts."""

from __future__ import annotations

import ipaddress
import re

from pydantic import Field, field_validator

from .base import EnvSecret, _from_env, _Model

READ_SCOPE = "operator.read"
WRITE_SCOPE = "operator.write"
ANSWER_SCOPE = "operator.answer"
"""Answer an agent's asks and stop its runs (the web card's buttons, `progressCard.answer`, `run.stop`)."""
ADMIN_SCOPE = "operator.admin"
"""Every other scope."""
SCOPES = (READ_SCOPE, WRITE_SCOPE, ANSWER_SCOPE, ADMIN_SCOPE)


class GatewayToken(_Model):
    token: str
    name: str | None = None
    """Who holds it: how an answer or a Stop given with it is signed (default `web`)."""
    scopes: list[str] = Field(default_factory=lambda: [READ_SCOPE])
    sessions: list[str] = Field(default_factory=lambda: ["*"])

    @field_validator("scopes")
    @classmethod
    def _scopes(cls, value: list[str]) -> list[str]:
        for scope in value:
            if scope not in SCOPES:
                raise ValueError(f"{scope!r} is not a scope; the scopes are {', '.join(SCOPES)}")
        return value

    @field_validator("token")
    @classmethod
    def _token(cls, value: str) -> str:
        return _from_env(value) or ""


MIN_TOKEN_CHARS = 16
"""Gateway tokens shorter than this are refused when the gateway listens beyond loopback."""


class GatewaySettings(_Model):
    listen: str = "127.0.0.1:8787"
    tokens: list[GatewayToken] = Field(default_factory=list)
    publicUrl: str | None = None
    """The address people open (`https://cards.example.org`); https here marks the login
    cookie `Secure` even when a proxy on another host terminates TLS."""
    trustedProxies: list[str] | None = None
    """Addresses (or networks) whose `X-Forwarded-Proto` / `X-Forwarded-For` are believed;
    unset: uvicorn's default (`$FORWARDED_ALLOW_IPS`, else loopback)."""
    metricsToken: EnvSecret = None
    """Set: `GET /metrics` needs `Authorization: Bearer <it>`; unset: open."""
    maxStreamsPerToken: int = Field(20, ge=1, le=100_000)
    """Live event streams (`/v1/events`) one token may hold open at once; more are 429."""
    headerTimeout: float = Field(10.0, gt=0, le=3600)
    """Seconds a connection has, from its start or its previous answer's data, to send a
    request's whole head; then it is closed."""
    bodyTimeout: float = Field(30.0, gt=0, le=3600)
    """Seconds a request has, after its head, to send its whole body (a deadline, not a
    pause between bytes); then the connection is closed."""
    idleTimeout: float = Field(5.0, gt=0, le=300)
    """Seconds an answered keep-alive connection may stay idle before it is closed."""
    maxConnections: int = Field(1000, ge=1, le=1_000_000)
    """Open connections at once (live streams included); one more is answered 503 and
    closed at once."""

    @field_validator("trustedProxies")
    @classmethod
    def _trusted(cls, value: list[str] | None) -> list[str] | None:
        for entry in value or []:
            if entry != "*":
                try:
                    ipaddress.ip_network(entry, strict=False)
                except ValueError:
                    raise ValueError(f"{entry!r} must be an IP address, a network (10.0.0.0/8) or *") from None
        return value

    @field_validator("publicUrl")
    @classmethod
    def _public_url(cls, value: str | None) -> str | None:
        if value is not None and not re.match(r"https?://[^\s/]+", value):
            raise ValueError(f"{value!r} must be an http(s) URL, e.g. https://cards.example.org")
        return value

    @property
    def public_https(self) -> bool:
        return (self.publicUrl or "").lower().startswith("https://")

    @field_validator("listen")
    @classmethod
    def _listen(cls, value: str) -> str:
        _, colon, port = value.rpartition(":")
        if not colon or not port.isdigit() or int(port) > 65535:
            raise ValueError(f"{value!r} must read host:port, e.g. 127.0.0.1:8787")
        return value

    @property
    def host_port(self) -> tuple[str, int]:
        host, _, port = self.listen.rpartition(":")
        return host or "127.0.0.1", int(port)
