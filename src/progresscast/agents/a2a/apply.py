"""Applying A2A updates through the store's one write path (store/cards.py, store/scripts.py).

The order is kept twice per owner: an update's plan applies when its `status.timestamp`
is newer than that of the last update whose plan was applied, its status (state,
message, attention, run) when newer than that of the last update applied at all
(microseconds; an equal one is a duplicate). So any arrival order of a set of updates
ends on the plan of the newest update that carried a valid one and on the newest status.
The checks and the writes are one script, so two followers racing (or a follower and a
push) can never apply an older plan last; the timestamps survive resets and runs.

An update is refused (`future`) when its timestamp is more than `a2a.maxClockSkew` ahead
of the store's clock, so one wrong clock cannot freeze a card; and (`reset`) when the
card was reset after it arrived, as every write is. Without a timestamp an update
applies in arrival order when it comes from a live stream and is ignored from anywhere
else (a snapshot, a push, a file). Artifact text applies in stream order to the answer
of the task whose run is current.

Every card written belongs to the follower's own agent: a context id `agent:<id>:…`
names a session of that agent only when `<id>` is the follower's agent, and is a plain
session key otherwise — it never selects another agent's card.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from enum import StrEnum

from redis.asyncio import Redis

from ... import metrics
from ...config.settings import Settings
from ...failure_log import Once
from ...model.card import CardInput
from ...model.owners import Owner, resolve_owner
from ...store import keys
from ...store.cards import CardStore, StatusWrite
from .mapping import AnswerChunk, Kind, StatusChange, Update

log = logging.getLogger("progresscast.agents.a2a")

MAX_CLOCK_SKEW = 300.0
"""Seconds a timestamp may be ahead of the store's clock (`a2a.maxClockSkew`)."""


class Source(StrEnum):
    stream = "stream"      # SendStreamingMessage / SubscribeToTask, in arrival order
    poll = "poll"          # GetTask / ListTasks
    push = "push"          # POST /v1/a2a/push
    file = "file"          # a2a ingest


class Outcome(StrEnum):
    applied = "applied"
    stale = "stale"            # older than what was applied, or for a task that is not current
    duplicate = "duplicate"    # the same timestamp as the last one applied
    untimed = "untimed"        # no timestamp, and not from a live stream
    future = "future"          # a timestamp too far ahead of the store's clock
    reset = "reset"            # the card was reset after the update arrived


@dataclass(frozen=True)
class Applied:
    outcome: Outcome
    owner: Owner
    plan_problem: str | None = None


class UpdateApplier:
    """Applies mapped A2A updates to the cards of one agent (the follower's: `agent_id`,
    else the default agent)."""

    def __init__(
        self,
        redis: Redis,
        *,
        agent_id: str | None,
        known_agents: frozenset[str],
        default_agent: str,
        events_maxlen: int = keys.EVENTS_MAXLEN,
        max_clock_skew: float = MAX_CLOCK_SKEW,
    ) -> None:
        self.redis = redis
        self.agent_id = agent_id or default_agent
        self.known_agents = known_agents
        self.default_agent = default_agent
        self.max_clock_skew = max_clock_skew
        self.store = CardStore(redis, events_maxlen=events_maxlen, metrics=False)
        self._once = Once()
        """Task problems logged already: once per task."""

    @classmethod
    def configured(cls, redis: Redis, agent_id: str | None, settings: Settings) -> UpdateApplier:
        """An applier with the configuration's agents and clock skew."""
        return cls(
            redis,
            agent_id=agent_id,
            known_agents=settings.agents.known_set,
            default_agent=settings.agents.default,
            max_clock_skew=settings.a2a.maxClockSkew,
        )

    def owner_of(self, update: Update) -> Owner:
        """The card an update belongs to: its context (else its task), of our agent
        whatever the context id says."""
        return resolve_owner(
            update.session_key,
            known_agents=self.known_agents,
            default_agent=self.default_agent,
            lane=self.agent_id,
        )

    async def apply(
        self, update: Update, source: Source, *, arrived: float | None = None, stoppable: bool = False
    ) -> Applied:
        """Apply one update; `arrived` (a `time.monotonic()` reading) is when it came in;
        `stoppable`: the caller cancels the task when Stop is pressed (a run it starts offers Stop)."""
        if arrived is None:
            arrived = time.monotonic()
        owner = self.owner_of(update)
        if isinstance(update, AnswerChunk):
            outcome = await self.store.apply_answer(
                owner,
                task_id=update.task_id,
                artifact_id=update.artifact_id,
                text=update.text,
                append=update.append,
                last_chunk=update.last_chunk,
            )
            applied = Applied(Outcome(outcome), owner)
        else:
            applied = await self._apply_status(owner, update, source, arrived, stoppable)
        metrics.A2A_UPDATES.labels(applied.outcome.value).inc()
        return applied

    async def _apply_status(
        self, owner: Owner, change: StatusChange, source: Source, arrived: float, stoppable: bool
    ) -> Applied:
        # `a2a ingest` names each line's problem itself: the log is for the other sources.
        if change.plan_problem and source is not Source.file and self._once.first(("plan", change.task_id)):
            log.warning("A2A task %r: plan not applied: %r", change.task_id, change.plan_problem)
        if change.demoted and self._once.first(("demoted", change.task_id)):
            log.info("A2A task %r: %d more active steps shown as pending", change.task_id, change.demoted)
        if change.timestamp_us is None and (source is not Source.stream or change.kind is Kind.snapshot):
            return Applied(Outcome.untimed, owner, change.plan_problem)
        write = StatusWrite(
            task_id=change.task_id,
            timestamp_us=change.timestamp_us,
            plan=None if change.plan is None else CardInput(plan=list(change.plan)),
            headline=change.headline,
            attention=change.attention,
            ended=change.run_end,
            stoppable=stoppable,
        )
        outcome = await self.store.apply_status(owner, write, arrived=arrived, max_skew=self.max_clock_skew)
        if outcome == Outcome.future and self._once.first(("future", change.task_id)):
            log.warning(
                "A2A task %r: status timestamp more than %g s ahead of the store's clock: refused",
                change.task_id, self.max_clock_skew,
            )
        return Applied(Outcome(outcome), owner, change.plan_problem)
