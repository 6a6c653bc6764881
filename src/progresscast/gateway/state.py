"""What every route of one gateway app shares: settings, store, tokens, live events."""

from __future__ import annotations

from dataclasses import dataclass

from redis.asyncio import Redis
from starlette.requests import HTTPConnection

from ..config import Settings
from ..owners import Owner, resolve_owner
from ..store import CardStore
from .auth import Tokens
from .hub import EventHub


@dataclass
class Gateway:
    settings: Settings
    redis: Redis
    store: CardStore
    tokens: Tokens
    hub: EventHub
    heartbeat: float = 15.0
    """Seconds between SSE comments when nothing happens, so dead clients are noticed."""

    def owner(self, session_key: object, agent_id: object = None) -> Owner:
        """Resolve an owner; raises CardError naming `sessionKey` or `agentId`."""
        return resolve_owner(
            session_key,
            agent_id,
            known_agents=self.settings.agents.known_set,
            default_agent=self.settings.agents.default,
        )


def gateway_of(conn: HTTPConnection) -> Gateway:
    return conn.app.state.gateway
