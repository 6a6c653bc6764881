"""How a process is stopped: SIGTERM as an ordinary end (`serve`, `demo`, `mcp`, the
emulators), or as Ctrl-C for a command that waits (`ask`, a hook waiting for an
answer), and a long-running loop ending when its task is cancelled, even if the cancel
was lost.

A library call may swallow a CancelledError: Python 3.11's `asyncio.wait_for` returns
the inner result when the cancel lands just as the inner call finishes, and redis-py
wraps every socket write in one. The task's `cancelling()` count still says it was
asked to stop, so a loop that checks it at each turn ends anyway.

The other way round, a stop can come early: Ctrl-C's handler runs between any two
bytecodes, so inside the very task it cancels, and the cancel then waits for that
task's next wait. A check that raised for it at once would leave it pending for the
clean-up's first wait (`still_wanted` delivers it first).
"""

from __future__ import annotations

import asyncio
import logging
import signal
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


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


async def still_wanted() -> None:
    """Raise CancelledError if this task was asked to stop. A stop asked for inside this
    task's own step (Ctrl-C's handler runs between any two bytecodes) is still pending:
    it is delivered here, at a wait of nothing, so that it does not land on the first
    wait of the clean-up that follows (a `finally` withdrawing an ask, releasing a lease)."""
    task = asyncio.current_task()
    if task is not None and task.cancelling():
        await asyncio.sleep(0)
        raise asyncio.CancelledError


async def to_the_end(work: asyncio.Future[Any]) -> None:
    """Wait for `work` (a clean-up that must be done: an ask's withdraw) until it ends,
    whatever stops come meanwhile, then raise the stop (or `work`'s error). A stop may
    land here that came before: Ctrl-C's handler runs inside this task's own step, and
    a check that raised for it without a wait leaves it pending for the next one.
    Shielded alone, the work would be left to the loop's closing, which cancels it."""
    stopped = False
    while not work.done():
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            if work.cancelled():
                raise
            stopped = True
    if stopped:
        work.exception()  # looked at: the stop is what the caller hears
        raise asyncio.CancelledError
    work.result()


class Terminated(KeyboardInterrupt):
    """SIGTERM ended a command that waits (`run_stoppable`): its caller exits 128 + 15,
    where Ctrl-C's KeyboardInterrupt exits 130."""


def run_stoppable(main: Coroutine[Any, Any, T]) -> T:
    """`asyncio.run` for a command that waits (`ask`, a hook waiting for an answer): Ctrl-C
    and SIGTERM both cancel the main task, so what it opened (an ask) is withdrawn in its
    `finally`, where SIGTERM's default would end the process on the spot and leave the
    ask offered in chat until it expires. Raises KeyboardInterrupt for Ctrl-C, Terminated
    for SIGTERM.

    SIGTERM is taken in the loop (`add_signal_handler`): a Python signal handler raising
    runs between any two bytecodes, inside an `except` or a `finally` too, and skips the
    clean-up it lands in. Only in the main thread (where signals arrive) of a process
    whose SIGTERM nobody claimed (the warm hook server does)."""
    main_thread = threading.current_thread() is threading.main_thread()
    if not (main_thread and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL):
        return asyncio.run(main)
    came: list[bool] = []

    async def stoppable() -> T:
        loop = asyncio.get_running_loop()
        task = asyncio.current_task()
        assert task is not None

        def stop() -> None:
            came.append(True)
            task.cancel()

        loop.add_signal_handler(signal.SIGTERM, stop)
        try:
            return await main
        finally:
            loop.remove_signal_handler(signal.SIGTERM)

    try:
        return asyncio.run(stoppable())
    except (asyncio.CancelledError, KeyboardInterrupt):
        if came:
            raise Terminated from None
        raise
