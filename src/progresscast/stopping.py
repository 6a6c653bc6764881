"""Ending a long-running loop when its task is cancelled, even if the cancel was lost.

A library call may swallow a CancelledError: Python 3.11's `asyncio.wait_for` returns
the inner result when the cancel lands just as the inner call finishes, and redis-py
wraps every socket write in one. The task's `cancelling()` count still says it was
asked to stop, so a loop that checks it at each turn ends anyway.
"""

from __future__ import annotations

import asyncio
import logging
import signal


def stop_on_sigterm(log: logging.Logger) -> asyncio.Event:
    """SIGTERM cancels the current task as Ctrl-C does (so its `finally` blocks clean up:
    `serve`, `demo`); the event, set first, tells the two apart."""
    stopping = asyncio.Event()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def stop() -> None:
        log.info("SIGTERM: shutting down")
        stopping.set()
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    return stopping


def still_wanted() -> None:
    """Raise CancelledError if this task was asked to stop."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        raise asyncio.CancelledError
