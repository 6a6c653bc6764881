"""Ending a long-running loop when its task is cancelled, even if the cancel was lost.

A library call may swallow a CancelledError: Python 3.11's `asyncio.wait_for` returns
the inner result when the cancel lands just as the inner call finishes, and redis-py
wraps every socket write in one. The task's `cancelling()` count still says it was
asked to stop, so a loop that checks it at each turn ends anyway.
"""

from __future__ import annotations

import asyncio


def still_wanted() -> None:
    """Raise CancelledError if this task was asked to stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
