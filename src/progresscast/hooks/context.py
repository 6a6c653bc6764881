"""What every agent hook shares: the store, the owner, and never failing the agent.

A hook runs inside the agent's loop, so it must be quick and must not fail: Redis is
given `HOOK_TIMEOUT` to answer, and any trouble is one line on stderr — the caller
exits 0 whatever happened. The first call may start the embedded Redis; later calls
find it running.
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Sequence

from redis.asyncio import Redis

from ..card import Step
from ..config import Settings, load_settings
from ..connections import connect_quick, redis_url
from ..harness_plan import HarnessPlan
from ..owners import Owner, resolve_owner
from ..plan_update import replace_plan
from ..sinks import StoreSink
from ..store import CardStore
from ..view import RunState


class HookContext:
    def __init__(self, harness: str, args: argparse.Namespace) -> None:
        self.harness = harness
        self.args = args
        self._settings: Settings | None = None
        self._redis: Redis | None = None

    # -- reporting ----------------------------------------------------------------

    def warn(self, message: str) -> None:
        print(f"progresscast hook {self.harness}: {message}", file=sys.stderr, flush=True)

    # -- the store and the owner -----------------------------------------------------

    @property
    def settings(self) -> Settings:
        if self._settings is None:
            self._settings = load_settings(self.args.config)
        return self._settings

    @property
    def store(self) -> CardStore:
        if self._redis is None:
            self._redis = connect_quick(redis_url(self.args.redis, self.settings))
            self._store = CardStore(self._redis)
        return self._store

    @property
    def redis(self) -> Redis:
        return self.store.redis

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    def owner(self, session_id: object) -> Owner:
        """`--session` if given, else the agent's own session id; `--agent` or the default."""
        return resolve_owner(
            self.args.session or session_id,
            self.args.agent,
            known_agents=self.settings.agents.known_set,
            default_agent=self.settings.agents.default,
        )

    # -- what hooks do ------------------------------------------------------------------

    async def write_plan(
        self, owner: Owner, plan: HarnessPlan | Sequence[Step], *, headline: str | None = None
    ) -> None:
        """The harness's plan as the card's plan (the note is kept); `headline` ''
        removes the status headline, None leaves it."""
        steps = plan.steps if isinstance(plan, HarnessPlan) else plan
        await replace_plan(StoreSink(self.store, owner), steps)
        if headline is not None:
            await self.store.update_activity(owner, headline=headline)

    async def start_run(self, owner: Owner, run_id: str | None = None) -> str:
        run_id = run_id or uuid.uuid4().hex
        await self.store.start_run(owner, run_id)
        return run_id

    async def end_active_run(self, owner: Owner, state: RunState) -> bool:
        """End whatever run is active for the owner (hooks run in separate processes, so
        the run id is read back from the store)."""
        view = await self.store.view(owner)
        if view.run is not RunState.active or view.run_id is None:
            return False
        return await self.store.end_run(owner, view.run_id, state)
