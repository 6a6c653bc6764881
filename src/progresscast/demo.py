"""`progresscast demo`: the bundled example session, played through the gateway.

The demo starts the gateway and web page on the store (the embedded Redis unless
told otherwise), mints a one-off token, and plays the example through `POST /v1/rpc`
— the same path an agent harness takes — printing the web address and, after each
step, the text the Telegram renderer would send. It exits when the example is done
(well within a minute); with `--serve` it keeps serving until interrupted.

Entries of the example (`examples/session.json`), in order:

    {"card": {...}}                   progressCard.put with this card input ({} clears)
    {"activity": {...}}               activity.put (headline, tool, answer)
    {"run": {"state": "completed"}}   run.end of the demo run (completed|failed|canceled)
    {"reset": true}                   progressCard.reset
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import secrets
import sys
import textwrap
from importlib import resources
from typing import Any, TextIO
from urllib.parse import quote

import httpx

from .config import GatewayToken, RenderSettings, Settings
from .connections import connect, redis_url
from .gateway.auth import READ, WRITE
from .gateway.server import address, bind, run_gateway
from .owners import Owner
from .store import CardStore

SESSION = "demo-ticket-4821"
RUN_ID = "demo-run"
DEFAULT_DELAY = 0.8
SERVE_DELAY = 2.0  # someone is about to open the page: give them time to watch


class DemoError(RuntimeError):
    pass


def example_session() -> list[dict[str, Any]]:
    """The bundled example: a list of writes (`{"card": {...}}`) and activity updates."""
    text = resources.files("progresscast").joinpath("examples/session.json").read_text()
    steps: list[dict[str, Any]] = json.loads(text)
    return steps


def with_demo_token(settings: Settings, token: str) -> Settings:
    """The settings plus a one-off token that may read and write every session."""
    tokens = [*settings.gateway.tokens, GatewayToken(token=token, scopes=[READ, WRITE], sessions=["*"])]
    return settings.model_copy(update={"gateway": settings.gateway.model_copy(update={"tokens": tokens})})


class Rpc:
    """A tiny client of `POST /v1/rpc` that raises on `{"ok": false}`."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def __call__(self, method: str, **params: Any) -> Any:
        response = await self.client.post("/v1/rpc", json={"method": method, "params": params})
        body = response.json()
        if not body.get("ok"):
            raise DemoError(f"{method}: {body['error']['message']} (HTTP {response.status_code})")
        return body["result"]


def telegram_text(payload: dict[str, Any] | None) -> str:
    if payload is None:
        return "(nothing to show: the adapter deletes the draft)"
    params = payload.get("params", {})
    return str(params.get("text") or json.dumps(params, ensure_ascii=False))


async def play(
    rpc: Rpc,
    store: CardStore,
    owner: Owner,
    settings: Settings,
    *,
    delay: float,
    out: TextIO,
) -> None:
    """Play the example through the gateway, printing the Telegram draft after each step."""
    from .render import render_telegram

    def say(text: str = "") -> None:
        print(text, file=out, flush=True)

    await rpc("progressCard.reset", sessionKey=owner.session_key, agentId=owner.agent_id)
    await rpc("run.start", sessionKey=owner.session_key, agentId=owner.agent_id, runId=RUN_ID)
    who = {"sessionKey": owner.session_key, "agentId": owner.agent_id}
    for number, entry in enumerate(example_session(), 1):
        if "card" in entry:
            result = await rpc("progressCard.put", **who, **entry["card"])
            what = f"progressCard.put → {result['receipt']}"
        elif "activity" in entry:
            await rpc("activity.put", **who, **entry["activity"])
            what = "activity.put → " + ", ".join(f"{k}: {v}" for k, v in entry["activity"].items())
        elif "run" in entry:
            state = entry["run"].get("state", "completed")
            await rpc("run.end", **who, runId=RUN_ID, state=state)
            what = f"run.end → {state}"
        elif entry.get("reset"):
            result = await rpc("progressCard.reset", **who)
            what = f"progressCard.reset → {result['receipt']}"
        else:
            raise DemoError(f"example entry {number}: expected card, activity, run or reset")
        # What a Telegram chat following this session would show now (classic HTML).
        view = await store.view(owner)
        shown = telegram_text(render_telegram(view, RenderSettings(), templates_dir=settings.templates.dir))
        say(f"[{number}] {what}")
        say("    Telegram draft:")
        say(textwrap.indent(shown, "    │ "))
        say()
        await asyncio.sleep(delay)


async def run_demo(args: argparse.Namespace, settings: Settings, *, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    token = secrets.token_urlsafe(18)
    settings = with_demo_token(settings, token)
    serving = bool(getattr(args, "serve", False))
    delay = args.delay if args.delay is not None else (SERVE_DELAY if serving else DEFAULT_DELAY)
    redis = connect(redis_url(args.redis, settings))
    store = CardStore(redis)
    owner = Owner(agent_id=settings.agents.default, session_key=SESSION)
    # The configured address, or any free port when something else holds it.
    sock = bind(settings.gateway.listen, fallback=True)
    base = address(sock)
    started = asyncio.Event()
    gateway = asyncio.create_task(run_gateway(settings, redis, sock=sock, started=started))
    try:
        await asyncio.wait_for(started.wait(), 10)
        page = f"{base}/sessions/{quote(owner.display_key, safe=':')}?token={token}"
        print(f"progresscast demo: gateway and web page on {base}", file=out)
        print(f"Watch the card live: {page}", file=out)
        print(f"(RPC: POST {base}/v1/rpc with 'Authorization: Bearer {token}')", file=out)
        print(file=out, flush=True)
        headers = {"Authorization": f"Bearer {token}"}
        async with httpx.AsyncClient(base_url=base, headers=headers, timeout=10) as client:
            await play(Rpc(client), store, owner, settings, delay=delay, out=out)
        if serving:
            print(f"Still serving on {base} — press Ctrl-C to stop.", file=out, flush=True)
            await gateway
        else:
            print("Demo done. `progresscast demo --serve` keeps the page up.", file=out, flush=True)
    finally:
        gateway.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await gateway
        await redis.aclose()
