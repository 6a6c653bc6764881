"""Retention on a scaled clock (`store.retention` of a second or two): an owner nobody
writes to is gone with every key it has and leaves the index; one written to stays;
what chats made for it expires too; the retention is the store's, whoever writes."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis as sync_redis
from redis.asyncio import Redis

from a2a_updates import status, ts
from progresscast.agents.a2a.apply import Source, UpdateApplier
from progresscast.agents.a2a.mapping import parse_update
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings
from progresscast.config.settings import Settings
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.store.embedded import stop_embedded
from progresscast.store.retention import sweep
from progresscast.testing import BotAPIEmulator
from test_serve import TOKEN, environment
from test_serve_supervised import Log, put

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")

IDLE = Owner("main", "idle")
BUSY = Owner("main", "busy")


def settings(retention: str | float) -> Settings:
    return Settings.model_validate({"store": {"retention": retention}})


async def until(condition: Callable[[], Any], timeout: float = 15.0) -> None:
    async with asyncio.timeout(timeout):
        while not await condition():
            await asyncio.sleep(0.05)


async def owner_keys(redis: Redis, owner: Owner) -> list[str]:
    lay = await CardStore(redis).layout()
    names = [*lay.owner_keys(owner), lay.a2a_order(owner)]
    return [name for name in names if await redis.exists(name)]


async def test_an_owner_nobody_writes_to_is_gone_with_all_it_has(redis_url: str) -> None:
    redis = connect(redis_url, settings(1.5))
    store = CardStore(redis)
    try:
        for owner in (IDLE, BUSY):
            await store.start_run(owner, "r1")
            await store.put(owner, CardInput.parse({"plan": [{"step": "Read", "status": "in_progress"}]}))
            await UpdateApplier(redis, agent_id="main", known_agents=frozenset({"main"}), default_agent="main").apply(
                parse_update(status("task-1", at=ts(1), text="Working", context=owner.session_key)), Source.stream
            )
            await store.update_activity(owner, headline="Reading", tool="read a.py")
            await store.reset(owner)
            await store.put(owner, CardInput.parse({"markdown": "after the reset"}))
        assert len(await owner_keys(redis, IDLE)) == 9  # card, rev, resetAt, history, run, activity, tools, last, a2a
        for name in await owner_keys(redis, IDLE):
            assert 0 < await redis.pttl(name) <= 1500, name  # counted from the last write

        async def idle_gone() -> bool:
            await store.update_activity(BUSY, tool="still busy")  # one owner keeps being written
            return not await owner_keys(redis, IDLE)

        await until(idle_gone)
        assert len(await owner_keys(redis, BUSY)) == 9
        assert await store.get(IDLE) is None and (await store.view(IDLE)).empty
        # The index keeps the entry until the sweep; the sweep leaves the busy owner.
        assert {k async for k, _ in store.owners()} == {IDLE.display_key, BUSY.display_key}
        assert await sweep(redis) == 1
        assert [k async for k, _ in store.owners()] == [BUSY.display_key]
        # Written again, an expired owner starts afresh.
        assert (await store.put(IDLE, CardInput.parse({"markdown": "back"}))).revision == 1
    finally:
        await redis.aclose()


async def test_a_run_written_since_keeps_an_old_index_entry(redis_url: str) -> None:
    """Starting and ending runs leave the owner's place in listings, but they are writes."""
    redis = connect(redis_url, settings(1.0))
    store = CardStore(redis)
    try:
        await store.put(BUSY, CardInput.parse({"markdown": "m"}))
        lay = await store.layout()
        index = lay.owners_of(BUSY)
        written = await redis.zscore(index, BUSY.display_key)

        async def index_entry_is_old() -> bool:
            await store.start_run(BUSY, "r")
            seconds, micros = await redis.time()
            return seconds * 1000 + micros // 1000 - written > 1500

        await until(index_entry_is_old)
        assert await sweep(redis) == 0
        assert [k async for k, _ in store.owners()] == [BUSY.display_key]
    finally:
        await redis.aclose()


async def test_the_retention_is_the_stores_whoever_writes(redis_url: str) -> None:
    configured = connect(redis_url, settings("2s"))
    hook = connect(redis_url)  # no store.retention of its own, as an agent hook without the config
    try:
        await CardStore(configured).put(IDLE, CardInput.parse({"markdown": "m"}))
        await CardStore(hook).put(BUSY, CardInput.parse({"markdown": "m"}))
        lay = await CardStore(hook).layout()
        assert 1000 < await hook.pttl(lay.card(BUSY)) <= 2000
        forever = connect(redis_url, settings(0))  # 0: kept for ever, from the next write on
        await CardStore(forever).put(BUSY, CardInput.parse({"markdown": "m2"}))
        assert await hook.pttl(lay.card(BUSY)) == -1
        await forever.aclose()
    finally:
        await configured.aclose()
        await hook.aclose()


@pytest.mark.parametrize(("raw", "seconds"), [("30d", 30 * 86400), ("12h", 43200), ("90m", 5400), ("45s", 45), (2.5, 2.5),
                                              ("0", 0)])
def test_retention_reads_units(raw: str | float, seconds: float) -> None:
    assert settings(raw).store.retention == seconds


def test_a_retention_that_is_not_a_duration_names_the_setting(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[store]\nretention = "a month"\n')
    with pytest.raises(ConfigError, match=r"store.retention: .*'a month' must be seconds, or a number with s, m, h or d"):
        load_settings(path)
    assert Settings().store.retention == 30 * 86400


async def test_serve_forgets_an_owner_and_what_chats_made_for_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.05")
    home = tmp_path / "home"
    async with BotAPIEmulator() as api:
        path = tmp_path / "progresscast.toml"
        path.write_text(f"""
[store]
retention = "3s"
[gateway]
listen = "127.0.0.1:0"
[[gateway.tokens]]
token = "env:PROGRESSCAST_TOKEN"
scopes = ["operator.read", "operator.write"]
[channels.telegram]
token = "env:TELEGRAM_BOT_TOKEN"
apiBaseUrl = "{api.base_url}"
access = "open"  # what any chat's follow makes expires too
""")
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "serve", "--config", str(path),
            stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
            env=environment(home, PROGRESSCAST_TOKEN=TOKEN, TELEGRAM_BOT_TOKEN=api.token,
                            PROGRESSCAST_TIME_SCALE="0.05"),
        )
        log = Log(proc)
        raw = None
        try:
            base = (await log.matching(r"gateway and web page on (http://\S+)")).group(1)
            await log.matching(r"Telegram adapter running as")
            raw = sync_redis.Redis(unix_socket_path=str(home / "redis.sock"), decode_responses=True)
            before = set(raw.keys("*"))
            api.send_user_message(4242, "/follow t-1")
            api.send_user_message(4343, "/follow nobody-writes-this")  # a stranger's guess
            api.send_user_message(4242, "/mode progress")
            assert (await put(base, "t-1", "A card nobody updates")).status_code == 200

            def shown(chat: int, text: str) -> Callable[[], bool]:
                return lambda: any(text in m.text for m in api.chat(chat).visible())

            await api.wait_for(shown(4242, "A card nobody updates"), 15)
            await api.wait_for(shown(4242, "Mode for this chat: progress"), 15)
            await api.wait_for(shown(4343, "Following agent:main:nobody-writes-this"), 15)
            made = set(raw.keys("*")) - before
            owner = Owner("main", "t-1")
            assert {keys.channel_followers("tg", owner), keys.channel_follows("tg", 4242),
                    keys.channel_follows("tg", 4343), keys.channel_prefs("tg", 4242)} <= made, made

            def left() -> list[str]:
                # (the bot's own keys — lease, fence, hand-off — and the shard streams stay)
                return [k for k in raw.keys("*") if k in made and not k.startswith(("pc:events:", "pc:tg:bot:"))]

            async def forgotten() -> bool:
                return not left()

            try:
                await until(forgotten, 30)
            except TimeoutError:
                raise AssertionError(f"still there: {left()}") from None
            index = [k for k in raw.keys("pc:owners:*")]
            assert index == []  # the sweep removed the entry; an empty sorted set is no key
            async with httpx.AsyncClient(timeout=5) as client:
                page = await client.get(f"{base}/", params={"token": TOKEN})
            assert "t-1" not in page.text
            assert proc.returncode is None, log.text
        finally:
            if raw is not None:
                raw.close()
            if proc.returncode is None:
                proc.terminate()
                try:
                    await asyncio.wait_for(proc.wait(), 30)
                except TimeoutError:
                    proc.kill()
                    raise AssertionError(f"serve did not stop on SIGTERM:\n{log.text}") from None
            await log.close()
            stop_embedded(home)

