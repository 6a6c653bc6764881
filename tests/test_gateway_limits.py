"""The gateway's smaller edges, as a careless operator or a hostile client meets them:
the login cookie behind a TLS-terminating proxy, live streams per token, short tokens
at start, agent-supplied text in the log, and every error answered in one place
(Redis down: the API's JSON, the pages' HTML) — over HTTP, on a real Redis."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from redis.asyncio import Redis

from a2a_updates import snapshot, ts
from conftest import free_port
from progresscast.agents.a2a.mapping import EXTENSION_URI
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings
from progresscast.config.settings import Settings
from progresscast.gateway import create_app
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from test_gateway_rpc import gateway_settings
from test_gateway_sse import serving, subscribe


def asgi(settings: Settings, redis: Any, *, client: tuple[str, int] = ("127.0.0.1", 50000), https: bool = False) -> httpx.AsyncClient:
    app = create_app(settings, redis)
    base = "https://gw" if https else "http://gw"
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app, client=client), base_url=base, timeout=10)


# -- the login cookie ----------------------------------------------------------------------


async def test_the_cookie_is_secure_when_a_trusted_proxy_on_another_host_says_https(redis: Redis) -> None:
    settings = gateway_settings(trustedProxies=["10.0.0.0/8"])
    forwarded = {"X-Forwarded-Proto": "https"}
    async with asgi(settings, redis, client=("10.1.2.3", 40000)) as proxy:
        signed = await proxy.get("/?token=reader", headers=forwarded)
        assert signed.status_code == 303 and "Secure" in signed.headers["set-cookie"]
        form = await proxy.post("/login", data={"token": "reader", "next": "/"}, headers=forwarded)
        assert "Secure" in form.headers["set-cookie"]
        assert "Secure" not in (await proxy.get("/?token=reader")).headers["set-cookie"]  # the proxy said http
    # Anyone else saying so is not believed.
    async with asgi(settings, redis, client=("192.0.2.9", 40000)) as stranger:
        assert "Secure" not in (await stranger.get("/?token=reader", headers=forwarded)).headers["set-cookie"]


async def test_the_cookie_is_secure_whenever_the_public_url_is_https(redis: Redis) -> None:
    async with asgi(gateway_settings(publicUrl="https://cards.example.org"), redis, client=("192.0.2.9", 1)) as http:
        assert "Secure" in (await http.get("/?token=reader")).headers["set-cookie"]
        logout = await http.post("/logout")
        assert "Secure" in logout.headers["set-cookie"]


def test_proxies_and_public_url_are_checked_at_load(tmp_path: Path) -> None:
    config = tmp_path / "c.toml"
    for table, message in [
        ('trustedProxies = ["lb.internal"]', "gateway.trustedProxies"),
        ('publicUrl = "cards.example.org"', "gateway.publicUrl"),
        ("maxStreamsPerToken = 0", "gateway.maxStreamsPerToken"),
    ]:
        config.write_text(f"[gateway]\n{table}\n")
        with pytest.raises(ConfigError, match=message):
            load_settings(config)


# -- live streams per token ----------------------------------------------------------------


async def test_live_streams_per_token_are_capped(redis: Redis) -> None:
    async with serving(redis, maxStreamsPerToken=3) as live:
        async with subscribe(live.base, "reader", sessionKey="s1"), subscribe(live.base, "reader", sessionKey="s2"):
            async with subscribe(live.base, "reader", sessionKey="s3"):
                async with httpx.AsyncClient(base_url=live.base, timeout=10) as http:
                    fourth = await http.get("/v1/events", params={"sessionKey": "s4"},
                                            headers={"Authorization": "Bearer reader"})  # fmt: skip
                assert fourth.status_code == 429, fourth.text
                assert fourth.json()["error"]["code"] == "too_many_streams"
                assert "gateway.maxStreamsPerToken" in fourth.json()["error"]["message"]
                async with subscribe(live.base, "writer", sessionKey="s1"):
                    pass  # another token has its own
            # One closed: its slot is free again once the server saw it go.
            async def reopened() -> bool:
                async with httpx.AsyncClient(base_url=live.base, timeout=10) as http:
                    async with http.stream("GET", "/v1/events", params={"sessionKey": "s4"},
                                           headers={"Authorization": "Bearer reader"}) as answer:  # fmt: skip
                        return answer.status_code == 200

            async with asyncio.timeout(10):
                while not await reopened():
                    await asyncio.sleep(0.05)


# -- short tokens at start -----------------------------------------------------------------



def serve_config(tmp_path: Path, redis_url: str, listen: str, token: str) -> Path:
    config = tmp_path / "serve.toml"
    config.write_text(
        f"[store]\nurl = {json.dumps(redis_url)}\n[gateway]\nlisten = {json.dumps(listen)}\n"
        f'[[gateway.tokens]]\ntoken = "long-enough-token-0123"\n[[gateway.tokens]]\ntoken = {json.dumps(token)}\n'
    )
    return config


def serve_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env["PROGRESSCAST_HOME"] = str(tmp_path / "home")
    return env


async def test_a_short_token_stops_a_gateway_listening_beyond_loopback(redis_url: str, tmp_path: Path) -> None:
    config = serve_config(tmp_path, redis_url, f"0.0.0.0:{free_port()}", "short")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "serve", "--config", str(config), env=serve_env(tmp_path),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    lines = [line for line in err.decode().splitlines() if line.strip()]
    assert proc.returncode == 2, lines
    assert lines[-1].startswith("progresscast: gateway.tokens[1].token: 5 characters is too short"), lines


async def test_a_short_token_on_loopback_is_warned_about(redis_url: str, tmp_path: Path) -> None:
    port = free_port()
    config = serve_config(tmp_path, redis_url, f"127.0.0.1:{port}", "short")
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "serve", "--config", str(config), env=serve_env(tmp_path),
        stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    assert proc.stderr is not None
    said = []
    try:
        async with asyncio.timeout(60):
            while not any("gateway and web page on" in s for s in said):
                line = (await proc.stderr.readline()).decode()
                assert line, said
                said.append(line)
    finally:
        proc.terminate()
        await asyncio.wait_for(proc.wait(), 30)
    assert any("gateway.tokens[1].token: 5 characters is short" in s for s in said), said


# -- agent-supplied text in the log -----------------------------------------------------


async def test_an_agents_task_id_cannot_forge_log_lines(redis: Redis, caplog: pytest.LogCaptureFixture) -> None:
    forged = "t1\n2030-01-01 00:00:00 progresscast ERROR an operator should act on this"
    body = snapshot(forged, at=ts(1), context="ctx-log")
    body["task"]["metadata"] = {EXTENSION_URI: {"steps": [{"label": "a", "state": "nope"}]}}
    with caplog.at_level(logging.INFO):
        async with asgi(gateway_settings(), redis) as http:
            answer = await http.post("/v1/a2a/push", json=body, headers={"Authorization": "Bearer writer"})
    assert answer.status_code == 200 and "planNotApplied" in answer.json()["result"], answer.text
    lines = [r.getMessage() for r in caplog.records if "plan not applied" in r.getMessage()]
    assert lines and all("\n" not in line for line in lines), lines
    assert "an operator should act on this" in lines[0]  # shown, escaped


# -- errors answered in one place ------------------------------------------------------------


async def test_redis_down_is_503_in_the_shape_of_each_route() -> None:
    dead = Redis.from_url("redis://127.0.0.1:1/0", decode_responses=True, socket_connect_timeout=0.5)
    settings = gateway_settings().model_copy(
        update={"channels": Settings.model_validate(
            {"channels": {"telegram": {"webhook": {"url": "https://x.example/telegram/h", "secretToken": "s"}}}}
        ).channels}
    )  # fmt: skip
    writer = {"Authorization": "Bearer writer"}
    try:
        async with asgi(settings, dead) as http:
            rpc = await http.post("/v1/rpc", json={"id": 7, "method": "progressCard.get", "params": {"sessionKey": "a"}},
                                  headers=writer)  # fmt: skip
            assert (rpc.status_code, rpc.json()["error"]["code"], rpc.json()["id"]) == (503, "unavailable", 7)
            push = await http.post("/v1/a2a/push", json=snapshot("t1", at=ts(1), context="ctx"), headers=writer)
            assert (push.status_code, push.json()["error"]["code"]) == (503, "unavailable")
            card = await http.get("/v1/card", params={"sessionKey": "a"}, headers=writer)
            assert (card.status_code, card.json()["error"]["code"]) == (503, "unavailable")
            hook = await http.post("/telegram/h", json={"update_id": 1}, headers={"X-Telegram-Bot-Api-Secret-Token": "s"})
            assert (hook.status_code, hook.json()["error"]["code"]) == (503, "unavailable")
            http.cookies.set("progresscast_token", "writer")
            for path in ("/", "/sessions/a"):
                page = await http.get(path)
                assert page.status_code == 503 and "Store unavailable" in page.text, path
                assert page.headers["content-type"].startswith("text/html")
            bad = await http.get("/sessions/agent:ghost:a")
            assert bad.status_code == 400 and "No such session" in bad.text
    finally:
        await dead.aclose()


async def test_a_body_error_on_a_page_is_a_page(redis: Redis) -> None:
    async with asgi(gateway_settings(), redis) as http:
        answer = await http.post("/login", content=b"token=" + b"x" * 9000,
                                 headers={"Content-Type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert answer.status_code == 413 and answer.headers["content-type"].startswith("text/html")
    assert "8 KiB" in answer.text
    assert await CardStore(redis).get(Owner("main", "a")) is None
