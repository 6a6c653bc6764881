"""A setting of the store (its shard count, its retention) learnt once per Redis
client: what this process's config asks for is recorded with `configure`, and the
first `get` resolves it against what the store holds. Concurrent callers share that
one resolution; a failed one is tried again by the next caller."""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Generic, TypeVar

C = TypeVar("C")
T = TypeVar("T")


class PerClient(Generic[C, T]):
    def __init__(self, resolve: Callable[[Any, C | None], Coroutine[Any, Any, T]]) -> None:
        """`resolve(redis, configured)`: the value, from what the config asked for (None: nothing)."""
        self.resolve = resolve
        self._configured: weakref.WeakKeyDictionary[Any, C] = weakref.WeakKeyDictionary()
        self._resolved: weakref.WeakKeyDictionary[Any, asyncio.Task[T]] = weakref.WeakKeyDictionary()

    def configure(self, redis: Any, value: C) -> None:
        self._configured[redis] = value

    async def get(self, redis: Any) -> T:
        task = self._resolved.get(redis)
        if task is not None and task.done() and not task.cancelled() and task.exception() is None:
            return task.result()  # learnt: read on every draft write, with nothing to wait for
        if task is None or task.done():  # none yet, or the last one failed
            task = asyncio.get_running_loop().create_task(self.resolve(redis, self._configured.get(redis)))
            self._resolved[redis] = task
        # Shielded: one caller giving up must not cancel the others' wait.
        return await asyncio.shield(task)


__all__ = ["PerClient"]
