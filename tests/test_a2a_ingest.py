"""`a2a ingest`: JSON lines applied in timestamp order, whatever order the file has."""

from __future__ import annotations

import io
import itertools
import json
import random
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from a2a_updates import snapshot, status, steps, ts
from progresscast.agents.a2a.apply import UpdateApplier
from progresscast.agents.a2a.ingest import ingest_lines
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.store.cards import CardStore
from test_cli import CLI, cli  # noqa: F401  (the fixture)

_contexts = itertools.count()


def history(context: str) -> list[str]:
    """A task's updates as an agent would stream them, with repeats, an untimed line,
    a bad plan and junk."""
    lines = [json.dumps(snapshot("t1", "TASK_STATE_SUBMITTED", context=context))]
    for i in range(6):
        lines.append(json.dumps(status("t1", at=ts(i + 1, 250), plan=steps(6, i), text=f"step {i}", context=context)))
    lines.append(lines[3])  # a duplicate
    lines.append(json.dumps(status("t1", at=ts(4), plan=[{"label": "x", "state": "nope"}], context=context)))
    lines.append(json.dumps(status("t1", plan=steps(6, 0), context=context)))  # untimed: ignored in a file
    lines.append(json.dumps(status("t1", "TASK_STATE_COMPLETED", at=ts(9), plan=steps(6, 6), context=context)))
    lines.append(json.dumps(snapshot("t1", "TASK_STATE_COMPLETED", at=ts(9), plan=steps(6, 6), context=context)))
    lines += ["{not json", "[1, 2]", json.dumps({"statusUpdate": {"taskId": "t1", "status": {"state": "??"}}})]
    return lines


def applier(redis: Redis) -> UpdateApplier:
    return UpdateApplier(redis, agent_id=None, known_agents=frozenset({"main"}), default_agent="main")


async def shown(store: CardStore, context: str) -> tuple:
    view = await store.view(Owner("main", context))
    card = view.card
    return (card.to_json()["plan"] if card else None, card.markdown if card else None, view.run)


async def test_the_ordered_file(redis: Redis, store: CardStore) -> None:
    errors = io.StringIO()
    tally = await ingest_lines(history("ctx-o"), applier(redis), errors=errors)
    assert tally.summary() == "applied 7, ignored 8 (stale 2, duplicate 1, malformed 3, untimed 2); plans refused 1"
    assert "line 13: not valid JSON" in errors.getvalue() and "line 15: statusUpdate.status.state" in errors.getvalue()
    plan, _, run = await shown(store, "ctx-o")
    assert run is RunState.completed and all(s["status"] == "completed" for s in plan)


@pytest.mark.backends
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(order=st.permutations(range(len(history("x")))))
async def test_any_permutation_ends_with_the_same_card(redis: Redis, store: CardStore, order: list[int]) -> None:
    n = next(_contexts)
    ordered, shuffled = f"ctx-a{n}", f"ctx-b{n}"
    await ingest_lines(history(ordered), applier(redis), errors=io.StringIO())
    lines = history(shuffled)
    await ingest_lines([lines[i] for i in order], applier(redis), errors=io.StringIO())
    assert await shown(store, shuffled) == await shown(store, ordered)


def test_the_command(cli: CLI, tmp_path: Path) -> None:  # noqa: F811
    ordered = tmp_path / "ordered.jsonl"
    ordered.write_text("\n".join(history("ctx-1")) + "\n")
    lines = history("ctx-2")
    random.Random(7).shuffle(lines)
    with ThreadPoolExecutor(4) as pool:  # separate processes, side by side: they share nothing
        run, in_order, missing, unknown = pool.map(
            lambda call: call(),
            [
                lambda: cli("a2a", "ingest", "-", stdin="\n".join(lines)),
                lambda: cli("a2a", "ingest", str(ordered)),
                lambda: cli("a2a", "ingest", str(tmp_path / "nope.jsonl")),
                lambda: cli("a2a", "ingest", str(ordered), "--agent", "ghost"),
            ],
        )
        assert run.returncode == 0, run.stderr
        assert run.stdout.startswith("applied ") and "malformed 3" in run.stdout
        assert in_order.returncode == 0, in_order.stderr
        one, two = (json.loads(got.stdout) for got in pool.map(lambda s: cli("card", "get", "--session", s), ["ctx-1", "ctx-2"]))
    assert one["plan"] == two["plan"] and len(one["plan"]) == 6
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "nope.jsonl" in missing.stderr
    assert unknown.returncode == 2 and "--agent" in unknown.stderr
