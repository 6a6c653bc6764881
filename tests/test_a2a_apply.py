"""Applying A2A updates against a real Redis: order by timestamp, runs, answer text."""

from __future__ import annotations

import asyncio

import pytest
from redis.asyncio import Redis

from a2a_updates import artifact, snapshot, status, steps, ts
from conftest import all_keys
from progresscast.agents.a2a.apply import Outcome, Source, UpdateApplier
from progresscast.agents.a2a.mapping import parse_update
from progresscast.model.card import Status
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.store.sharding import layout_of

pytestmark = pytest.mark.backends  # the store itself: each test runs on every backend

OWNER = Owner(agent_id="main", session_key="ctx-1")


def applier(redis: Redis, agent: str | None = None) -> UpdateApplier:
    return UpdateApplier(redis, agent_id=agent, known_agents=frozenset({"main", "research"}), default_agent="main")


async def apply(a: UpdateApplier, data: dict, source: Source = Source.stream) -> Outcome:
    update = parse_update(data)
    assert update is not None
    return (await a.apply(update, source)).outcome


async def test_newest_plan_wins_and_older_or_equal_are_refused(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    assert await apply(a, status("t1", at=ts(2), plan=steps(3, 1), text="Reading")) is Outcome.applied
    assert await apply(a, status("t1", at=ts(1), plan=steps(3, 0))) is Outcome.stale
    assert await apply(a, status("t1", at=ts(2), plan=steps(3, 2))) is Outcome.duplicate
    assert await apply(a, status("t1", at="2026-12-01T09:00:02.000000900Z", plan=steps(3, 2))) is Outcome.duplicate
    view = await store.view(OWNER)
    assert view.card is not None and [s.status for s in view.card.plan] == [
        Status.completed, Status.in_progress, Status.pending]
    assert view.activity.headline == "Reading" and view.run is RunState.active and view.run_id == "t1"
    assert not view.paused
    assert await apply(a, status("t1", at=ts(2, 1), plan=steps(3, 2))) is Outcome.applied
    assert (await store.get(OWNER)).plan[2].status is Status.in_progress


async def test_untimed_applies_only_from_a_live_stream(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    for source in (Source.file, Source.push, Source.poll):
        assert await apply(a, status("t1", plan=steps(1)), source) is Outcome.untimed
    assert await apply(a, snapshot("t1", plan=steps(1)), Source.stream) is Outcome.untimed
    assert await store.get(OWNER) is None
    assert await apply(a, status("t1", plan=steps(2)), Source.stream) is Outcome.applied
    assert len((await store.get(OWNER)).plan) == 2


async def test_a_reset_does_not_reset_the_order(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    await apply(a, status("t1", at=ts(5), plan=steps(2)))
    await store.reset(OWNER)
    await store.start_run(OWNER, "other")
    assert await apply(a, status("t1", at=ts(4), plan=steps(4))) is Outcome.stale
    assert await store.get(OWNER) is None


async def test_plan_keeps_the_note_and_no_metadata_keeps_the_plan(redis: Redis, store: CardStore) -> None:
    from progresscast.model.card import CardInput

    await store.put(OWNER, CardInput.parse({"markdown": "**note** / with slash"}))
    a = applier(redis)
    await apply(a, status("t1", at=ts(1), plan=steps(2, 0)))
    await apply(a, status("t1", at=ts(2), text="still going"))
    card = await store.get(OWNER)
    assert card.markdown == "**note** / with slash" and len(card.plan) == 2
    await apply(a, status("t1", at=ts(3), plan=[]))
    card = await store.get(OWNER)
    assert card is not None and card.plan is None and card.markdown == "**note** / with slash"


async def test_bad_plan_is_not_applied_but_the_rest_is(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    await apply(a, status("t1", at=ts(1), plan=steps(2, 0)))
    bad = status("t1", "TASK_STATE_INPUT_REQUIRED", at=ts(2), text="Which branch?",
                 plan=[{"label": "x", "state": "exploded"}])
    result = await a.apply(parse_update(bad), Source.stream)
    assert result.outcome is Outcome.applied and "state" in (result.plan_problem or "")
    view = await store.view(OWNER)
    assert len(view.card.plan) == 2
    assert view.activity.attention == "Waiting for input: Which branch?"
    await apply(a, status("t1", at=ts(3)))
    assert (await store.view(OWNER)).activity.attention is None


async def test_runs_per_task_and_terminal_states(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    await apply(a, status("t1", at=ts(1), plan=steps(2, 0)))
    await apply(a, status("t1", "TASK_STATE_REJECTED", at=ts(2)))
    view = await store.view(OWNER)
    assert view.run is RunState.failed and view.run_id == "t1"
    await apply(a, status("t2", at=ts(3), plan=steps(3, 0)))  # another task of the context
    view = await store.view(OWNER)
    assert view.run is RunState.active and view.run_id == "t2" and len(view.card.plan) == 3
    assert await apply(a, status("t1", at=ts(2, 5), plan=steps(1))) is Outcome.stale
    await apply(a, snapshot("t3", "TASK_STATE_COMPLETED", at=ts(9)))  # a finished task seen late
    view = await store.view(OWNER)
    assert view.run is RunState.completed and view.run_id == "t3"


async def test_answer_text_in_chunks(redis: Redis, store: CardStore) -> None:
    a = applier(redis)
    await apply(a, status("t1", at=ts(1)))
    assert await apply(a, artifact("t1", "Hello, ")) is Outcome.applied
    assert await apply(a, artifact("t1", "wörld", append=True)) is Outcome.applied
    assert await apply(a, artifact("t1", "!", append=True, last=True)) is Outcome.applied
    assert (await store.activity(OWNER)).answer == "Hello, wörld!"
    assert await apply(a, artifact("t1", " more", append=True)) is Outcome.stale
    assert await apply(a, artifact("t2", "other task")) is Outcome.stale
    assert await apply(a, artifact("t1", "Fresh", artifact_id="a2")) is Outcome.applied
    assert (await store.activity(OWNER)).answer == "Fresh"


async def test_writes_touch_only_the_owner_and_the_stream(redis: Redis) -> None:
    a = applier(redis, "research")
    await apply(a, status("t1", at=ts(1), plan=steps(2, 0), text="hi"))
    await apply(a, artifact("t1", "x"))
    owner = Owner(agent_id="research", session_key="ctx-1")
    lay = await layout_of(redis)
    written = set(await all_keys(redis)) - {keys.SHARDS}
    shared = {lay.events_of(owner), lay.owners_of(owner), lay.a2a_order(owner)}
    assert written <= set(lay.owner_keys(owner)) | shared
    assert lay.a2a_order(owner) in written and lay.last_event(owner) in written
    types = [f["type"] for _, f in await redis.xrange(lay.events_of(owner))]
    assert types == ["run.started", "progressCard.changed", "activity.changed", "activity.changed"]


async def test_racing_appliers_end_on_the_newest_plan(redis_url: str) -> None:
    clients = [connect(redis_url) for _ in range(2)]  # two connections, as two processes race
    try:
        appliers = [applier(c) for c in clients]

        async def follow(a: UpdateApplier, order: list[dict]) -> None:
            for data in order:
                await apply(a, data)
                await asyncio.sleep(0)

        for round_ in range(50):
            owner = Owner(agent_id="main", session_key=f"race-{round_}")
            batch = [status("t1", at=ts(i), plan=steps(10, i), context=owner.session_key) for i in range(10)]
            await asyncio.gather(follow(appliers[0], batch), follow(appliers[1], batch[::-1]))
            card = await CardStore(clients[0]).get(owner)
            assert card.plan[9].status is Status.in_progress, round_
    finally:
        for c in clients:
            await c.aclose()


async def test_waiting_for_input_shows_as_an_attention_line(redis: Redis, store: CardStore) -> None:
    from progresscast.config.base import RenderSettings
    from progresscast.render import render_text, render_web

    a = applier(redis)
    await apply(a, status("t1", "TASK_STATE_INPUT_REQUIRED", at=ts(1), plan=steps(3, 1), text="<b>Which</b> file?"))
    view = await store.view(OWNER)
    text = render_text(view, RenderSettings())
    assert text is not None and "Waiting for input: <b>Which</b> file?" in text
    html = render_web(view, RenderSettings())
    assert 'role="alert"' in html and "Waiting for input: &lt;b&gt;Which&lt;/b&gt; file?" in html
