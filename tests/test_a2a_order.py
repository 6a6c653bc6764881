"""A2A order kept twice per owner: the plan by the timestamps of the updates that
carried a valid plan, the status (state, message, attention, run) by every update's.
Plus the A2A lane: no timestamp from far ahead of the store's clock, no other agent's
card whatever the context id says."""

from __future__ import annotations

import io
import itertools
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from a2a_updates import snapshot, status, steps, ts
from progresscast.agents.a2a.apply import Outcome, Source, UpdateApplier
from progresscast.agents.a2a.ingest import ingest_lines
from progresscast.agents.a2a.mapping import parse_update
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore

# what these guard differs by backend (Lua scripts, one slot per owner on Cluster)
pytestmark = pytest.mark.backends

AGENTS = frozenset({"main", "research"})
_contexts = itertools.count()


def applier(redis: Redis, agent: str | None = None, *, skew: float = 300.0) -> UpdateApplier:
    return UpdateApplier(redis, agent_id=agent, known_agents=AGENTS, default_agent="main", max_clock_skew=skew)


async def apply(a: UpdateApplier, data: dict[str, Any], source: Source = Source.file) -> Outcome:
    update = parse_update(data)
    assert update is not None
    return (await a.apply(update, source)).outcome


def at(clock: str) -> str:
    return f"2026-12-01T{clock}Z"


# -- a newer update without a plan never makes an older plan stale ------------------------


async def test_a_plan_that_arrives_after_a_newer_planless_status_is_shown(redis: Redis, store: CardStore) -> None:
    """A push redelivered late: its plan is older than a status without one. (In-process:
    `a2a ingest` reads its lines with the same `ingest_lines`, see test_a2a_ingest.)"""
    lines = [
        json.dumps(status("t1", at=at("09:12:49"), text="Still working")),
        json.dumps(status("t1", at=at("09:12:44"), plan=steps(3, 1))),
    ]
    errors = io.StringIO()
    tally = await ingest_lines(lines, applier(redis), errors=errors)
    assert tally.applied == 2, (tally.summary(), errors.getvalue())
    card = await store.get(Owner("main", "ctx-1"))
    assert card is not None and [s.status.value for s in card.plan or []] == ["completed", "in_progress", "pending"]


async def test_plan_and_status_keep_their_own_order(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    owner = Owner("main", "ctx-1")
    assert await apply(a, status("t1", "TASK_STATE_INPUT_REQUIRED", at=ts(9), text="Which file?")) is Outcome.applied
    assert await apply(a, status("t1", at=ts(5), plan=steps(2, 1), text="old status")) is Outcome.applied
    view = await store.view(owner)
    assert view.card is not None and len(view.card.plan or []) == 2
    # the status stays the newest one's: the older update brought only its plan
    assert view.activity.attention == "Waiting for input: Which file?" and view.activity.headline == "Which file?"
    # the same plan again is a duplicate; an older plan is stale
    assert await apply(a, status("t1", at=ts(5), plan=steps(2, 1))) is Outcome.duplicate
    assert await apply(a, status("t1", at=ts(4), plan=steps(4, 0))) is Outcome.stale
    # a malformed plan orders nothing: an older valid plan still lands after it
    bad = status("t1", at=ts(8), plan=[{"label": "x", "state": "exploded"}])
    assert (await a.apply(parse_update(bad), Source.file)).outcome is Outcome.stale  # its status is older than 9
    assert await apply(a, status("t1", at=ts(6), plan=steps(5, 2))) is Outcome.applied
    assert len((await store.get(owner)).plan or []) == 5


# -- any arrival order ends on the sorted order's card ----------------------------------------


def updates(context: str) -> list[str]:
    """A context's updates as lines: plans, plan-less statuses, a malformed plan, a
    second task, repeats; each distinct update has its own timestamp."""
    made = [
        status("t1", "TASK_STATE_SUBMITTED", at=ts(1), context=context),
        status("t1", at=ts(2), plan=steps(4, 0), text="Reading", context=context),
        status("t1", at=ts(3), text="Still reading", context=context),
        status("t1", at=ts(4), plan=steps(4, 1), context=context),
        status("t1", at=ts(5), plan=[{"label": "x", "state": "exploded"}], text="Odd plan", context=context),
        status("t1", "TASK_STATE_INPUT_REQUIRED", at=ts(6), text="Which file?", context=context),
        status("t1", at=ts(7), plan=steps(4, 2), context=context),
        snapshot("t1", "TASK_STATE_COMPLETED", at=ts(8), context=context),
        status("t2", at=ts(9), text="Second task", context=context),
        status("t2", at=ts(10), plan=[{"label": "y"}], context=context),
        status("t2", at=ts(11), plan=steps(3, 1), text="Halfway", context=context),
        status("t2", at=ts(12), text="Nearly there", context=context),
        status("t2", at=ts(13), context=context),  # the newest status says nothing
    ]
    lines = [json.dumps(u) for u in made]
    return [*lines, lines[3], lines[8], lines[10], "{not json"]


async def seen(store: CardStore, context: str) -> tuple[Any, ...]:
    view = await store.view(Owner("main", context))
    card = view.card
    return (
        card.to_json()["plan"] if card else None,
        card.markdown if card else None,
        view.activity.headline,
        view.activity.attention,
        view.run,
        view.run_id,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(len(updates("x")))))
async def test_every_permutation_ends_on_the_sorted_sets_card(redis: Redis, store: CardStore, order: list[int]) -> None:
    n = next(_contexts)
    ordered, shuffled = f"ctx-o{n}", f"ctx-s{n}"
    await ingest_lines(updates(ordered), applier(redis), errors=io.StringIO())
    lines = updates(shuffled)
    await ingest_lines([lines[i] for i in order], applier(redis), errors=io.StringIO())
    sorted_card = await seen(store, ordered)
    assert sorted_card[0] is not None and sorted_card[0][1]["status"] == "in_progress"  # the plan @11
    assert sorted_card[2:] == (None, None, RunState.active, "t2")  # the status @13: no message
    assert await seen(store, shuffled) == sorted_card


# -- the lane: clocks ------------------------------------------------------------------------


def from_now(seconds: float) -> str:
    return (datetime.now(UTC) + timedelta(seconds=seconds)).isoformat().replace("+00:00", "Z")


def counted(outcome: str) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value("progresscast_a2a_updates_total", {"outcome": outcome}) or 0.0


async def test_a_timestamp_too_far_ahead_is_refused_and_counted(redis: Redis, store: CardStore) -> None:
    a = applier(redis, skew=300)
    owner = Owner("main", "ctx-1")
    # far ahead: refused, so it cannot freeze the card for an hour
    before = counted("future")
    assert await apply(a, status("t1", at=from_now(3600), plan=steps(2, 0))) is Outcome.future
    assert counted("future") == before + 1
    assert await store.get(owner) is None
    # within the allowed skew: fine, and a later honest update is not frozen out by a wrong one
    assert await apply(a, status("t1", at=from_now(60), plan=steps(2, 1))) is Outcome.applied
    assert await apply(a, status("t1", at=from_now(0), plan=steps(3, 0))) is Outcome.stale
    tally = await ingest_lines(
        [json.dumps(status("t1", at=from_now(7200), plan=steps(1), context="ctx-2")),
         json.dumps(status("t1", at=from_now(-1), plan=steps(1), context="ctx-2"))],
        a, errors=io.StringIO(),
    )
    assert tally.get("future") == 1 and tally.applied == 1
    assert "future 1" in tally.summary()
    assert (await store.get(Owner("main", "ctx-2"))) is not None


async def test_the_clock_skew_counts_against_the_stores_clock(redis: Redis, store: CardStore) -> None:
    """A tighter allowance refuses what the default accepts."""
    assert await apply(applier(redis, skew=5), status("t1", at=from_now(60), plan=steps(1))) is Outcome.future
    assert await apply(applier(redis), status("t1", at=from_now(60), plan=steps(1))) is Outcome.applied


# -- the lane: agents ------------------------------------------------------------------------


async def test_a_context_id_never_selects_another_agent(redis: Redis, store: CardStore) -> None:
    await store.put(Owner("research", "secret"), CardInput.parse({"markdown": "research's own card"}))
    for i, agent in enumerate(("main", None)):  # a follower's agent, and the default one
        a = applier(redis, agent)
        outcome = await apply(a, status("t1", at=ts(i), plan=steps(2, 0), context="agent:research:secret"))
        assert outcome is Outcome.applied
    card = await store.get(Owner("research", "secret"))
    assert card is not None and card.markdown == "research's own card" and card.plan is None
    # the update went to the follower's own agent, under the context id it gave
    mine = await store.get(Owner("main", "agent:research:secret"))
    assert mine is not None and len(mine.plan or []) == 2


async def test_a_context_id_naming_the_followers_own_agent_is_its_session(redis: Redis, store: CardStore) -> None:
    a = applier(redis, "research")
    assert await apply(a, status("t1", at=ts(1), plan=steps(1), context="agent:research:ctx-9")) is Outcome.applied
    assert await store.get(Owner("research", "ctx-9")) is not None
