"""Replacing a card's plan while keeping its note: compare-and-set, retried, so a write
that lands in between is never overwritten (store and gateway paths, real Redis)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.agents.plan_update import replace_plan
from progresscast.agents.sinks import Gateway, GatewaySink, Snapshot, StoreSink
from progresscast.config.settings import GatewaySettings, GatewayToken, Settings
from progresscast.gateway import create_app
from progresscast.model.card import CardInput, Status, Step
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore

pytestmark = pytest.mark.backends  # the store itself: each test runs on every backend

OWNER = Owner("main", "cas-1")
STEPS = [Step(step="Harness step", status=Status.in_progress)]
CONCURRENT = CardInput.parse({"plan": [{"step": "Other writer", "status": "pending"}], "markdown": "written in between"})


class InterruptedStoreSink(StoreSink):
    """A store sink whose first read is followed, before its write, by another writer's."""

    interruptions = 1

    async def snapshot(self) -> Snapshot:
        seen = await super().snapshot()
        if self.interruptions:
            self.interruptions -= 1
            await self.store.put(self.owner, CONCURRENT)
        return seen


class InterruptedGatewaySink(GatewaySink):
    def __init__(self, gateway: Gateway, owner: Owner, store: CardStore) -> None:
        super().__init__(gateway, owner)
        self.store = store
        self.interruptions = 1

    async def snapshot(self) -> Snapshot:
        seen = await super().snapshot()
        if self.interruptions:
            self.interruptions -= 1
            await self.store.put(self.owner, CONCURRENT)
        return seen


async def test_a_write_between_read_and_write_is_kept(store: CardStore) -> None:
    await store.put(OWNER, CardInput.parse({"markdown": "first note"}))
    result = await replace_plan(InterruptedStoreSink(store, OWNER), STEPS)
    card = await store.get(OWNER)
    assert card is not None and card.markdown == "written in between"
    assert [s.step for s in card.plan or []] == ["Harness step"]
    assert result.revision == card.revision == 3


async def test_without_a_card_the_plan_is_written_and_the_note_stays_empty(store: CardStore) -> None:
    result = await replace_plan(StoreSink(store, OWNER), STEPS)
    card = await store.get(OWNER)
    assert card is not None and card.markdown is None and result.receipt == "Progress card updated (rev 1, 0/1 done)"


@pytest.fixture
async def gateway(redis: Redis) -> AsyncIterator[Gateway]:
    settings = Settings(gateway=GatewaySettings(tokens=[GatewayToken(token="w", scopes=["operator.read", "operator.write"])]))
    app = create_app(settings, redis)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://gw") as client:
        yield Gateway(client, "http://gw", "w")


async def test_through_a_gateway_an_empty_card_after_a_clear_is_retried_from_the_conflict(
    gateway: Gateway, store: CardStore
) -> None:
    # Cleared: the gateway reads `null` and does not say the revision (2) to expect.
    await store.put(OWNER, CardInput.parse({"markdown": "gone soon"}))
    await store.clear(OWNER)
    result = await replace_plan(InterruptedGatewaySink(gateway, OWNER, store), STEPS)
    card = await store.get(OWNER)
    assert card is not None and card.markdown == "written in between"
    assert [s.step for s in card.plan or []] == ["Harness step"]
    assert result.revision == card.revision == 4


async def test_through_a_gateway_a_cleared_card_gets_its_plan(gateway: Gateway, store: CardStore) -> None:
    await store.put(OWNER, CardInput.parse({"markdown": "gone soon"}))
    await store.clear(OWNER)
    result = await replace_plan(GatewaySink(gateway, OWNER), STEPS)
    assert result.revision == 3
    card = await store.get(OWNER)
    assert card is not None and card.markdown is None and [s.step for s in card.plan or []] == ["Harness step"]
