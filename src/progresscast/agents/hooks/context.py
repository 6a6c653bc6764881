"""What every agent hook shares: the store, the owner, and never failing the agent.

A hook runs inside the agent's loop, so it must be quick and must not fail: a store
that is down is given up on at once and one that is silent after a short wait
(`HOOK_CONNECT_TIMEOUT`, `HOOK_ANSWER_TIMEOUT`), and any trouble is one line on stderr —
the caller exits 0 whatever happened. The first call may start the embedded Redis; later calls
find it running.

Quick means importing little: a hook is a new process on every agent event, and most
of its time is Python importing. So it imports no more than it uses (no gateway, no
renderers, no metrics), and without a config file it does not load the settings at all:
it needs four of them, whose defaults it knows.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from redis.asyncio import Redis

from ...model.card import CardError, Step
from ...model.owners import DEFAULT_AGENT, Owner, resolve_option_owner
from ...model.timing import Usage
from ...model.view import RunState, View
from ...store.cards import CardStore
from ...store.connections import choose_url, connect_quick
from ..harness_plan import HarnessPlan
from .client import DEFAULT_WAIT


@dataclass(frozen=True)
class HookSettings:
    """The settings a hook uses; the defaults are the config's own (a test checks)."""

    store_url: str | None = None
    shards: int | None = None
    known_agents: frozenset[str] = frozenset({DEFAULT_AGENT})
    default_agent: str = DEFAULT_AGENT


def hook_settings(path: str | None) -> HookSettings:
    """The config file's settings (`path`, else PROGRESSCAST_CONFIG), else the defaults
    without building the settings models (a tenth of a hook call)."""
    path = path or os.environ.get("PROGRESSCAST_CONFIG")
    if not path:
        return HookSettings()
    from ...config.load import load_settings

    settings = load_settings(path)
    return HookSettings(settings.store.url, settings.store.shards, settings.agents.known_set, settings.agents.default)


class HookContext:
    def __init__(self, harness: str, args: argparse.Namespace) -> None:
        self.harness = harness
        self.args = args
        self._settings: HookSettings | None = None
        self._redis: Redis | None = None
        self.arrived = time.monotonic()
        """When the hook call came in: a reset of the card from then on refuses its writes."""

    # -- reporting ----------------------------------------------------------------

    def warn(self, message: str) -> None:
        print(f"progresscast hook {self.harness}: {message}", file=sys.stderr, flush=True)

    # -- the store and the owner -----------------------------------------------------

    @property
    def settings(self) -> HookSettings:
        if self._settings is None:
            self._settings = hook_settings(self.args.config)
        return self._settings

    @property
    def store(self) -> CardStore:
        if self._redis is None:
            url = choose_url(self.args.redis, self.settings.store_url)
            self._redis = connect_quick(url, self.settings.shards)
            self._store = CardStore(self._redis, metrics=False)
        return self._store

    @property
    def redis(self) -> Redis:
        return self.store.redis

    async def close(self) -> None:
        if self._redis is not None:
            await self._redis.aclose()

    def owner(self, session_id: object, field: str = "session_id") -> Owner:
        """`--session` if given, else the agent's own session id (the event's `field`);
        `--agent` or the default. A CardError names what the user would mend: the option,
        or the event's field."""
        if not self.args.session and session_id is None:
            raise CardError(field, "missing from the event (or pass --session KEY)")
        try:
            return resolve_option_owner(
                self.args.session or session_id,
                self.args.agent,
                known_agents=self.settings.known_agents,
                default_agent=self.settings.default_agent,
            )
        except CardError as exc:
            if exc.field == "--session" and not self.args.session:
                raise CardError(field, exc.rule) from None
            raise

    # -- what hooks do ------------------------------------------------------------------

    async def write_plan(
        self,
        owner: Owner,
        plan: HarnessPlan | Sequence[Step],
        *,
        headline: str | None = None,
        arrived: float | None = None,
    ) -> None:
        """The harness's plan as the card's plan (the note is kept); `headline` ''
        removes the status headline, None leaves it. Admitted by `arrived` (default:
        when the hook call came in)."""
        steps = plan.steps if isinstance(plan, HarnessPlan) else plan
        await self.store.put_plan(owner, steps, arrived=self.arrived if arrived is None else arrived)
        if headline is not None:
            await self.store.update_activity(owner, headline=headline)

    @property
    def wait(self) -> float:
        """Seconds a hook that asks in chat waits for the answer (`--wait`)."""
        return float(getattr(self.args, "wait", None) or DEFAULT_WAIT)

    async def start_run(self, owner: Owner, run_id: str | None = None, *, stoppable: bool = False) -> str:
        """`stoppable`: this hook acts on a Stop pressed in chat, so chats offer one."""
        run_id = run_id or uuid.uuid4().hex
        await self.store.start_run(owner, run_id, stoppable=stoppable)
        return run_id

    async def end_active_run(
        self, owner: Owner, state: RunState, usage_of: Callable[[View], Usage | None] | None = None
    ) -> bool:
        """End whatever run is active for the owner (hooks run in separate processes, so
        the run id is read back from the store), with what `usage_of` says it used."""
        view = await self.store.view(owner)
        if view.run is not RunState.active or view.run_id is None:
            return False
        usage = usage_of(view) if usage_of is not None else None
        return await self.store.end_run(owner, view.run_id, state, usage=usage)
