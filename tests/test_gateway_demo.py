"""`progresscast demo`: the example played through the gateway's RPC."""

from __future__ import annotations

import argparse
import asyncio
import io
import os
import re
import subprocess
import sys
from pathlib import Path

import httpx
from redis.asyncio import Redis

from progresscast.config import GatewaySettings, Settings
from progresscast.demo import SESSION, example_session, run_demo
from progresscast.embedded import stop_embedded
from progresscast.owners import Owner
from progresscast.store import CardStore


def demo_args(redis_url: str, *, serve: bool = False) -> argparse.Namespace:
    return argparse.Namespace(redis=redis_url, serve=serve, delay=0.0, config=None)


def settings() -> Settings:
    return Settings(gateway=GatewaySettings(listen="127.0.0.1:0"))


async def test_demo_plays_the_example_through_the_gateway_and_exits(redis_url: str, redis: Redis) -> None:
    out = io.StringIO()
    await asyncio.wait_for(run_demo(demo_args(redis_url), settings(), out=out), 60)
    text = out.getvalue()
    page = re.search(r"Watch the card live: (http://127\.0\.0\.1:\d+/sessions/agent:main:demo-ticket-4821\?token=\S+)", text)
    assert page, text
    # Every entry of the example is one numbered step, each followed by the Telegram draft.
    assert len(re.findall(r"^\[\d+\] ", text, re.M)) == len(example_session())
    assert text.count("Telegram draft:") == len(example_session())
    assert "progressCard.put → Progress card updated (rev 2, 0/4 done)" in text
    blocked = next(part for part in text.split("\n[") if "2/4 done" in part.splitlines()[0])
    assert "⛔ Fix and add a regression test" in blocked  # as Telegram shows it: the blocked mark
    assert "run.end → completed" in text
    assert "progressCard.put → Progress card cleared" in text
    # It went through the real store, and ended with the card cleared.
    store = CardStore(redis)
    owner = Owner("main", SESSION)
    assert await store.get(owner) is None
    assert await store.revision(owner) == 1 + sum("card" in e for e in example_session())  # reset + writes
    # ...and the gateway is gone.
    async with httpx.AsyncClient() as client:
        try:
            await client.get(page.group(1), timeout=1)
        except httpx.TransportError:
            pass
        else:
            raise AssertionError("the demo's gateway still answers after it exited")


async def test_demo_serve_keeps_the_page_up(redis_url: str) -> None:
    out = io.StringIO()
    demo = asyncio.create_task(run_demo(demo_args(redis_url, serve=True), settings(), out=out))
    try:
        async with asyncio.timeout(30):
            while "Still serving" not in out.getvalue():
                assert not demo.done(), out.getvalue()
                await asyncio.sleep(0.05)
        url = re.search(r"Watch the card live: (\S+)", out.getvalue())
        assert url
        async with httpx.AsyncClient(follow_redirects=True) as client:
            response = await client.get(url.group(1))
        assert response.status_code == 200 and 'data-session-key="demo-ticket-4821"' in response.text
        assert not demo.done()
    finally:
        demo.cancel()
        await asyncio.gather(demo, return_exceptions=True)


def test_progresscast_demo_command_exits_by_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PROGRESSCAST_HOME": str(home)}
    env.pop("PROGRESSCAST_REDIS_URL", None)
    config = tmp_path / "pc.toml"
    config.write_text('[gateway]\nlisten = "127.0.0.1:0"\n')
    try:
        done = subprocess.run(
            [sys.executable, "-m", "progresscast.cli", "demo", "--config", str(config), "--delay", "0"],
            env=env, capture_output=True, text=True, timeout=60,
        )
    finally:
        stop_embedded(home)
    assert done.returncode == 0, done.stderr
    assert "Watch the card live: http://127.0.0.1:" in done.stdout
    assert "Progress card cleared" in done.stdout and "Demo done." in done.stdout
