"""Property tests: accepted writes round-trip; rejected ones change no byte in Redis."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from conftest import all_keys, raw_client
from progresscast.model.card import CardError, CardInput, clean_text, shows_nothing
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore

pytestmark = pytest.mark.backends  # the store itself: each test runs on every backend

OWNER = Owner(agent_id="main", session_key="prop")

text = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)) | st.sampled_from("\u200b\u202e\ufeff<&>"),
    max_size=40,
)
statuses = st.sampled_from(["pending", "in_progress", "completed", "blocked", "skipped"])
step = st.fixed_dictionaries(
    {"step": text.filter(lambda s: not shows_nothing(clean_text(s))), "status": statuses},
    optional={"note": text},
)
valid_plan = st.lists(step, max_size=50).filter(
    lambda plan: sum(s["status"] == "in_progress" for s in plan) <= 1
)
valid_card = st.fixed_dictionaries({}, optional={"plan": valid_plan, "markdown": text})

junk = st.one_of(st.integers(), st.none(), st.booleans(), st.lists(st.integers(), max_size=2), text)
invalid_card = st.one_of(
    # wrong types anywhere
    st.fixed_dictionaries({"plan": st.lists(st.fixed_dictionaries({"step": junk.filter(lambda v: not isinstance(v, str)), "status": statuses}), min_size=1)}),
    st.fixed_dictionaries({"plan": st.lists(st.fixed_dictionaries({"step": text.filter(str.strip), "status": text.filter(lambda s: s not in {"pending", "in_progress", "completed", "blocked", "skipped"})}), min_size=1)}),
    st.fixed_dictionaries({"markdown": junk.filter(lambda v: v is not None and not isinstance(v, str))}),
    # rule breaks
    st.just({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}),
    st.integers(51, 60).map(lambda n: {"plan": [{"step": "s", "status": "pending"}] * n}),
    st.integers(513, 600).map(lambda n: {"plan": [{"step": "x" * n, "status": "pending"}]}),
    st.integers(8193, 9000).map(lambda n: {"markdown": "y" * n}),
    st.fixed_dictionaries({"unknown": text}),
)


def keeps_a_card(data: dict) -> bool:
    """A seed that parses and leaves a card (a step of only removed characters does not)."""
    try:
        return not CardInput.parse(data).clears
    except CardError:
        return False


@pytest.fixture
async def raw(redis_url: str) -> AsyncIterator[Any]:
    """A second client that does not decode replies (DUMP is binary)."""
    client = raw_client(redis_url)
    yield client
    await client.aclose()


# The examples of a test share its clients (and event loop): what one example leaves
# in Redis is the next one's starting point, as before, without a connection (on a
# Cluster: a slot map and a connection per node) set up per example.


async def snapshot(client: Redis) -> dict[bytes, bytes]:
    return {k: await client.dump(k) for k in sorted(await all_keys(client))}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(card=valid_card)
async def test_any_accepted_input_round_trips(store: CardStore, card: dict) -> None:
    parsed = CardInput.parse(card)
    result = await store.put(OWNER, parsed)
    got = await store.get(OWNER)
    if parsed.clears:
        assert got is None and result.cleared
    else:
        assert got is not None and got.revision == result.revision
        assert got.plan == parsed.plan and got.markdown == parsed.markdown
        assert CardInput.parse({"plan": [s.to_json() for s in got.plan or []], "markdown": got.markdown}) == parsed


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=valid_card, card=valid_card, expected=st.integers(-3, 50))
async def test_a_stale_expected_revision_changes_nothing(
    store: CardStore, raw: Redis, seed: dict, card: dict, expected: int
) -> None:
    """The store's own refusals (compare-and-set) leave Redis byte-for-byte unchanged."""
    await store.put(OWNER, CardInput.parse(seed))
    current = await store.revision(OWNER)
    before = await snapshot(raw)
    try:
        result = await store.put(OWNER, CardInput.parse(card), expected_revision=expected)
    except CardError as exc:
        assert expected != current and exc.field == "expectedRevision"
        assert await snapshot(raw) == before
    else:
        assert expected == current
        if current == 0 and result.cleared:  # clearing a card never written writes nothing
            assert result.revision == 0 and await snapshot(raw) == before
        else:
            assert result.revision == current + 1


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=valid_card.filter(lambda c: keeps_a_card(c)), bad=invalid_card)
async def test_any_rejected_input_leaves_the_store_unchanged(store: CardStore, raw: Redis, seed: dict, bad: Any) -> None:
    """Shape errors are caught before anything reaches Redis: the path a write takes
    (parse, then put) leaves the store as it was."""
    await store.put(OWNER, CardInput.parse(seed))
    before = await snapshot(raw)
    try:
        await store.put(OWNER, CardInput.parse(bad))
    except CardError as exc:
        assert exc.field and exc.rule
    else:
        raise AssertionError(f"accepted {bad!r}")
    assert await snapshot(raw) == before
