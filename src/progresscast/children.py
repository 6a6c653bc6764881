"""Child processes of `serve` (`serve.processes = "split"`): started, watched, restarted
and stopped by the one `serve` that owns them.

The parent runs `run_child` as one of its supervised jobs: it starts the child with
what it needs on its standard input, waits for it, and raises when it ends, so the
supervisor starts it again after a backoff — nothing stops `serve` but a signal. A child
that exits with status 2 stopped on a mistake in the configuration (it said which on
its standard error): that ends `serve` too, as the mistake would in one process. When
the job is cancelled (SIGTERM, Ctrl-C) the child gets SIGTERM and is waited for, then
killed if it lingers.

A child must not outlive its parent, even one killed with SIGKILL: `die_with_parent`
asks Linux to send it SIGTERM when the parent dies (`PR_SET_PDEATHSIG`), and
`watch_parent` (a job of the child) ends it within a second where that is not
available or the parent died before the request was made.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import logging
import os
import signal
import sys
from collections.abc import Sequence

from .config.errors import ConfigError
from .stopping import still_wanted

log = logging.getLogger("progresscast")

MISTAKE_STATUS = 2
"""The exit status of a child that stopped on a ConfigError (as `progresscast` itself)."""
STOP_SECONDS = 15.0
"""How long a child may take to stop after SIGTERM before it is killed."""
PARENT_POLL = 1.0
"""Seconds between a child's looks at whether its parent is still there."""
_PR_SET_PDEATHSIG = 1


class ChildExited(RuntimeError):
    """A child process ended while it was wanted."""


async def run_child(what: str, argv: Sequence[str], given: bytes) -> None:
    """Run `argv` with `given` on its standard input until it ends (then raise) or this
    task is cancelled (then stop it)."""
    proc = await asyncio.create_subprocess_exec(*argv, stdin=asyncio.subprocess.PIPE)
    log.info("%s: started (pid %d)", what, proc.pid)
    try:
        assert proc.stdin is not None
        proc.stdin.write(given)
        with contextlib.suppress(ConnectionError):  # it died at once: its status says why
            await proc.stdin.drain()
        proc.stdin.close()
        status = await proc.wait()
    except BaseException:
        await _stop(proc)
        raise
    if status == MISTAKE_STATUS:
        raise ConfigError(f"serve.processes: {what} stopped on a mistake in the configuration (above)")
    raise ChildExited(f"{what} (pid {proc.pid}) exited with status {status}")


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        proc.send_signal(signal.SIGTERM)
    try:
        # Shielded: a second cancel (a second Ctrl-C) must not leave the child behind.
        await asyncio.shield(asyncio.wait_for(proc.wait(), STOP_SECONDS))
    except TimeoutError:
        log.warning("pid %d did not stop within %.0f s of SIGTERM; killing it", proc.pid, STOP_SECONDS)
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        await asyncio.shield(proc.wait())


def die_with_parent() -> int:
    """In a child: be sent SIGTERM when the parent dies (Linux); the parent's pid."""
    parent = os.getppid()
    if sys.platform.startswith("linux"):
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    return parent


async def watch_parent(parent: int, every: float = PARENT_POLL) -> None:
    """End this process (SIGTERM to itself: the usual shutdown) once `parent` is gone:
    an orphan is adopted by another process, so its parent pid changes."""
    while True:
        await still_wanted()
        if os.getppid() != parent:
            log.warning("the serve process that started this one (pid %d) is gone; stopping", parent)
            os.kill(os.getpid(), signal.SIGTERM)
            return
        await asyncio.sleep(every)
