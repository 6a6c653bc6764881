"""`serve` follows the agents of `[[a2a.agents]]`: every live task of the contexts
configured, for as long as `serve` runs.

Each agent is asked with ListTasks (`statusTimestampAfter` = the newest status seen)
every `a2a.pollSeconds`, and each live task is subscribed to. An agent that goes
away is tried again with backoff; when it is back, following resumes. Each agent and
each context is followed by a supervised task (supervise.py): whatever fails in one
(Redis gone mid-write included) is logged and that one starts again; the others, and
the rest of `serve`, go on. The newest
timestamp seen is kept in Redis, so after a restart only what changed since is
listed — and the per-card ordering (also in Redis) applies nothing older anyway.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from fnmatch import fnmatchcase
from functools import partial

from redis.asyncio import Redis

from ...backoff import Backoff, Retrying
from ...config.agents import A2AAgentSettings
from ...config.settings import Settings
from ...store import keys
from ...supervise import supervise
from .apply import UpdateApplier
from .follow import AgentUnavailable, ContextCursor, Follower, Pacing, agent_client

log = logging.getLogger("progresscast.agents.a2a")

GLOB = set("*?[")


class RedisCursor(ContextCursor):
    """The newest status timestamp seen from one agent (and context), kept in Redis."""

    def __init__(self, redis: Redis, key: str) -> None:
        super().__init__()
        self.redis = redis
        self.key = key

    async def load(self) -> str | None:
        value = await self.redis.get(self.key)
        return value.decode() if isinstance(value, bytes) else value

    async def seen(self, timestamp: str | None) -> None:
        self._value = await self.load()
        await super().seen(timestamp)

    async def store(self, timestamp: str) -> None:
        await self.redis.set(self.key, timestamp)


def agent_key(agent: A2AAgentSettings, settings: Settings) -> str:
    digest = hashlib.sha256(agent.url.encode()).hexdigest()[:16]
    return f"{agent.agentId or settings.agents.default}:{digest}"


def pacing_of(settings: Settings) -> Pacing:
    poll = settings.a2a.pollSeconds
    return Pacing(
        backoff=Backoff(min(0.5, poll), settings.a2a.backoffMaxSeconds),
        safety_poll=max(poll, 30.0),
        list_poll=poll,
        idle_timeout=settings.a2a.idleTimeout,
        max_tasks=settings.a2a.maxTasks,
    )


async def follow_agents(settings: Settings, redis: Redis) -> None:
    """Follow every configured agent until cancelled."""
    agents = []
    for agent in settings.a2a.agents:
        if agent.agentId is not None and agent.agentId not in settings.agents.known_set:
            log.error("a2a.agents: agentId '%s' is not a configured agent; not following %s", agent.agentId, agent.url)
            continue
        agents.append(agent)
    backoff = pacing_of(settings).backoff
    async with asyncio.TaskGroup() as group:
        for agent in agents:
            group.create_task(
                supervise(partial(follow_agent, agent, settings, redis), f"following the A2A agent {agent.url}",
                          backoff=backoff)
            )


async def follow_agent(agent: A2AAgentSettings, settings: Settings, redis: Redis) -> None:
    pacing = pacing_of(settings)
    applier = UpdateApplier.configured(redis, agent.agentId, settings)
    base = agent_key(agent, settings)
    # %r: the reason may carry what the agent sent.
    retry = Retrying(
        "A2A: lost the agent", log=log, backoff=pacing.backoff, level=logging.INFO, describe=lambda exc: repr(str(exc))
    )

    async def follow() -> None:
        connecting = agent_client(agent.url, idle_timeout=pacing.idle_timeout, allowed_hosts=agent.allowedHosts)
        async with connecting as client:
            log.info("A2A: following %s (contexts %s)", agent.url, ", ".join(agent.contexts))
            retry.succeeded()
            follower = Follower(client, applier, pacing=pacing)
            try:
                await _follow_contexts(follower, agent, redis, base)
            finally:
                await follower.close()

    while True:
        await retry.run(follow, retry_on=(AgentUnavailable,))


async def _follow_contexts(follower: Follower, agent: A2AAgentSettings, redis: Redis, base: str) -> None:
    patterns = agent.contexts or ["*"]
    if any(GLOB & set(p) for p in patterns):
        cursor = RedisCursor(redis, keys.a2a_agent_cursor(base))

        def accept(context_id: str) -> bool:
            return any(fnmatchcase(context_id, p) for p in patterns)

        await follower.follow_context(None, cursor=cursor, accept=accept)
        return
    backoff = follower.pacing.backoff
    async with asyncio.TaskGroup() as group:
        for context_id in patterns:
            cursor = RedisCursor(redis, keys.a2a_agent_cursor(f"{base}:{context_id}"))
            job = partial(follower.follow_context, context_id, cursor=cursor)
            what = f"following the A2A context {context_id!r} of {agent.url}"
            group.create_task(supervise(job, what, backoff=backoff))
