"""Card owners (docs/owners-and-keys.md): an agent id and a session key, resolved and checked."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from .card import SURROGATE_RULE, CardError, has_lone_surrogate

AGENT_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
DEFAULT_AGENT = "main"
"""`agents.default` and `agents.known` unless configured."""
MAX_SESSION_KEY_CHARS = 200


@dataclass(frozen=True, order=True, slots=True)
class Owner:
    agent_id: str
    session_key: str

    @property
    def display_key(self) -> str:
        return f"agent:{self.agent_id}:{self.session_key}"

    @classmethod
    def from_display_key(cls, display_key: str) -> Owner | None:
        """The owner a stored display key names (None when it is not one)."""
        parts = display_key.split(":", 2)
        if len(parts) != 3 or parts[0] != "agent" or not parts[1] or not parts[2]:
            return None
        return cls(agent_id=parts[1], session_key=parts[2])


def resolve_owner(
    session_key: object,
    agent_id: object = None,
    *,
    known_agents: frozenset[str] | set[str],
    default_agent: str,
    lane: str | None = None,
) -> Owner:
    """Resolve (sessionKey, agentId?) to an owner, or raise CardError naming the field.

    `lane`: the one agent an input writes for (an A2A follower's). Its owner is that
    agent whatever the key says: a key `agent:<lane>:<rest>` is its session `<rest>`,
    and a key naming another agent is taken whole, as a session key of `lane`."""
    if not isinstance(session_key, str):
        raise CardError("sessionKey", "must be a string")
    if agent_id is not None and not isinstance(agent_id, str):
        raise CardError("agentId", "must be a string")
    if has_lone_surrogate(session_key):
        raise CardError("sessionKey", SURROGATE_RULE)
    if agent_id is not None and has_lone_surrogate(agent_id):
        raise CardError("agentId", SURROGATE_RULE)
    if agent_id is not None and not agent_id.strip():
        raise CardError("agentId", "must not be empty (omit it for the default agent)")
    key = session_key.strip()
    if not key:
        raise CardError("sessionKey", "must not be empty")
    if len(key) > MAX_SESSION_KEY_CHARS:
        raise CardError("sessionKey", f"must be at most {MAX_SESSION_KEY_CHARS} characters")
    if any(ch.isspace() or not ch.isprintable() or ch in "{}" for ch in key):
        raise CardError("sessionKey", "must not contain spaces, control characters or braces")
    named = None
    if lane is not None:
        prefix = f"agent:{lane}:"
        if key.startswith(prefix) and len(key) > len(prefix):
            key = key[len(prefix) :]
        named = agent_id = None
    elif key.startswith("agent:"):
        parts = key.split(":", 2)
        if len(parts) != 3 or not parts[1] or not parts[2]:
            raise CardError("sessionKey", "an agent-qualified key must read agent:<agentId>:<rest>")
        named, key = parts[1], parts[2]
    if agent_id is not None and named is not None and agent_id != named:
        raise CardError(
            "agentId", f"'{agent_id}' conflicts with agent '{named}' named in the session key"
        )
    agent = lane or agent_id or named or default_agent
    if agent not in known_agents:
        raise CardError("agentId", f"'{agent}' is not a configured agent")
    return Owner(agent_id=agent, session_key=key)


def session_matches(pattern: str, owner: Owner) -> bool:
    """Does a session pattern (a shell glob, case-sensitive) cover this owner? A pattern
    that starts with `agent:` is matched against the display key, any other against the
    session key; `*` is every session. Gateway tokens and chat grants read them alike."""
    if pattern == "*":  # the common grant: every session (no glob to run per request)
        return True
    if pattern.startswith("agent:"):
        return fnmatchcase(owner.display_key, pattern)
    return fnmatchcase(owner.session_key, pattern)


OPTION_OF = {"sessionKey": "--session", "agentId": "--agent"}
"""The owner's fields as the command line names them."""


def resolve_option_owner(
    session_key: object, agent_id: object = None, *, known_agents: frozenset[str] | set[str], default_agent: str
) -> Owner:
    """`resolve_owner` for `--session` and `--agent`: a CardError names the option."""
    try:
        return resolve_owner(session_key, agent_id, known_agents=known_agents, default_agent=default_agent)
    except CardError as exc:
        raise CardError(OPTION_OF.get(exc.field, exc.field), exc.rule) from None
