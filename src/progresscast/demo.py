"""`progresscast demo`: the bundled example session, played on the store."""

from __future__ import annotations

import argparse
import asyncio
import json
from importlib import resources
from typing import Any

from .card import CardInput
from .config import Settings
from .connections import connect, redis_url
from .owners import resolve_owner
from .store import CardStore


def example_session() -> list[dict[str, Any]]:
    """The bundled example: a list of writes (`{"card": {...}}`) and activity updates."""
    text = resources.files("progresscast").joinpath("examples/session.json").read_text()
    return json.loads(text)


async def run_demo(args: argparse.Namespace, settings: Settings) -> None:
    redis = connect(redis_url(args.redis, settings))
    store = CardStore(redis)
    owner = resolve_owner(
        "demo-ticket-4821",
        None,
        known_agents=settings.agents.known_set,
        default_agent=settings.agents.default,
    )
    delay = 0.3 if args.delay is None else args.delay
    try:
        await store.reset(owner)  # each demo starts from a clean card
        await store.start_run(owner, "demo-run")
        for step in example_session():
            if "activity" in step:
                await store.update_activity(owner, **step["activity"])
                continue
            result = await store.put(owner, CardInput.parse(step["card"]))
            print(result.receipt)
            card = await store.get(owner)
            print(json.dumps(card.to_json() if card else None, ensure_ascii=False, indent=2))
            await asyncio.sleep(delay)
    finally:
        await redis.aclose()
