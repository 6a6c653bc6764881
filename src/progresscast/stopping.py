"""How a process is stopped: SIGTERM as an ordinary end (`serve`, `demo`, `mcp`, the
emulators), or as Ctrl-C for a command that waits (`ask`, a hook waiting for an
answer), and a long-running loop ending when its task is cancelled, even if the cancel
was lost.

A library call may swallow a CancelledError: Python 3.11's `asyncio.wait_for` returns
the inner result when the cancel lands just as the inner call finishes, and redis-py
wraps every socket write in one. The task's `cancelling()` count still says it was
asked to stop, so a loop that checks it at each turn ends anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from collections.abc import Iterator
from typing import Any


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


class Terminated:
    """Whether SIGTERM came (`sigterm_as_ctrl_c`): a caller exits 128 + 15 then, not 130."""

    def __init__(self) -> None:
        self.came = False


@contextlib.contextmanager
def sigterm_as_ctrl_c() -> Iterator[Terminated]:
    """SIGTERM taken as Ctrl-C around `asyncio.run`: the main task is cancelled, so what
    the command opened (an ask) is withdrawn in its `finally`, where SIGTERM's default
    would end the process on the spot and leave it offered in chat until it expires. The
    caller sees KeyboardInterrupt either way. Only in the main thread (where signals
    arrive) of a process whose SIGTERM nobody claimed (the warm hook server does)."""
    terminated = Terminated()
    main = threading.current_thread() is threading.main_thread()
    if not (main and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        yield terminated
        return

    def as_ctrl_c(_: int, frame: Any) -> None:
        terminated.came = True
        on_ctrl_c = signal.getsignal(signal.SIGINT)
        if callable(on_ctrl_c):  # asyncio.Runner's (it cancels the main task), or Python's own
            on_ctrl_c(signal.SIGINT, frame)
        else:  # Ctrl-C ignored (a job a script started in the background): SIGTERM still stops it
            raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, as_ctrl_c)
    try:
        yield terminated
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
