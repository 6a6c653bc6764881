"""The update queue behind ``getUpdates`` and the webhook: offsets, long polling, one
poller at a time; while a webhook is set, getUpdates is refused and the sender takes
the updates from here."""

from __future__ import annotations

import asyncio
from typing import Any

from ._state import ApiError

CONFLICT_OTHER_POLLER = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)
CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the webhook first"
)


class UpdateQueue:
    def __init__(self) -> None:
        self._pending: list[dict[str, Any]] = []
        self._next_id = 1
        self._arrived = asyncio.Event()
        self._poller = 0  # which getUpdates call is the current one
        self.webhook_active = False

    def __len__(self) -> int:
        return len(self._pending)

    def push(self, update: dict[str, Any]) -> dict[str, Any]:
        """Queue ``update`` (without its ``update_id``, which is assigned here)."""
        update = {"update_id": self._next_id, **update}
        self._next_id += 1
        self._pending.append(update)
        self.wake()
        return update

    def drop_pending(self) -> None:
        self._pending.clear()

    def first(self) -> dict[str, Any] | None:
        return self._pending[0] if self._pending else None

    def remove(self, update: dict[str, Any]) -> None:
        if update in self._pending:
            self._pending.remove(update)

    async def wait(self) -> None:
        """Until something arrives, or the webhook changes (`wake`)."""
        await self._arrived.wait()

    async def get(self, offset: int, limit: int, timeout: float, closing: asyncio.Event) -> list[dict[str, Any]]:
        """Answer one getUpdates call; waits up to ``timeout`` seconds for something to arrive."""
        if self.webhook_active:
            raise ApiError(409, CONFLICT_WEBHOOK)
        self._confirm(offset)
        limit = limit if 1 <= limit <= 100 else 100
        # A newer getUpdates ends this one with 409, as Telegram does when two pollers overlap.
        self._poller += 1
        me = self._poller
        self.wake()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, timeout)
        while True:
            if self._poller != me:
                raise ApiError(409, CONFLICT_OTHER_POLLER)
            if self._pending or closing.is_set():
                return self._pending[:limit]
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            arrived = self._arrived
            try:
                await asyncio.wait_for(arrived.wait(), timeout=min(remaining, 0.5))
            except TimeoutError:
                pass

    def _confirm(self, offset: int) -> None:
        """An offset confirms every update before it; a negative one keeps only the last -offset."""
        if offset > 0:
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
        elif offset < 0:
            self._pending = self._pending[offset:]

    def wake(self) -> None:
        self._arrived.set()
        self._arrived = asyncio.Event()
