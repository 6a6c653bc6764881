"""Asks and Stop in the store: the one write path, first answer wins, expiry on the Redis
clock, lines in the history, the view a channel renders."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from progresscast.model.asks import GONE_KEEP_MS, MAX_GONE, MAX_OPEN, Actor, AskInput, AskKind, AskState
from progresscast.model.card import CardError, CardInput, Status, Step
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.errors import StoreError

pytestmark = pytest.mark.backends

OWNER = Owner("main", "shop")
ANA = Actor("telegram", "42", "7", "Ana")
BEN = Actor("slack", "C1", "U2", "Ben")


def approval(prompt: str = "Run rm -rf build?", **more: Any) -> AskInput:
    return AskInput.parse({"kind": "approval", "prompt": prompt, **more})


async def test_an_ask_is_stored_answered_once_and_kept_in_the_history(store: CardStore) -> None:
    await store.put(OWNER, CardInput(plan=[Step(step="Build", status=Status.in_progress)]))
    ask = await store.asks.open(OWNER, approval())
    assert len(ask.ask_id) >= 22 and ask.options == ("Allow", "Deny") and ask.state is AskState.open
    view = await store.view(OWNER)
    assert [a.ask_id for a in view.open_asks] == [ask.ask_id]

    # Two people press at once: exactly one wins, the other is told who did.
    first, second = await asyncio.gather(
        store.asks.answer(OWNER, ask.ask_id, ANA, options=["Allow"]),
        store.asks.answer(OWNER, ask.ask_id, BEN, options=["Deny"]),
    )
    outcomes = sorted([first.outcome, second.outcome])
    assert outcomes == ["closed", "ok"]
    winner = first if first.outcome == "ok" else second
    loser = second if winner is first else first
    assert winner.ask is not None and loser.ask is not None
    assert loser.ask.answer == winner.ask.answer and loser.ask.state is AskState.answered

    stored, _ = await store.asks.get(OWNER, ask.ask_id)
    assert stored is not None and stored.answer is not None
    assert stored.answer.by.name in ("Ana", "Ben") and stored.answer.options in (("Allow",), ("Deny",))
    assert (await store.view(OWNER)).open_asks == ()

    history = await store.history(OWNER)
    kinds = [e.event["kind"] for e in history if e.event]
    assert kinds == ["answer", "ask"]
    answer_line = history[0].to_json()["event"]
    assert answer_line["by"]["name"] == stored.answer.by.name and answer_line["prompt"] == "Run rm -rf build?"
    # The card's revision does not move: an ask is not a write of the card.
    assert await store.revision(OWNER) == 1


async def test_a_wrong_answer_or_ask_changes_nothing(store: CardStore) -> None:
    with pytest.raises(CardError) as err:
        AskInput.parse({"kind": "choice", "prompt": "Which?"})
    assert err.value.field == "options"
    with pytest.raises(CardError) as err:
        AskInput.parse({"kind": "choice", "prompt": "x" * 281, "options": ["a"]})
    assert err.value.field == "prompt" and "280" in err.value.rule
    with pytest.raises(CardError) as err:
        AskInput.parse({"kind": "choice", "prompt": "Which?", "options": ["a" * 41]})
    assert (err.value.field, err.value.rule) == ("options[0]", "must be at most 40 characters")
    with pytest.raises(CardError) as err:
        AskInput.parse({"kind": "approval", "prompt": "ok?", "timeoutSeconds": 90_000})
    assert err.value.field == "timeoutSeconds"

    ask = await store.asks.open(OWNER, AskInput.parse({"kind": "choice", "prompt": "Which?", "options": ["a", "b"]}))
    with pytest.raises(CardError) as err:
        await store.asks.answer(OWNER, ask.ask_id, ANA, options=["c"])
    assert err.value.field == "options"
    with pytest.raises(CardError):
        await store.asks.answer(OWNER, ask.ask_id, ANA, options=["a", "b"])  # not multi
    with pytest.raises(CardError) as err:
        await store.asks.answer(OWNER, ask.ask_id, ANA, text="free text")  # no typed answer
    assert err.value.field == "text"
    stored, _ = await store.asks.get(OWNER, ask.ask_id)
    assert stored is not None and stored.state is AskState.open


async def test_at_most_five_open_asks(store: CardStore) -> None:
    asks = [await store.asks.open(OWNER, approval(f"q{i}")) for i in range(MAX_OPEN)]
    with pytest.raises(CardError) as err:
        await store.asks.open(OWNER, approval("one too many"))
    assert err.value.field == "sessionKey" and "5 open asks" in err.value.rule
    assert len((await store.view(OWNER)).open_asks) == MAX_OPEN
    await store.asks.withdraw(OWNER, asks[0].ask_id)
    await store.asks.open(OWNER, approval("now there is room"))


async def test_expiry_is_on_the_store_clock_and_a_late_answer_is_told(store: CardStore) -> None:
    ask = await store.asks.open(OWNER, AskInput.parse({"kind": "text", "prompt": "Name?", "timeoutSeconds": 1}))
    assert ask.kind is AskKind.text and ask.allow_text
    waited = await store.asks.wait(OWNER, ask.ask_id, 5)
    assert waited is not None and waited.state is AskState.expired
    late = await store.asks.answer(OWNER, ask.ask_id, ANA, text="Bob")
    assert late.outcome == "closed" and late.ask is not None and late.ask.state is AskState.expired
    kinds = [e.event["kind"] for e in await store.history(OWNER) if e.event]
    assert kinds == ["expired", "ask"]


async def test_withdrawn_asks_cannot_be_answered(store: CardStore) -> None:
    ask = await store.asks.open(OWNER, approval())
    assert (await store.asks.withdraw(OWNER, ask.ask_id)).outcome == "ok"
    assert (await store.asks.withdraw(OWNER, ask.ask_id)).outcome == "closed"
    late = await store.asks.answer(OWNER, ask.ask_id, ANA, options=["Allow"])
    assert late.outcome == "closed" and late.ask is not None and late.ask.state is AskState.withdrawn
    assert (await store.asks.answer(OWNER, "no-such-ask", ANA, options=["Allow"])).outcome == "missing"


async def test_an_open_cancelled_at_any_point_leaves_no_ask_offered(store: CardStore) -> None:
    """A command stopped while its ask is being opened (Ctrl-C, SIGTERM) may be cancelled
    after Redis stored the ask and before its reply was read: the ask is withdrawn then
    too, so no chat offers a question nobody waits for."""
    cancelled = 0
    for turns in range(40):  # the cancel lands a little later each time: after the send, too
        opening = asyncio.ensure_future(store.asks.open(OWNER, approval()))
        for _ in range(turns):
            await asyncio.sleep(0)
        opening.cancel()
        try:
            ask = await opening
        except asyncio.CancelledError:
            cancelled += 1
        else:  # opened before the cancel landed: the caller has it and withdraws it
            await store.asks.withdraw(OWNER, ask.ask_id)
        left = [a for a in (await store.asks.all(OWNER))[0] if a.state is AskState.open]
        assert left == [], f"cancelled after {turns} turns of the loop: {left}"
    assert cancelled > 0


async def test_a_withdraw_that_reaches_redis_before_its_open_leaves_nothing_offered(store: CardStore) -> None:
    """A stopped open sends its withdraw at once; Redis may still run the open after it
    (the open's command still on its way on another connection, or in a batch waiting
    for one). The withdraw is remembered, and the open that comes later offers nothing."""
    ask_id = "x" * 22
    early = await store.asks.withdraw(OWNER, ask_id)
    assert early.outcome == "missing"
    with pytest.raises(StoreError, match="withdrawn"):
        await store.asks.open(OWNER, approval(), ask_id=ask_id)
    asks, _ = await store.asks.all(OWNER)
    assert asks == () and (await store.view(OWNER)).open_asks == ()
    assert (await store.asks.get(OWNER, ask_id))[0] is None
    # Another id opens as ever; an id in use is refused.
    other = await store.asks.open(OWNER, approval())
    assert other.state is AskState.open
    with pytest.raises(StoreError, match="another ask"):
        await store.asks.open(OWNER, approval("Again?"), ask_id=other.ask_id)
    assert (await store.asks.get(OWNER, other.ask_id))[0] == other


async def test_withdraws_of_unknown_asks_are_remembered_briefly_and_boundedly(store: CardStore) -> None:
    """Anyone may withdraw an id that does not exist: what is remembered of it is small,
    bounded per owner, and forgotten after a minute."""
    for n in range(3 * MAX_GONE):
        await store.asks.withdraw(OWNER, f"gone{n:018d}")
    key = (await store.layout()).asks(OWNER)
    raw = await store.redis.hgetall(key)
    assert len(raw) == MAX_GONE
    # The session had nothing: the key made for them goes by itself.
    assert 0 < await store.redis.pttl(key) <= GONE_KEEP_MS
    # The newest are the ones kept: an open of one of them offers nothing.
    with pytest.raises(StoreError, match="withdrawn"):
        await store.asks.open(OWNER, approval(), ask_id=f"gone{3 * MAX_GONE - 1:018d}")
    assert (await store.asks.open(OWNER, approval(), ask_id=f"gone{0:018d}")).state is AskState.open


async def test_an_open_stopped_twice_leaves_no_ask_offered(store: CardStore) -> None:
    """A second stop landing on the withdraw of an open cut short (a second Ctrl-C, a
    cancelled MCP call's task cancelled again) still leaves no ask offered — also once
    every command on its way has landed, in whatever order Redis ran them."""

    async def offered() -> list[Any]:
        return [a for a in (await store.asks.all(OWNER))[0] if a.state is AskState.open]

    for turns in range(30):  # the stops land a little later each time
        opening = asyncio.ensure_future(store.asks.open(OWNER, approval()))
        for _ in range(turns):
            await asyncio.sleep(0)
        opening.cancel()
        await asyncio.sleep(0)
        opening.cancel()
        try:
            ask = await opening
        except asyncio.CancelledError:
            pass
        else:
            await store.asks.withdraw(OWNER, ask.ask_id)
        assert await offered() == [], f"stopped after {turns} turns of the loop"
    await asyncio.sleep(0.3)
    assert await offered() == []


async def test_stop_is_recorded_once_on_the_active_run(store: CardStore) -> None:
    assert (await store.asks.stop(OWNER, ANA))[0] == "norun"
    await store.start_run(OWNER, "r1", stoppable=True)
    view = await store.view(OWNER)
    assert view.stoppable and view.stop is None
    outcome, mark = await store.asks.stop(OWNER, ANA)
    assert outcome == "ok" and mark is not None and mark.by.name == "Ana"
    again, first = await store.asks.stop(OWNER, BEN)
    assert again == "already" and first is not None and first.by.name == "Ana"
    assert (await store.view(OWNER)).stop == mark
    assert await store.asks.stop_mark(OWNER, "r1") == mark
    assert await store.asks.stop_mark(OWNER, "r0") is None
    # A new run starts without it.
    await store.start_run(OWNER, "r2")
    view = await store.view(OWNER)
    assert view.stop is None and not view.stoppable
    kinds = [e.event["kind"] for e in await store.history(OWNER) if e.event]
    assert kinds == ["stop"]


async def test_a_write_after_stop_carries_it(store: CardStore) -> None:
    from progresscast.model.card import CardInput, Status, Step

    await store.start_run(OWNER, "r1", stoppable=True)
    first = await store.put(OWNER, CardInput(plan=[Step(step="Build", status=Status.in_progress)]))
    assert first.stop is None and "stop" not in first.to_json()
    await store.asks.stop(OWNER, ANA)
    later = await store.put(OWNER, CardInput(plan=[Step(step="Build", status=Status.completed)]))
    assert later.stop is not None and later.to_json()["stop"]["by"]["name"] == "Ana"
    assert later.receipt == "Progress card updated (rev 2, 1/1 done)"  # the receipt's words stay
