"""The owner's asks and Stop, on the card store's one write path (`CardStore.asks`).

Every change is one script of scripts.py in the owner's slot (`ASK_OPEN`, `ASK_CLOSE`,
`ASK_SETTLE`, `RUN_STOP`): the check and the write together, so of two answers pressed
at once exactly one wins, and the other is handed the ask as the winner left it. Each
change is a line in the owner's history and an `ask.changed` (or `run.stop`) event, so
every chat following the owner looks again. Expiry is on the Redis clock.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, cast

from redis.commands.core import AsyncScript

from ..model.asks import (
    KEEP_CLOSED_MS,
    MAX_OPEN,
    Actor,
    Ask,
    AskInput,
    AskState,
    StopMark,
    asks_of,
    new_ask_id,
)
from ..model.owners import Owner
from ..stopping import still_wanted, to_the_end
from . import keys, scripts
from .errors import StoreError
from .keys import Layout

_READ = """
-- One ask (ARGV[1]) or all of them (''), with the Redis clock: read in the owner's
-- slot, as a Cluster wants it (a pipeline there takes no TIME).
local asks
if ARGV[1] == '' then asks = redis.call('HGETALL', KEYS[1]) else asks = redis.call('HGET', KEYS[1], ARGV[1]) end
return {asks, redis.call('TIME')}
"""


class ScriptRunner(Protocol):
    """What of the card store asks use: its Redis, its layout and how it runs a write script."""

    redis: Any

    async def layout(self) -> Layout: ...

    async def call(
        self, script: AsyncScript, owner: Owner, args: Sequence[str | int], *, arrived: float | None = None
    ) -> object: ...


@dataclass(frozen=True)
class Closing:
    """What became of an answer or a withdrawal: `ok` (this call closed the ask),
    `closed` (it had ended already: `ask` says how and by whom), `missing` (no such ask)."""

    outcome: str
    ask: Ask | None


class AskStore:
    def __init__(self, store: ScriptRunner) -> None:
        self.store = store
        redis = store.redis
        self._open = redis.register_script(scripts.ASK_OPEN)
        self._close = redis.register_script(scripts.ASK_CLOSE)
        self._settle = redis.register_script(scripts.ASK_SETTLE)
        self._stop = redis.register_script(scripts.RUN_STOP)
        self._read = redis.register_script(_READ)

    async def open(self, owner: Owner, ask: AskInput, *, ask_id: str | None = None) -> Ask:
        """Put a new ask to the owner's followers, under `ask_id` (default a new random
        one); `StoreError` when `MAX_OPEN` are open, or when that id was withdrawn before
        this open reached Redis (or is taken)."""
        body = {
            "askId": ask_id or new_ask_id(), "kind": ask.kind.value, "prompt": ask.prompt, "options": ask.options or [],
            "multi": ask.multi, "allowText": ask.allowText, "source": ask.source,
        }
        if ask.detail is not None:
            body["detail"] = ask.detail
        try:
            reply = cast(
                "list[Any]",
                await self.store.call(
                    self._open, owner,
                    [json.dumps(body, ensure_ascii=False), ask.timeoutSeconds * 1000, MAX_OPEN, KEEP_CLOSED_MS],
                ),
            )
        except asyncio.CancelledError:
            # Redis may have stored it before the caller stopped waiting (Ctrl-C, SIGTERM):
            # withdrawn, no chat offers a question nobody waits for (unknown: nothing done).
            await to_the_end(asyncio.ensure_future(self.withdraw(owner, str(body["askId"]))))
            raise
        if reply[0] == "full":
            raise StoreError("sessionKey", f"has {MAX_OPEN} open asks already; answer or withdraw one first")
        if reply[0] == "withdrawn":  # its withdraw came first: see `GONE_KEEP_MS`
            raise StoreError("askId", "was withdrawn before it was opened")
        if reply[0] == "taken":
            raise StoreError("askId", "is the id of another ask")
        stored = Ask.from_stored(str(reply[1]))
        assert stored is not None
        return stored

    async def all(self, owner: Owner) -> tuple[tuple[Ask, ...], int]:
        """The owner's asks (oldest first) and the store's clock (ms) when read."""
        lay = await self.store.layout()
        raw, now = cast("list[Any]", await self._read(keys=[lay.asks(owner)], args=[""]))
        pairs = dict(zip(raw[::2], raw[1::2], strict=True))
        return asks_of(pairs), _ms(now)

    async def get(self, owner: Owner, ask_id: str) -> tuple[Ask | None, int]:
        """One ask (None: unknown, or forgotten a day after it ended) and the store's clock (ms)."""
        lay = await self.store.layout()
        raw, now = cast("list[Any]", await self._read(keys=[lay.asks(owner)], args=[ask_id]))
        return (Ask.from_stored(raw) if raw else None), _ms(now)

    async def answer(
        self, owner: Owner, ask_id: str, by: Actor, *, options: Sequence[str] | None = None, text: str | None = None
    ) -> Closing:
        """Answer an ask: the first allowed answer wins. A wrong answer (a label the ask
        has not, text where it takes none) raises `CardError` and changes nothing."""
        ask, now = await self.get(owner, ask_id)
        if ask is None:
            return Closing("missing", None)
        if ask.state_at(now) is not AskState.open:
            await self.settle(owner)
            ask, _ = await self.get(owner, ask_id)
            return Closing("closed", ask)
        chosen, clean = ask.check_answer(list(options) if options is not None else None, text)
        answer: dict[str, Any] = {"by": by.to_json(), "options": list(chosen)}
        if clean is not None:
            answer["text"] = clean
        return await self._closing(owner, ask_id, AskState.answered, json.dumps(answer, ensure_ascii=False))

    async def withdraw(self, owner: Owner, ask_id: str) -> Closing:
        """The agent stopped waiting (answered in its terminal, run ended, cancelled)."""
        return await self._closing(owner, ask_id, AskState.withdrawn, "")

    async def _closing(self, owner: Owner, ask_id: str, state: AskState, answer: str) -> Closing:
        outcome, raw = cast(
            "list[str]",
            await self.store.call(self._close, owner, [ask_id, state.value, answer, KEEP_CLOSED_MS]),
        )
        return Closing(str(outcome), Ask.from_stored(raw) if raw else None)

    async def settle(self, owner: Owner) -> int:
        """Mark the open asks past their expiry as expired; how many did."""
        return int(cast("int", await self.store.call(self._settle, owner, [KEEP_CLOSED_MS])))

    async def wait(self, owner: Owner, ask_id: str, timeout: float) -> Ask | None:
        """The ask once it is no longer open, or as it is when `timeout` seconds passed
        (None: no such ask). Polls the ask's one field: cheap, and any process may answer."""
        deadline = time.monotonic() + max(0.0, timeout)
        pause = 0.05
        while True:
            await still_wanted()  # a cancellation a Redis call swallowed (it can, mid-command) still ends the wait
            ask, now = await self.get(owner, ask_id)
            if ask is None:
                return None
            if ask.state_at(now) is not AskState.open:
                if ask.state is AskState.open:  # past its expiry: made so for everyone
                    await self.settle(owner)
                    ask, _ = await self.get(owner, ask_id)
                return ask
            left = deadline - time.monotonic()
            if left <= 0:
                return ask
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 1.5, 0.5)

    async def stop(self, owner: Owner, by: Actor) -> tuple[str, StopMark | None]:
        """Record a Stop on the owner's active run: `ok`, `already` (pressed before: the
        first mark), or `norun` (no run is active)."""
        outcome, raw = cast(
            "list[str]", await self.store.call(self._stop, owner, [json.dumps(by.to_json(), ensure_ascii=False)])
        )
        return str(outcome), StopMark.from_stored(raw)

    async def arm_stop(self, owner: Owner, by: Actor, seconds: float) -> bool:
        """A first press of Stop: armed for `seconds` unless already armed. True: this
        press armed it; False: it was armed (by `armed_by`)."""
        lay = await self.store.layout()
        body = json.dumps(by.to_json(), ensure_ascii=False)
        armed = await self.store.redis.set(lay.stop_armed(owner), body, px=max(1, int(seconds * 1000)), nx=True)
        if armed:
            await self._armed_changed(owner)
        return bool(armed)

    async def armed_by(self, owner: Owner) -> Actor | None:
        """Who armed Stop, while it waits for its confirming press."""
        lay = await self.store.layout()
        raw = await self.store.redis.get(lay.stop_armed(owner))
        if not raw:
            return None
        try:
            return Actor.from_json(json.loads(raw))
        except ValueError:
            return None

    async def disarm(self, owner: Owner) -> None:
        """Stop was confirmed, or the window passed: the button reads Stop again."""
        lay = await self.store.layout()
        if await self.store.redis.delete(lay.stop_armed(owner)):
            await self._armed_changed(owner)

    async def _armed_changed(self, owner: Owner) -> None:
        # Published as a Stop event (the run's Stop changed how it shows): every chat looks again.
        await self.store.call(self._stop, owner, [""])

    async def followed(self, owner: Owner) -> bool:
        """Whether a chat follows the owner, so its asks reach one (the web card shows them anyway)."""
        found = await self.store.redis.exists(*(keys.channel_followers(c, owner) for c in keys.CHAT_CHANNELS))
        return bool(found)

    async def stop_mark(self, owner: Owner, run_id: str | None = None) -> StopMark | None:
        """The Stop pressed on the owner's current run (or on `run_id` only, when given)."""
        lay = await self.store.layout()
        run_now, raw = await self.store.redis.hmget(lay.run(owner), ["runId", "stop"])
        if run_id is not None and run_now != run_id:
            return None
        return StopMark.from_stored(raw)


def _ms(now: Any) -> int:
    seconds, micros = now
    return int(seconds) * 1000 + int(micros) // 1000


__all__ = ["AskStore", "Closing"]
