"""What every agent path shares when it asks a person and waits (docs/agents.md,
"Answering from chat"): open the asks, wait for all of them to be answered, give up at
a deadline or when Stop is pressed on the run — and never leave an ask open behind.

The hooks, the MCP tool and A2A follow use it; each turns the outcome into its agent's
own format.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..model.asks import Ask, AskInput, AskState, StopMark
from ..model.owners import Owner
from ..stopping import to_the_end
from ..store.cards import CardStore

POLL = 0.5
"""Seconds between looks at the asks and the run's Stop while waiting."""
PLATFORMS = {"telegram": "Telegram", "slack": "Slack", "discord": "Discord", "matrix": "Matrix", "web": "the web card"}


def stopped_by(mark: StopMark) -> str:
    """`Stopped from Telegram by Ana`: what an agent is told when Stop was pressed."""
    where = PLATFORMS.get(mark.by.platform, mark.by.platform or "chat")
    return f"Stopped from {where} by {mark.by.shown}"


def answered_by(ask: Ask) -> str:
    """`Telegram by Ana`: who answered, and where."""
    assert ask.answer is not None
    by = ask.answer.by
    return f"{PLATFORMS.get(by.platform, by.platform or 'chat')} by {by.shown}"


@dataclass(frozen=True)
class Waited:
    """How a wait ended: every ask answered (`answered`, in the order asked), Stop pressed
    on the run (`stop`), an ask ended unanswered (`ended`), or none of these in time."""

    answered: tuple[Ask, ...] = ()
    stop: StopMark | None = None
    ended: Ask | None = None
    """The ask that ended unanswered (expired, withdrawn), as it ended."""


async def ask_and_wait(
    store: CardStore,
    owner: Owner,
    asks: Sequence[AskInput],
    wait: float,
    *,
    watch_stop: bool = True,
    opened_all: Callable[[Sequence[Ask]], None] | None = None,
) -> Waited:
    """Open `asks` together and wait up to `wait` seconds for all of them (`opened_all`
    is told once they are open). Whatever the outcome (a cancellation too), the asks
    still open are withdrawn, so no chat offers a question nobody waits for."""
    deadline = time.monotonic() + wait
    run_id = None
    if watch_stop:
        view = await store.view(owner)
        run_id = view.run_id if view.run.value == "active" else None
        if run_id is not None and (mark := await store.asks.stop_mark(owner, run_id)) is not None:
            return Waited(stop=mark)
    opened: list[Ask] = []
    done: dict[str, Ask] = {}
    try:
        for body in asks:
            # Stopped while it is opened, the store withdraws it (`AskStore.open`).
            opened.append(await store.asks.open(owner, body))
        if opened_all is not None:
            opened_all(opened)
        while True:
            for ask in opened:
                if ask.ask_id in done:
                    continue
                left = deadline - time.monotonic()
                found = await store.asks.wait(owner, ask.ask_id, max(0.0, min(POLL, left)))
                if found is None or found.state in (AskState.expired, AskState.withdrawn):
                    return Waited(ended=found)
                if found.state is AskState.answered:
                    done[ask.ask_id] = found
            if len(done) == len(opened):
                return Waited(answered=tuple(done[a.ask_id] for a in opened))
            if run_id is not None and (mark := await store.asks.stop_mark(owner, run_id)) is not None:
                return Waited(stop=mark)
            if time.monotonic() >= deadline:
                return Waited()
    finally:
        left_open = [a for a in opened if a.ask_id not in done]
        if left_open:
            await to_the_end(asyncio.ensure_future(_withdraw(store, owner, left_open)))


async def _withdraw(store: CardStore, owner: Owner, asks: Sequence[Ask]) -> None:
    for ask in asks:
        await store.asks.withdraw(owner, ask.ask_id)


__all__ = ["Waited", "answered_by", "ask_and_wait", "stopped_by"]
