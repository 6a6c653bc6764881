"""`progresscast ask` as an agent runs it: its own process, waiting on a real Redis while
the test answers the way a chat press does (`store.asks.answer`, the same write path)."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from progresscast.model.asks import Actor, Ask, AskKind, AskState
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.cards import CardStore

OWNER = Owner(agent_id="main", session_key="shop")
ANA = Actor("telegram", "42", "7", "Ana")


@dataclass
class Done:
    status: int
    stdout: str
    stderr: str


class Asking:
    """One `progresscast ask` running in its own process."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def done(self, timeout: float = 30) -> Done:
        out, err = await asyncio.wait_for(self.proc.communicate(), timeout)
        assert self.proc.returncode is not None
        return Done(self.proc.returncode, out.decode(), err.decode())


@pytest.fixture
async def ask(tmp_path: Path, redis_url: str) -> AsyncIterator[object]:
    """Start `progresscast ask ARGS` on the test's (embedded) Redis."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PROGRESSCAST_")}
    env["PROGRESSCAST_HOME"] = str(tmp_path / "home")  # the embedded Redis the fixture started
    started: list[asyncio.subprocess.Process] = []

    async def start(*args: str, background: bool = False) -> Asking:
        """`background`: started as a script's background job is, with Ctrl-C ignored."""
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "progresscast.cli", "ask", *args, env=env,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            preexec_fn=(lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if background else None,
        )
        started.append(proc)
        return Asking(proc)

    yield start
    for proc in started:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def asked(store: CardStore, timeout: float = 20) -> Ask:
    """The one ask the command made, once it is there."""
    deadline = time.monotonic() + timeout
    while not (found := (await store.asks.all(OWNER))[0]):
        assert time.monotonic() < deadline, "the command made no ask"
        await asyncio.sleep(0.02)
    assert len(found) == 1
    return found[0]


async def test_an_approval_answered_from_chat_prints_the_label(ask, store: CardStore) -> None:
    running = await ask("--session", "shop", "--approval", "Deploy to production?", "--detail", "`make deploy`")
    made = await asked(store)
    assert made.kind is AskKind.approval and made.options == ("Allow", "Deny") and made.source == "cli"
    assert made.prompt == "Deploy to production?" and made.detail == "`make deploy`"
    assert (await store.asks.answer(OWNER, made.ask_id, ANA, options=["Allow"])).outcome == "ok"
    done = await running.done()
    assert (done.status, done.stdout) == (0, "Allow\n"), done.stderr
    assert "answered by Ana (telegram)" in done.stderr
    assert "no chat follows agent:main:shop yet: the ask shows on its web card" in done.stderr  # nobody followed


async def test_a_session_a_chat_follows_asks_without_a_note(ask, store: CardStore) -> None:
    await store.redis.sadd(keys.channel_followers(keys.SLACK, OWNER), "C0TEST0001 0")  # as `/progresscast follow` keeps it
    running = await ask("--session", "shop", "--approval", "Deploy?")
    made = await asked(store)
    await store.asks.answer(OWNER, made.ask_id, ANA, options=["Deny"])
    done = await running.done()
    assert (done.status, done.stdout) == (0, "Deny\n"), done.stderr
    assert "no chat follows" not in done.stderr


async def test_a_typed_answer_is_printed_as_typed(ask, store: CardStore) -> None:
    running = await ask("--session", "shop", "--text", "Name the release?")
    made = await asked(store)
    assert made.kind is AskKind.text and made.allow_text and made.options == ()
    await store.asks.answer(OWNER, made.ask_id, ANA, text="  Blue  Heron ")
    done = await running.done()
    assert (done.status, done.stdout) == (0, "Blue  Heron\n"), done.stderr


async def test_multiple_choice_prints_one_label_a_line(ask, store: CardStore) -> None:
    running = await ask("--session", "shop", "Ship to?", "--option", "EU", "--option", "US", "--option", "Asia", "--multi")
    made = await asked(store)
    assert made.kind is AskKind.choice and made.multi and made.options == ("EU", "US", "Asia")
    await store.asks.answer(OWNER, made.ask_id, ANA, options=["EU", "Asia"])
    done = await running.done()
    assert (done.status, done.stdout) == (0, "EU\nAsia\n"), done.stderr


async def test_no_answer_in_time_exits_3_and_prints_nothing(ask, store: CardStore) -> None:
    running = await ask("--session", "shop", "--approval", "Deploy?", "--timeout", "1")
    made = await asked(store)
    done = await running.done()
    assert (done.status, done.stdout) == (3, ""), done.stderr
    assert "no answer in time" in done.stderr
    after, _ = await store.asks.get(OWNER, made.ask_id)
    assert after is not None and after.state is AskState.expired


async def test_an_ask_withdrawn_elsewhere_exits_4_and_prints_nothing(ask, store: CardStore) -> None:
    running = await ask("--session", "shop", "--approval", "Deploy?")
    made = await asked(store)
    await store.asks.withdraw(OWNER, made.ask_id)  # another process gave up on it
    done = await running.done()
    assert (done.status, done.stdout) == (4, ""), done.stderr
    assert "the ask was withdrawn" in done.stderr


async def test_stop_pressed_on_the_run_while_waiting_exits_4_and_withdraws(ask, store: CardStore) -> None:
    await store.start_run(OWNER, "r1", stoppable=True)
    running = await ask("--session", "shop", "--approval", "Deploy?")
    made = await asked(store)
    assert (await store.asks.stop(OWNER, ANA))[0] == "ok"
    done = await running.done()
    assert (done.status, done.stdout) == (4, ""), done.stderr
    assert "stopped from chat" in done.stderr
    after, _ = await store.asks.get(OWNER, made.ask_id)
    assert after is not None and after.state is AskState.withdrawn, done.stderr


async def test_an_ask_on_a_run_already_stopped_exits_4_and_asks_nobody(ask, store: CardStore) -> None:
    await store.start_run(OWNER, "r1", stoppable=True)
    assert (await store.asks.stop(OWNER, ANA))[0] == "ok"
    done = await (await ask("--session", "shop", "--approval", "Still deploy?")).done()
    assert (done.status, done.stdout) == (4, ""), done.stderr
    assert "stopped from chat" in done.stderr
    assert (await store.asks.all(OWNER))[0] == ()  # no chat was pinged with it


@pytest.mark.parametrize(
    ("sig", "status", "background"),
    [(signal.SIGINT, 130, False), (signal.SIGTERM, 143, False), (signal.SIGTERM, 143, True)],
)
async def test_ctrl_c_or_sigterm_withdraws_the_ask(
    ask, store: CardStore, sig: signal.Signals, status: int, background: bool
) -> None:
    # In the background (Ctrl-C ignored, as for a script's `ask … &`) SIGTERM still stops it.
    running = await ask("--session", "shop", "--approval", "Deploy?", background=background)
    made = await asked(store)
    running.proc.send_signal(sig)  # SIGTERM: a script's `timeout`, an agent giving up on the command
    done = await running.done()
    assert done.status == status and done.stdout == "", done.stderr  # 128 + the signal, as a shell says
    after, _ = await store.asks.get(OWNER, made.ask_id)
    assert after is not None and after.state is AskState.withdrawn, done.stderr


@pytest.mark.parametrize(
    "args, words",
    [
        (["Which?", "--option", "x" * 41], "--option #1: must be at most 40 characters"),
        (["Which?", "--option", "A", "--option", "A"], "--option #2: repeats 'A'"),
        (["Which?"], "--option: is required for a choice"),
        (["Which?", "--text", "--multi"], "--multi: is only for a choice"),
        (["   "], "PROMPT: must not be empty"),
        (["Which?", "--approval", "--timeout", "0"], "--timeout"),
        (["Which?", "--approval", "--detail", "d" * 2001], "--detail: must be at most 2000 characters"),
    ],
)
async def test_bad_input_exits_2_with_one_line_and_asks_nothing(
    ask, store: CardStore, args: list[str], words: str
) -> None:
    done = await (await ask("--session", "shop", *args)).done()
    assert done.status == 2 and done.stdout == ""
    assert len(done.stderr.strip().splitlines()) == 1 and words in done.stderr, done.stderr
    assert (await store.asks.all(OWNER))[0] == ()


async def test_a_stop_while_the_ask_is_being_opened_still_withdraws_it(store: CardStore) -> None:
    """Ctrl-C can come after Redis stored the ask and before its reply is read (the
    ask shows in chat, the command does not know its id yet): withdrawn all the same."""
    from progresscast.agents.asking import ask_and_wait
    from progresscast.model.asks import AskInput

    stored = asyncio.Event()
    call_now = store.call

    async def reply_on_its_way(*args: Any, **kwargs: Any) -> object:
        reply = await call_now(*args, **kwargs)
        if not stored.is_set():  # the open's script: Redis ran it, its reply not read yet
            stored.set()
            await asyncio.sleep(0.3)
        return reply

    store.call = reply_on_its_way  # type: ignore[method-assign]
    body = AskInput.parse({"kind": "approval", "prompt": "Deploy?", "source": "cli"})
    waiting = asyncio.create_task(ask_and_wait(store, OWNER, [body], 60))
    await stored.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    [made] = (await store.asks.all(OWNER))[0]
    assert made.state is AskState.withdrawn


async def test_ctrl_c_landing_inside_the_waits_own_step_still_withdraws_the_ask(store: CardStore) -> None:
    """Ctrl-C's handler runs between two bytecodes of whatever runs, so inside the
    waiting task's own step too: its cancel is then pending, the wait's check raises for
    it at once, and the pending cancel lands on the next wait, the withdraw's. The
    withdraw must still end before the command does: the loop's closing cancels every
    task left (as `asyncio.run` does), a withdraw left running among them."""
    from progresscast.agents.asking import ask_and_wait
    from progresscast.model.asks import AskInput

    waiting: asyncio.Task[object] | None = None
    wait_now = store.asks.wait

    def ctrl_c(signum: int, frame: object) -> None:  # what asyncio.run's handler does
        assert waiting is not None
        waiting.cancel()

    async def signalled_in_its_step(owner: Owner, ask_id: str, timeout: float) -> Ask | None:
        signal.raise_signal(signal.SIGINT)  # the handler runs here, inside this task's step
        return await wait_now(owner, ask_id, timeout)

    store.asks.wait = signalled_in_its_step  # type: ignore[method-assign]
    before = signal.signal(signal.SIGINT, ctrl_c)
    try:
        body = AskInput.parse({"kind": "approval", "prompt": "Deploy?", "source": "cli"})
        waiting = asyncio.create_task(ask_and_wait(store, OWNER, [body], 60))
        with pytest.raises(asyncio.CancelledError):
            await waiting
    finally:
        signal.signal(signal.SIGINT, before)
    await withdrawn_once_the_loop_closes(store)


async def test_a_second_stop_during_the_withdraw_still_lets_it_end(store: CardStore) -> None:
    """A stop that comes while the asks are being withdrawn (a cancelled MCP call's task
    cancelled again, SIGTERM after Ctrl-C) does not cut the withdraw short: it ends
    before the wait does, so the loop's closing, which cancels every task left, finds
    none that still has to withdraw."""
    from progresscast.agents.asking import ask_and_wait
    from progresscast.model.asks import AskInput

    withdrawing = asyncio.Event()
    call_now = store.call

    async def slow_withdraw(script: Any, owner: Owner, args: Any, **kwargs: Any) -> object:
        if script is store.asks._close:
            withdrawing.set()
            await asyncio.sleep(0.3)  # the second stop comes before the withdraw reaches Redis
        return await call_now(script, owner, args, **kwargs)

    store.call = slow_withdraw  # type: ignore[method-assign]
    body = AskInput.parse({"kind": "approval", "prompt": "Deploy?", "source": "cli"})
    waiting = asyncio.create_task(ask_and_wait(store, OWNER, [body], 60))
    while not (await store.asks.all(OWNER))[0]:
        await asyncio.sleep(0.01)
    waiting.cancel()
    await withdrawing.wait()
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await withdrawn_once_the_loop_closes(store)


async def withdrawn_once_the_loop_closes(store: CardStore) -> None:
    """Every task left is cancelled, as `asyncio.run`'s closing does; the ask must have
    been withdrawn all the same (a withdraw left running among them would not be)."""
    left = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    for task in left:
        task.cancel()
    await asyncio.gather(*left, return_exceptions=True)
    [made] = (await store.asks.all(OWNER))[0]
    assert made.state is AskState.withdrawn
