"""The one write path: every input is admitted by the same rules, in the same script as
its write — the reset boundary by arrival (on every path, not only the gateway's), and
a plan written alone keeps the note without a read in between (real Redis, every backend)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import AsyncIterator, Sequence

import httpx
import pytest
from redis.asyncio import Redis

from a2a_updates import status, steps, ts
from progresscast.agents.a2a.apply import Outcome, Source, UpdateApplier
from progresscast.agents.a2a.mapping import parse_update
from progresscast.agents.hooks.context import HookContext
from progresscast.agents.mcp_server import AgentTools
from progresscast.agents.sinks import Gateway, GatewaySink, StoreSink
from progresscast.config.gateway import GatewaySettings, GatewayToken
from progresscast.config.settings import Settings
from progresscast.gateway import create_app
from progresscast.model.card import CardError, CardInput, Status, Step, WriteResult
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore, StoreError
from progresscast.store.sharding import layout_of

# what these guard differs by backend (Lua scripts, one slot per owner on Cluster)
pytestmark = pytest.mark.backends

OWNER = Owner("main", "ctx-1")
STEPS = [Step(step="Harness step", status=Status.in_progress)]


# -- the reset boundary, on every path -------------------------------------------------------


async def test_a_hook_call_that_came_in_before_a_reset_writes_nothing_after_it(redis_url: str, store: CardStore) -> None:
    """A hook writes through the store sink, not the gateway: it is fenced all the same."""
    await store.put(OWNER, CardInput.parse({"markdown": "the agent's note"}))
    args = argparse.Namespace(config=None, redis=redis_url, session=None, agent=None)
    ctx = HookContext("claude-code", args)  # the hook call came in (50 ms ago) ...
    ctx.arrived -= 0.05
    try:
        await store.reset(OWNER)  # ... the session is reset while it runs ...
        with pytest.raises(StoreError, match="reset"):  # ... and its write lands afterwards.
            await ctx.write_plan(OWNER, STEPS)
        assert await store.get(OWNER) is None
        # A hook call that comes in after the reset writes as usual.
        later = HookContext("claude-code", args)
        await later.write_plan(OWNER, STEPS)
        assert (await store.get(OWNER)).plan == STEPS
        await later.close()
    finally:
        await ctx.close()


class ResetMeanwhile(StoreSink):
    """A store sink whose card someone else resets 20 ms after the call came in, just
    before the write lands."""

    async def _reset(self) -> None:
        await asyncio.sleep(0.02)  # the time between the call's arrival and the reset
        await self.store.reset(self.owner)

    async def put_plan(self, steps: Sequence[Step], *, arrived: float | None = None) -> WriteResult:
        await self._reset()
        return await super().put_plan(steps, arrived=arrived)

    async def put(self, card: CardInput, *, expected_revision: int | None = None, arrived: float | None = None) -> WriteResult:
        await self._reset()
        return await super().put(card, expected_revision=expected_revision, arrived=arrived)


@pytest.mark.parametrize("tool, arguments", [
    ("update_plan", {"steps": [{"label": "Read", "state": "active"}]}),
    ("progress_card", {"plan": [{"step": "Read", "status": "in_progress"}]}),
])
async def test_an_mcp_call_that_came_in_before_a_reset_writes_nothing_after_it(
    store: CardStore, tool: str, arguments: dict
) -> None:
    await store.put(OWNER, CardInput.parse({"markdown": "before"}))
    result = await AgentTools(ResetMeanwhile(store, OWNER)).call(tool, arguments)
    assert result.is_error and "reset" in result.content[0].text
    assert await store.get(OWNER) is None


async def test_an_a2a_update_that_came_in_before_a_reset_writes_nothing_after_it(redis: Redis, store: CardStore) -> None:
    applier = UpdateApplier(redis, agent_id=None, known_agents=frozenset({"main"}), default_agent="main")
    update = parse_update(status("t1", at=ts(1), plan=steps(2, 0)))
    arrived = time.monotonic() - 0.05  # it came in 50 ms ago, then the session was reset
    await store.reset(OWNER)
    assert (await applier.apply(update, Source.push, arrived=arrived)).outcome is Outcome.reset
    assert await store.get(OWNER) is None
    # the same update, arriving after the reset, applies (nothing was recorded of it)
    assert (await applier.apply(update, Source.push)).outcome is Outcome.applied
    assert len((await store.get(OWNER)).plan or []) == 2


# -- a plan alone keeps the note, in one write ---------------------------------------------------


async def test_a_plan_alone_keeps_the_note(store: CardStore) -> None:
    result = await store.put_plan(OWNER, STEPS)
    assert result.receipt == "Progress card updated (rev 1, 0/1 done)"
    await store.put(OWNER, CardInput.parse({"plan": [{"step": "x", "status": "pending"}], "markdown": "note"}))
    await store.put_plan(OWNER, STEPS)
    card = await store.get(OWNER)
    assert card.plan == STEPS and card.markdown == "note" and card.revision == 3
    # an empty plan keeps a card with its note; without a note it clears the card
    assert (await store.put_plan(OWNER, [])).receipt == "Progress card updated (rev 4)"
    assert (await store.get(OWNER)).markdown == "note"
    await store.clear(OWNER)
    assert (await store.put_plan(OWNER, [])).receipt == "Progress card cleared"
    assert await store.get(OWNER) is None
    with pytest.raises(CardError, match="markdown"):
        await store.put(OWNER, CardInput.parse({"markdown": "x"}), keep_markdown=True)


async def test_a_card_written_by_the_earlier_layout_reads_and_keeps_its_note(redis: Redis, store: CardStore) -> None:
    """Cards of earlier versions keep plan and note in one JSON body."""
    lay = await layout_of(redis)
    body = {"plan": [{"step": "Old", "status": "in_progress"}], "markdown": "old note"}
    await redis.hset(lay.card(OWNER), mapping={"body": json.dumps(body), "revision": 4, "updatedAt": 1_700_000_000_000})
    await redis.set(lay.revision(OWNER), 4)
    card = await store.get(OWNER)
    assert card.revision == 4 and card.plan[0].step == "Old" and card.markdown == "old note"
    await store.put_plan(OWNER, [Step(step="Old", status=Status.completed)])
    card = await store.get(OWNER)
    assert card.revision == 5 and card.markdown == "old note" and card.plan[0].status is Status.completed
    assert "body" not in await redis.hgetall(lay.card(OWNER))
    (entry,) = await store.history(OWNER)
    assert [c.to_json() for c in entry.changes] == [{"step": "Old", "from": "in_progress", "to": "completed"}]


@pytest.fixture
async def gateway(redis: Redis) -> AsyncIterator[Gateway]:
    settings = Settings(gateway=GatewaySettings(tokens=[GatewayToken(token="w", scopes=["operator.read", "operator.write"])]))
    app = create_app(settings, redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        yield Gateway(client, "http://gw", "w")


async def test_a_plan_alone_through_a_gateway_keeps_the_note(gateway: Gateway, store: CardStore) -> None:
    sink = GatewaySink(gateway, OWNER)
    await store.put(OWNER, CardInput.parse({"markdown": "kept"}))
    result = await sink.put_plan(STEPS)
    assert result.revision == 2
    card = await store.get(OWNER)
    assert card.markdown == "kept" and card.plan == STEPS
    # the method refuses a note given with keepMarkdown, naming the field
    with pytest.raises(CardError) as info:
        await gateway.call("progressCard.put", {"sessionKey": "ctx-1", "markdown": "x", "keepMarkdown": True})
    assert info.value.field == "markdown"
    with pytest.raises(CardError) as info:
        await gateway.call("progressCard.put", {"sessionKey": "ctx-1", "keepMarkdown": "yes"})
    assert info.value.field == "keepMarkdown"
    assert (await store.get(OWNER)).revision == 2


async def test_the_store_sink_plan_keeps_the_note(store: CardStore) -> None:
    await store.put(OWNER, CardInput.parse({"markdown": "kept"}))
    await StoreSink(store, OWNER).put_plan(STEPS)
    card = await store.get(OWNER)
    assert card.markdown == "kept" and card.plan == STEPS
