"""`[agents]` and `[a2a]`: whose cards a store holds, and the A2A agents `serve` follows."""

from __future__ import annotations

from pydantic import Field, field_validator

from ..model.owners import AGENT_ID, DEFAULT_AGENT
from .base import _Model


def _agent_id(value: str) -> str:
    # Agent ids go into Redis hash tags and display keys (`agent:<id>:<key>`).
    if not AGENT_ID.fullmatch(value):
        raise ValueError(
            f"agent id {value!r} must be 1-64 letters, digits, '_', '.' or '-', starting with a letter or digit"
        )
    return value


class AgentSettings(_Model):
    default: str = DEFAULT_AGENT
    known: list[str] = Field(default_factory=lambda: [DEFAULT_AGENT])

    @field_validator("default")
    @classmethod
    def _default(cls, value: str) -> str:
        return _agent_id(value)

    @field_validator("known")
    @classmethod
    def _known(cls, value: list[str]) -> list[str]:
        return [_agent_id(v) for v in value]

    @property
    def known_set(self) -> frozenset[str]:
        return frozenset(self.known) | {self.default}


class A2AAgentSettings(_Model):
    """One A2A agent `serve` follows (`[[a2a.agents]]`)."""

    url: str
    agentId: str | None = None
    """The cards' agent id (default: `agents.default`)."""
    contexts: list[str] = Field(default_factory=lambda: ["*"])
    """Context ids to follow; `*` (or any glob pattern) follows every matching context."""
    allowedHosts: list[str] = Field(default_factory=list)
    """Hosts (`host` or `host:port`) the agent's card may name for its interfaces besides
    the origin of `url`; by default a card pointing anywhere else is refused."""

    @field_validator("agentId")
    @classmethod
    def _agent(cls, value: str | None) -> str | None:
        return None if value is None else _agent_id(value)


class A2ASettings(_Model):
    agents: list[A2AAgentSettings] = Field(default_factory=list)
    pollSeconds: float = Field(5.0, gt=0, le=3600)
    """How often ListTasks is asked for tasks that changed."""
    backoffMaxSeconds: float = Field(30.0, gt=0, le=3600)
    """The longest wait before trying an agent (or a dropped stream) again."""
    maxClockSkew: float = Field(300.0, ge=0, le=86_400)
    """Seconds a status timestamp may be ahead of the store's clock; later ones are refused."""
    idleTimeout: float = Field(120.0, gt=0, le=86_400)
    """Seconds a task's stream may bring no event before it is subscribed to again; also
    the longest wait for any answer of an agent."""
    maxTasks: int = Field(100, ge=1, le=100_000)
    """Tasks of one agent subscribed to at once; more are followed by ListTasks alone."""
