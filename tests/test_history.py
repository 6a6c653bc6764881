"""A card's history: every accepted write appends what changed, newest first, capped, in
the same script as the write — read through the store, the gateway's RPC and the
command line (the web page's timeline is in test_web_browser.py)."""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import AsyncIterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from redis.asyncio import Redis

from a2a_updates import status, steps, ts
from progresscast.agents.a2a.apply import Source, UpdateApplier
from progresscast.agents.a2a.mapping import parse_update
from progresscast.arguments import whole
from progresscast.config.agents import AgentSettings
from progresscast.config.gateway import GatewaySettings, GatewayToken
from progresscast.config.settings import Settings
from progresscast.gateway import create_app
from progresscast.model.card import CardInput
from progresscast.model.history import MAX_LIMIT
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore, StoreError
from progresscast.store.scripts import HISTORY_MAX
from test_cli import CLI, cli  # noqa: F401  (the fixture)

# What the store tests and the history read over RPC guard differs by backend (Lua
# scripts, one slot per owner on Cluster); the checks of parameters and scopes and the
# command line's parsing and printing do not: they run on the embedded Redis only.
backends = pytest.mark.backends

OWNER = Owner("main", "shop")


def card(*steps_: tuple[str, str], markdown: str | None = None) -> CardInput:
    return CardInput.parse({"plan": [{"step": s, "status": st} for s, st in steps_], "markdown": markdown})


def iso_ms(value: str) -> int:
    return int(datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp() * 1000)


async def server_ms(redis: Redis) -> int:
    seconds, micros = await redis.time()
    return int(seconds) * 1000 + int(micros) // 1000


@backends
async def test_each_write_appends_what_changed_newest_first(redis: Redis, store: CardStore) -> None:
    before = await server_ms(redis)
    await store.put(OWNER, card(("Confirm access", "in_progress"), ("Repair", "pending"), ("Ship", "pending"), markdown="n"))
    await store.put(OWNER, card(("Confirm access", "blocked"), ("Repair", "pending"), ("Ship", "pending"), markdown="n"))
    await store.put(OWNER, card(("Confirm access", "completed"), ("Repair", "in_progress"), markdown="new"))
    await store.put_plan(OWNER, card(("Confirm access", "completed"), ("Repair", "in_progress")).plan or [])
    await store.clear(OWNER)
    await store.reset(OWNER)
    await store.put(OWNER, card(("Again", "pending")))
    after = await server_ms(redis)
    entries = [e.to_json() for e in await store.history(OWNER)]
    assert [e["revision"] for e in entries] == [7, 6, 5, 4, 3, 2, 1]
    assert all(before <= iso_ms(e["at"]) <= after and e["at"].endswith("Z") for e in entries)
    strip = [{k: v for k, v in e.items() if k != "at"} for e in entries]
    assert strip == [
        {"revision": 7, "changes": [{"step": "Again", "from": None, "to": "pending"}], "note": "same", "cleared": False, "reset": False},
        {"revision": 6, "changes": [], "note": "same", "cleared": True, "reset": True},
        {"revision": 5, "changes": [], "note": "removed", "cleared": True, "reset": False},
        {"revision": 4, "changes": [], "note": "same", "cleared": False, "reset": False},
        {"revision": 3, "changes": [
            {"step": "Confirm access", "from": "blocked", "to": "completed"},
            {"step": "Repair", "from": "pending", "to": "in_progress"},
            {"step": "Ship", "from": "pending", "to": None},
        ], "note": "changed", "cleared": False, "reset": False},
        {"revision": 2, "changes": [{"step": "Confirm access", "from": "in_progress", "to": "blocked"}],
         "note": "same", "cleared": False, "reset": False},
        {"revision": 1, "changes": [
            {"step": "Confirm access", "from": None, "to": "in_progress"},
            {"step": "Repair", "from": None, "to": "pending"},
            {"step": "Ship", "from": None, "to": "pending"},
        ], "note": "changed", "cleared": False, "reset": False},
    ]
    # paging: the entries before a revision, at most `limit`
    assert [e.revision for e in await store.history(OWNER, limit=2, before=5)] == [4, 3]


@backends
async def test_steps_of_the_same_text_are_told_apart_and_a_removed_note_says_so(store: CardStore) -> None:
    await store.put(OWNER, card(("Test", "completed"), ("Test", "pending"), markdown="note"))
    await store.put(OWNER, card(("Test", "completed"), ("Test", "in_progress")))
    (entry, _) = await store.history(OWNER)
    assert [c.to_json() for c in entry.changes] == [{"step": "Test", "from": "pending", "to": "in_progress"}]
    assert entry.note == "removed"


@backends
async def test_refused_writes_append_nothing(store: CardStore) -> None:
    await store.put(OWNER, card(("A", "pending")))
    with pytest.raises(StoreError):
        await store.put(OWNER, card(("A", "completed")), expected_revision=7)
    assert [e.revision for e in await store.history(OWNER)] == [1]


@backends
async def test_the_history_is_capped_in_the_same_script(redis: Redis, store: CardStore) -> None:
    lay = await store.layout()
    total = HISTORY_MAX + 5
    for i in range(total):
        await store.put(OWNER, card((f"step {i}", "in_progress")))
        assert await redis.llen(lay.history(OWNER)) <= HISTORY_MAX
    kept = await store.history(OWNER, limit=MAX_LIMIT)
    assert len(kept) == HISTORY_MAX == MAX_LIMIT
    assert kept[0].revision == total and kept[-1].revision == total - HISTORY_MAX + 1


@backends
async def test_racing_writers_each_get_their_entry(redis_url: str, store: CardStore) -> None:
    from progresscast.store.connections import connect

    clients = [connect(redis_url) for _ in range(8)]
    try:
        stores = [CardStore(c) for c in clients]
        await asyncio.gather(*(s.put(OWNER, card((f"writer {i}", "pending"))) for i, s in enumerate(stores)))
    finally:
        await asyncio.gather(*(c.aclose() for c in clients))
    entries = sorted(await store.history(OWNER), key=lambda e: e.revision)
    assert [e.revision for e in entries] == list(range(1, 9))
    # each entry is the difference from the card just before it, whatever the interleaving
    shown = None
    for entry in entries:
        added = [c.step for c in entry.changes if c.before is None]
        removed = [c.step for c in entry.changes if c.after is None]
        assert len(added) == 1 and removed == ([shown] if shown else [])
        shown = added[0]
    assert (await store.get(OWNER)).plan[0].step == shown


@backends
async def test_a2a_plans_append_entries(redis: Redis, store: CardStore) -> None:
    a = UpdateApplier(redis, agent_id=None, known_agents=frozenset({"main"}), default_agent="main")
    owner = Owner("main", "ctx-1")
    await a.apply(parse_update(status("t1", at=ts(1), plan=steps(2, 0))), Source.file)
    await a.apply(parse_update(status("t1", at=ts(2), text="plan-less: no card write")), Source.file)
    await a.apply(parse_update(status("t1", at=ts(3), plan=steps(2, 1))), Source.file)
    entries = [e.to_json()["changes"] for e in await store.history(owner)]
    assert entries == [
        [{"step": "Step 0", "from": "in_progress", "to": "completed"}, {"step": "Step 1", "from": "pending", "to": "in_progress"}],
        [{"step": "Step 0", "from": None, "to": "in_progress"}, {"step": "Step 1", "from": None, "to": "pending"}],
    ]


# -- through the gateway ------------------------------------------------------------------


@pytest.fixture
async def client(redis: Redis) -> AsyncIterator[httpx.AsyncClient]:
    settings = Settings(
        agents=AgentSettings(default="main", known=["main", "research"]),
        gateway=GatewaySettings(tokens=[
            GatewayToken(token="writer", scopes=["operator.read", "operator.write"]),
            GatewayToken(token="reader", scopes=["operator.read"], sessions=["shop"]),
            GatewayToken(token="writeonly", scopes=["operator.write"]),
        ]),
    )
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(settings, redis)), base_url="http://gw") as c:
        yield c


async def rpc(client: httpx.AsyncClient, method: str, token: str = "writer", **params: Any) -> httpx.Response:
    return await client.post("/v1/rpc", json={"method": method, "params": params}, headers={"Authorization": f"Bearer {token}"})


@backends
async def test_history_over_rpc(client: httpx.AsyncClient) -> None:
    for status_ in ("in_progress", "blocked", "in_progress"):
        answer = await rpc(client, "progressCard.put", sessionKey="shop", plan=[{"step": "Confirm access", "status": status_}])
        assert answer.status_code == 200, answer.text
    await rpc(client, "progressCard.reset", sessionKey="shop")
    answer = await rpc(client, "progressCard.history", "reader", sessionKey="shop")
    assert answer.status_code == 200, answer.text
    entries = answer.json()["result"]
    assert [e["revision"] for e in entries] == [4, 3, 2, 1] and entries[0]["reset"] is True
    assert entries[2]["changes"] == [{"step": "Confirm access", "from": "in_progress", "to": "blocked"}]
    assert set(entries[0]) == {"revision", "at", "changes", "note", "cleared", "reset"}
    paged = (await rpc(client, "progressCard.history", "reader", sessionKey="agent:main:shop", limit=1, before=3)).json()
    assert [e["revision"] for e in paged["result"]] == [2]
    hello = (await rpc(client, "hello")).json()["result"]
    assert "progressCard.history" in hello["features"]["methods"]


@pytest.mark.parametrize("params, field", [
    ({"limit": 0}, "limit"), ({"limit": 201}, "limit"), ({"limit": "5"}, "limit"), ({"limit": True}, "limit"),
    ({"before": 0}, "before"), ({"before": 1.5}, "before"), ({"since": 1}, "since"),
])
async def test_history_params_are_checked(client: httpx.AsyncClient, params: dict[str, Any], field: str) -> None:
    answer = await rpc(client, "progressCard.history", sessionKey="shop", **params)
    assert answer.status_code == 400 and answer.json()["error"]["field"] == field


async def test_history_needs_the_read_scope_and_the_session(client: httpx.AsyncClient) -> None:
    assert (await rpc(client, "progressCard.history", "writeonly", sessionKey="shop")).status_code == 403
    assert (await rpc(client, "progressCard.history", "reader", sessionKey="elsewhere")).status_code == 403


# -- the command line -------------------------------------------------------------------------


def test_history_on_the_command_line(cli: CLI, tmp_path: Path) -> None:  # noqa: F811
    def put(*steps_: tuple[str, str]) -> None:
        body = {"plan": [{"step": s, "status": st} for s, st in steps_]}
        assert cli("card", "put", "--session", "shop", stdin=json.dumps(body)).returncode == 0

    put(("Confirm access", "in_progress"), ("Repair", "pending"))
    put(("Confirm access", "blocked"), ("Repair", "pending"))
    put(("Confirm access", "completed"), ("Repair", "in_progress"))
    as_json = cli("card", "history", "--session", "shop", "--format", "json")
    assert as_json.returncode == 0, as_json.stderr
    entries = json.loads(as_json.stdout)
    assert isinstance(entries, list) and [e["revision"] for e in entries] == [3, 2, 1]
    assert entries[1]["changes"] == [{"step": "Confirm access", "from": "in_progress", "to": "blocked"}]
    assert [e["revision"] for e in json.loads(cli("card", "history", "--session", "shop", "--limit", "1").stdout)] == [3]

    # text: one line per entry, in the machine's local time zone
    cli.env["TZ"] = "Asia/Kolkata"
    text = cli("card", "history", "--session", "shop", "--format", "text")
    assert text.returncode == 0, text.stderr
    lines = text.stdout.splitlines()
    assert len(lines) == 3
    local = datetime.fromtimestamp(iso_ms(entries[1]["at"]) / 1000, ZoneInfo("Asia/Kolkata"))
    assert lines[1] == f"{local:%Y-%m-%d %H:%M:%S}  rev 2  ⛔ Confirm access blocked"
    assert lines[0].endswith("rev 3  ✅ Confirm access done · ▶ Repair started")
    assert lines[2].endswith("rev 1  ▶ Confirm access started · ＋ Repair added")

    for args, words in [
        (["--limit", "0"], "--limit"),
        (["--limit", "201"], "--limit"),
        (["--limit", "500"], "progresscast: --limit: must be between 1 and 200, not '500' (see"),
        (["--format", "xml"], "--format"),
    ]:
        bad = cli("card", "history", "--session", "shop", *args)
        assert bad.returncode == 2 and words in bad.stderr and bad.stderr.count("\n") == 1, bad.stderr
    assert json.loads(cli("card", "history", "--session", "nothing-here").stdout) == []


def test_the_limits_named_on_the_command_line_are_the_historys() -> None:
    with pytest.raises(argparse.ArgumentTypeError, match=rf"^must be between 1 and {MAX_LIMIT}, not '500'$"):
        whole(MAX_LIMIT)("500")


def reference_changes(old: list[tuple[str, str]], new: list[tuple[str, str]]) -> list[dict[str, Any]]:
    """What changed, as the history promises it: the n-th step of a text matched with the
    n-th of the same text; changed or added steps in the new order, then removed ones in
    the old order."""

    def numbered(plan: list[tuple[str, str]]) -> list[tuple[tuple[str, int], str]]:
        seen: dict[str, int] = {}
        out = []
        for text, status_ in plan:
            seen[text] = seen.get(text, 0) + 1
            out.append(((text, seen[text]), status_))
        return out

    before = dict(numbered(old))
    after = numbered(new)
    kept = {key for key, _ in after}
    changes = [{"step": k[0], "from": before.get(k), "to": s} for k, s in after if before.get(k) != s]
    changes += [{"step": k[0], "from": s, "to": None} for k, s in numbered(old) if k not in kept]
    return changes


plans = st.lists(
    st.tuples(st.sampled_from(["A", "B", "C", "é \"q\""]), st.sampled_from(["pending", "completed", "blocked"])),
    max_size=6,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(old=plans, new=plans)
async def test_what_changed_matches_step_by_step_matching_for_any_two_plans(
    store: CardStore, old: list[tuple[str, str]], new: list[tuple[str, str]]
) -> None:
    owner = Owner("main", f"diff-{len(old)}-{len(new)}")
    await store.clear(owner)
    await store.put(owner, card(*old, markdown="n"))
    await store.put(owner, card(*new, markdown="n"))
    entry = (await store.history(owner, limit=1))[0]
    assert [c.to_json() for c in entry.changes] == reference_changes(old, new)
