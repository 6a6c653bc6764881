"""How work is stopped. A command that waits (`run_stoppable`) cleans up wherever Ctrl-C
or SIGTERM lands, and loops that run until cancelled end even when a library call lost
the cancel.

Python 3.11's `asyncio.wait_for` — which redis-py wraps around every socket call —
returns the inner result when a cancel lands just as the inner call finishes: the
CancelledError is gone, though the task still counts as being cancelled. Here a real
redis-py client on a real Redis loses every cancel that lands during a command, and
each loop must still end once its task is cancelled.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any

import pytest
from redis.asyncio import Redis

from progresscast.config.settings import Settings
from progresscast.stopping import still_wanted
from progresscast.store import keys
from progresscast.store.embedded import ensure_embedded, stop_embedded
from progresscast.store.lease import Lease
from progresscast.telegram.standby import bots, run_bot

TOKEN = "123456:" + "A" * 35


class LosesCancels(Redis):
    """redis-py as the race leaves it: a cancel landing while a command is in flight
    is lost, and the command's reply returned. `in_flight` is set once a command is."""

    in_flight: asyncio.Event

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        command = asyncio.ensure_future(super().execute_command(*args, **options))
        self.in_flight.set()
        try:
            return await asyncio.shield(command)
        except asyncio.CancelledError:
            return await command


@pytest.fixture
async def redis(tmp_path: Path) -> AsyncIterator[LosesCancels]:
    home = tmp_path / "home"
    client = LosesCancels.from_url(ensure_embedded(home), decode_responses=True)
    client.in_flight = asyncio.Event()
    yield client
    await client.aclose()
    stop_embedded(home)


async def cancelled_in_a_command(redis: LosesCancels, loop: Coroutine[Any, Any, Any]) -> asyncio.Task[Any]:
    """Run `loop`; cancel it while one of its commands is in flight (the cancel is lost)."""
    redis.in_flight.clear()
    task = asyncio.create_task(loop)
    await asyncio.wait_for(redis.in_flight.wait(), 5)
    task.cancel()
    await asyncio.sleep(0)  # the cancel reaches the command, which loses it
    return task


async def ends_cancelled(task: asyncio.Task[Any]) -> None:
    done, _ = await asyncio.wait([task], timeout=3)
    assert done, "the loop went on after its cancel was lost"
    assert task.cancelled()


async def test_a_lost_cancel_while_renewing_still_ends_keeping_the_lease(redis: LosesCancels) -> None:
    lease = Lease(redis, keys.tg_lease("1"), keys.tg_fence("1"), ttl=0.3)
    assert await lease.acquire()
    task = await cancelled_in_a_command(redis, lease.keep())
    await ends_cancelled(task)
    assert lease.fence.is_open()  # the renew itself went through: the loop stopped after it


async def test_a_lost_cancel_while_standing_by_still_ends_the_standby(redis: LosesCancels) -> None:
    settings = Settings.model_validate({"channels": {"telegram": {"token": TOKEN, "leaseSeconds": 2}}})
    (bot,) = bots(settings)
    other = bot.lease(redis)
    other.holder = "another process"
    assert await other.acquire()  # this process stands by, asking Redis now and then
    task = await cancelled_in_a_command(redis, run_bot(settings, redis, bot))
    await ends_cancelled(task)
    assert await other.current_holder() == "another process"


async def test_a_lost_cancel_while_supervising_still_ends_the_supervisor(redis: LosesCancels) -> None:
    from progresscast.supervise import supervise

    async def failing_after_a_command() -> None:
        await redis.get("k")
        raise RuntimeError("restarted at once")

    task = await cancelled_in_a_command(redis, supervise(failing_after_a_command, "a job"))
    await ends_cancelled(task)


async def test_a_lost_cancel_while_sweeping_does_not_wait_out_the_next_sweep(redis: LosesCancels) -> None:
    from progresscast.store.retention import configure, keep_sweeping, retention_ms
    from progresscast.store.sharding import layout_of

    configure(redis, 30 * 86400)  # the next sweep an hour away
    await retention_ms(redis)  # learnt first: the command the cancel lands in is the sweep's own
    await layout_of(redis)
    task = await cancelled_in_a_command(redis, keep_sweeping(redis))
    await ends_cancelled(task)


# The signal lands while the coroutine runs Python code inside its `try`, the moment a
# signal handler that raises would skip the `except` (in the background, where Ctrl-C is
# ignored and SIGTERM used to be raised as KeyboardInterrupt on the spot).
COMMAND = """
import asyncio, os, signal, sys
from progresscast.stopping import Terminated, run_stoppable

async def main():
    try:
        os.kill(os.getpid(), signal.{sig})
        for _ in range(100_000):
            pass
        await asyncio.sleep(30)
    except asyncio.CancelledError:
        await asyncio.sleep(0.01)  # a clean-up that waits on the store, as a withdrawal does
        print("cleaned up", flush=True)
        raise

try:
    run_stoppable(main())
except Terminated:
    print("Terminated", flush=True)
except KeyboardInterrupt:
    print("KeyboardInterrupt", flush=True)
"""


@pytest.mark.parametrize(
    ("sig", "background", "raised"),
    [("SIGTERM", False, "Terminated"), ("SIGTERM", True, "Terminated"), ("SIGINT", False, "KeyboardInterrupt")],
)
def test_a_signal_landing_anywhere_still_lets_the_command_clean_up(sig: str, background: bool, raised: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", COMMAND.format(sig=sig)],
        capture_output=True,
        text=True,
        timeout=30,
        preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if background else None,
    )
    assert (done.returncode, done.stdout) == (0, f"cleaned up\n{raised}\n"), done.stderr


def test_a_sigterm_claimed_by_the_process_is_left_to_it() -> None:
    # The warm hook server claims SIGTERM to stop at once; a hook it runs leaves it so.
    command = """
import asyncio, signal
from progresscast.stopping import run_stoppable
signal.signal(signal.SIGTERM, lambda *_: print("the process's own", flush=True))

async def main():
    signal.raise_signal(signal.SIGTERM)
    return "ran to its end"

print(run_stoppable(main()), flush=True)
print(signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL, flush=True)
"""
    done = subprocess.run([sys.executable, "-c", command], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout) == (0, "the process's own\nran to its end\nTrue\n"), done.stderr


async def test_a_stop_asked_inside_the_tasks_own_step_does_not_land_on_its_clean_up() -> None:
    cleaned: list[bool] = []

    async def work() -> None:
        try:
            me = asyncio.current_task()
            assert me is not None
            me.cancel()  # as Ctrl-C's handler does when it runs inside this step
            await still_wanted()
        finally:
            await asyncio.sleep(0.01)  # the clean-up's first wait (an ask's withdraw, a lease's release)
            cleaned.append(True)

    task = asyncio.create_task(work())
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cleaned == [True]


async def test_a_stop_a_library_swallowed_still_ends_the_loop() -> None:
    turns: list[int] = []

    async def work() -> None:
        for turn in range(100):
            turns.append(turn)
            try:
                await asyncio.sleep(10)
            except asyncio.CancelledError:
                pass  # swallowed, as a library call may (stopping.py)
            await still_wanted()

    task = asyncio.create_task(work())
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await asyncio.wait_for(task, 5)
    assert turns == [0]
