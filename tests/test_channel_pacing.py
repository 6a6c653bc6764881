"""channels/pacing.py: per-destination spacing, the bot-wide budget, and its fair order."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from random import Random

import pytest

from progresscast.channels.pacing import Budgets, Pacer

SCALE = 0.05


def budgets(bot_rate: float = 30.0, scale: float = SCALE) -> Budgets:
    return Budgets(interval=lambda chat: 3.0 if isinstance(chat, int) and chat < 0 else 1.0, bot_rate=bot_rate,
                   scale=scale)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_one_call_per_interval_per_destination() -> None:
    pacer = Pacer(budgets(scale=1.0), clock=(clock := Clock()))
    await pacer.acquire(42)
    assert pacer.ready_in(42) == pytest.approx(1.0)
    clock.now += 0.4
    assert pacer.ready_in(42) == pytest.approx(0.6)
    clock.now += 0.6
    await pacer.acquire(42)
    assert pacer.ready_in(42) == pytest.approx(1.0)
    clock.now += 1.0
    await pacer.acquire(-100)
    assert pacer.ready_in(-100) == pytest.approx(3.0)
    assert pacer.ready_in(7) == 0


async def test_the_next_call_is_spaced_from_when_the_call_left_not_from_its_slot() -> None:
    # The slot is granted, the draft is read again, and only then does the call leave:
    # two calls spaced by their grants alone could arrive closer than the interval.
    pacer = Pacer(budgets(scale=1.0), clock=(clock := Clock()))
    await pacer.acquire(42)
    clock.now += 0.3  # reading and rendering after the grant
    await pacer.leaving(42)
    assert pacer.ready_in(42) == pytest.approx(1.0)
    clock.now += 1.0
    pacer.take(42)
    await pacer.leaving(42)  # at once: the slot's own spacing stands
    assert pacer.ready_in(42) == pytest.approx(1.0)
    pacer.hold(42, 5.0)
    await pacer.leaving(42)  # never shortens a hold
    assert pacer.ready_in(42) == pytest.approx(5.0)


async def test_calls_granted_apart_but_late_to_leave_are_spaced_again_as_they_leave() -> None:
    # 20 slots granted one spacing apart, whose calls all fell behind (a loaded loop)
    # and reach the moment of leaving together: they leave at the bot's rate again,
    # after a burst no larger than `catch_up` allows.
    b = Budgets(interval=lambda chat: 1.0, bot_rate=100.0, catch_up=0.05, scale=1.0)
    pacer = Pacer(b)
    for chat in range(20):
        await pacer.acquire(chat)
    left: list[float] = []

    async def leave(chat: int) -> None:
        await pacer.leaving(chat)
        left.append(time.monotonic())

    await asyncio.gather(*(leave(chat) for chat in range(20)))
    at_once = 1 + round(b.catch_up_seconds / b.bot_spacing)  # the slots `catch_up` keeps
    assert left[at_once] - left[0] >= b.bot_spacing * 0.9
    assert left[-1] - left[0] >= (20 - at_once) * b.bot_spacing * 0.9
    for chat in range(20):  # and each destination is spaced from when its call left
        assert pacer.ready_in(chat) > 0.8


async def test_calls_waiting_to_leave_on_a_busy_loop_leave_as_their_places_fall_due() -> None:
    # 30 calls reach `leaving` at once at 1,000 calls a second, while every turn of the
    # event loop takes 10 ms (a loaded `serve`): each call's place in the spacing falls
    # due about 1 ms after the one before, so they leave a few turns apart in all —
    # not one per turn (300 ms, a third of the budget), as a wait handed on in turn would.
    b = Budgets(interval=lambda chat: 1.0, bot_rate=1000.0, catch_up=0.0, scale=1.0)
    pacer = Pacer(b)
    turns = 0

    async def busy() -> None:
        nonlocal turns
        while True:
            time.sleep(0.01)  # the rest of the loop's work this turn
            turns += 1
            await asyncio.sleep(0)

    neighbour = asyncio.create_task(busy())
    try:
        await asyncio.sleep(0)
        began = turns
        await asyncio.gather(*(pacer.leaving(chat) for chat in range(30)))
        assert turns - began < 15, f"{turns - began} turns of the loop for 30 calls"
    finally:
        neighbour.cancel()
    # Spaced all the same: no window of a (scaled) second holds more than the budget.
    left = sorted(pacer._left)
    assert left[-1] - left[0] >= 29 * b.bot_spacing * 0.9


async def test_a_call_that_waited_to_leave_says_so_and_one_that_stayed_frees_its_place() -> None:
    # A draft is read again when its call waited long to leave, and
    # a call that then does not go frees its place among the bot's calls at once.
    b = Budgets(interval=lambda chat: 1.0, bot_rate=5.0, catch_up=0.0, scale=0.2)
    pacer = Pacer(b)
    first = await pacer.leaving(1)
    assert first.waited < b.bot_spacing * 0.5
    began = time.monotonic()
    second = await pacer.leaving(2)  # one bot spacing (42 ms) after the first
    assert second.waited >= b.bot_spacing * 0.9 and time.monotonic() - began >= b.bot_spacing * 0.9
    pacer.stayed(2, second)  # it made no call after all
    assert second.at not in pacer._left and pacer.ready_in(2) == 0
    began = time.monotonic()
    third = await pacer.leaving(3)  # takes the place the second gave back
    assert time.monotonic() - began < b.bot_spacing * 0.5 and third.waited < b.bot_spacing * 0.5


def test_retry_after_holds_the_destination_up_to_the_cap() -> None:
    pacer = Pacer(budgets(scale=1.0), clock=Clock())
    assert pacer.hold(42, 5) == 5
    assert pacer.ready_in(42) == pytest.approx(5)
    assert pacer.hold(42, 600) == 60
    assert pacer.ready_in(42) == pytest.approx(60)
    assert pacer.ready_in(43) == 0


async def test_a_rate_limit_of_the_account_holds_every_destination() -> None:
    together = Budgets(interval=lambda _: 1.0, bot_rate=30.0, scale=1.0, held_together=True)
    pacer = Pacer(together, clock=(clock := Clock()))
    assert pacer.hold("!a:x", 5) == 5
    assert pacer.ready_in("!a:x") == pytest.approx(5)
    assert pacer.ready_in("!never-called:x") == pytest.approx(5)
    clock.now += 5
    assert pacer.ready_in("!never-called:x") == 0
    await pacer.acquire("!b:x")
    assert pacer.ready_in("!b:x") == pytest.approx(1)


def test_the_time_scale_shortens_every_interval() -> None:
    pacer = Pacer(budgets(scale=0.05), clock=Clock())
    assert pacer.budgets.spacing(42) == pytest.approx(0.05)
    assert pacer.budgets.bot_spacing == pytest.approx(0.05 * 1.05 / 30)  # with the leaving margin
    assert pacer.hold(42, 2) == pytest.approx(0.1)


async def test_the_bot_is_paced_across_destinations() -> None:
    # 30 destinations at once, the bot allowed 30 calls a second (scaled): the k-th slot
    # goes out no sooner than k bot spacings after the start. What a waiter sees is when
    # it resumed, which a loaded machine delays (and so can bunch up); but the k-th
    # waiter to resume did so after the k-th slot was granted, so the bound holds for the
    # resumes in order whatever the load, and a burst (two slots at once) breaks it.
    pacer = Pacer(budgets(bot_rate=30.0))
    resumed: list[float] = []

    async def one(chat: int) -> None:
        await pacer.acquire(chat)
        resumed.append(time.monotonic())

    start = time.monotonic()
    await asyncio.gather(*(one(chat) for chat in range(1, 31)))
    spacing = SCALE / 30
    # Slots that fell due while the loop was busy are granted when it wakes, at most the
    # catch-up's worth early (none on an idle machine).
    early = pacer.budgets.catch_up_seconds
    late = [(k, at - start) for k, at in enumerate(sorted(resumed)) if at - start < k * spacing * 0.99 - early]
    assert len(resumed) == 30 and late == [], late


async def test_when_the_bot_budget_binds_urgent_changes_go_first_then_the_longest_waiting() -> None:
    pacer = Pacer(budgets(bot_rate=10.0))
    order: list[int] = []
    await pacer.acquire(0)  # the bot slot is now taken: everyone else queues

    async def one(chat: int, urgent: bool, since: float) -> None:
        await pacer.acquire(chat, urgent=urgent, since=since)
        order.append(chat)

    tasks = [
        asyncio.create_task(one(1, False, since=5.0)),  # tool lines only, waiting longest
        asyncio.create_task(one(2, True, since=9.0)),  # a step changed state
        asyncio.create_task(one(3, False, since=1.0)),  # tool lines only, waiting longer still
        asyncio.create_task(one(4, True, since=2.0)),  # a step changed state, waiting longer
    ]
    await asyncio.gather(*tasks)
    assert order == [4, 2, 3, 1]


async def test_no_destination_starves_under_a_scaled_down_budget() -> None:
    # 20 destinations keep asking (each a new change the moment its call went out) while
    # the bot may make 20 calls a second in all: every destination is served in turn.
    pacer = Pacer(budgets(bot_rate=20.0))
    served: dict[int, int] = dict.fromkeys(range(20), 0)
    stop = asyncio.Event()

    async def chat(n: int) -> None:
        since = time.monotonic()
        while not stop.is_set():
            await pacer.acquire(n, urgent=False, since=since)
            served[n] += 1
            since = time.monotonic()

    tasks = [asyncio.create_task(chat(n)) for n in range(20)]
    deadline = time.monotonic() + 5
    while min(served.values()) < 3 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    stop.set()
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    await pacer.close()
    assert min(served.values()) >= 3, served
    assert max(served.values()) - min(served.values()) <= 2, served


async def test_a_slot_given_back_frees_the_destination_at_once() -> None:
    pacer = Pacer(budgets(scale=1.0), clock=Clock())
    await pacer.acquire(42)
    assert pacer.ready_in(42) == pytest.approx(1.0)
    pacer.give_back(42)  # no call was made after all
    assert pacer.ready_in(42) == 0


def test_a_shorter_retry_after_never_shortens_a_longer_hold() -> None:
    pacer = Pacer(budgets(scale=1.0), clock=(clock := Clock()))
    pacer.hold(42, 5)
    clock.now += 1
    pacer.hold(42, 2)
    assert pacer.ready_in(42) == pytest.approx(4)


async def test_a_hold_that_comes_while_the_destination_queues_is_honoured() -> None:
    # one bot-wide slot a (scaled) second, 50 ms: chat 7 surely still queues when its hold comes
    pacer = Pacer(budgets(bot_rate=1.0))
    await pacer.acquire(0)  # the bot slot is taken: chat 7 queues
    waiter = asyncio.create_task(pacer.acquire(7))
    await asyncio.sleep(0)
    held = time.monotonic()
    seconds = pacer.hold(7, 2)  # a 429 for chat 7 while it queued
    await waiter
    assert time.monotonic() - held >= seconds * 0.99


async def test_a_destination_arriving_while_others_queue_waits_its_turn() -> None:
    pacer = Pacer(budgets(bot_rate=10.0), clock=(clock := Clock()))
    order: list[int] = []

    async def one(chat: int) -> None:
        await pacer.acquire(chat)
        order.append(chat)

    await pacer.acquire(0)  # the bot slot is taken: chat 2 queues
    first = asyncio.create_task(one(2))
    await asyncio.sleep(0)
    clock.now += 1  # the slot is free again, but chat 2 has not been served yet
    await one(3)
    await first
    assert order == [2, 3]


async def test_slots_that_fall_due_while_the_loop_is_busy_are_granted_when_it_wakes() -> None:
    # 21 ms between bot-wide slots (50 a second, with the leaving margin); the loop is
    # then blocked for five of them (a burst of writes) with ten destinations queued:
    # the five slots that fell due are owed.
    pacer = Pacer(budgets(bot_rate=50.0, scale=1.0))
    await pacer.acquire(0)
    granted: list[int] = []

    async def one(chat: int) -> None:
        await pacer.acquire(chat)
        granted.append(chat)

    tasks = [asyncio.create_task(one(chat)) for chat in range(1, 11)]
    while pacer.queued < 10:
        await asyncio.sleep(0)
    time.sleep(5.2 * pacer.budgets.bot_spacing)  # the event loop is busy elsewhere: no timer runs
    for _ in range(5):  # the loop turns a few times, no new waiter, no other event
        await asyncio.sleep(0)
    assert len(granted) >= 5, granted
    assert len(granted) <= 1 + pacer.budgets.catch_up_seconds / pacer.budgets.bot_spacing, granted
    await asyncio.gather(*tasks)
    await pacer.close()


async def test_a_slot_given_back_goes_to_the_next_waiting_at_once() -> None:
    # One bot-wide slot per 10 s: the slot granted to chat 1 is given back unused
    # (its chat already showed the newest card), and chat 2, queued, gets it without
    # waiting for the next slot or for any other event.
    pacer = Pacer(budgets(bot_rate=0.1, scale=1.0))
    await pacer.acquire(1)
    second = asyncio.create_task(pacer.acquire(2))
    while pacer.queued < 1:
        await asyncio.sleep(0)
    pacer.give_back(1)
    await asyncio.wait_for(second, 2.0)
    assert pacer.ready_in(1) == 0
    assert pacer.bot_ready_in() == pytest.approx(10.0, abs=0.5)
    await pacer.close()


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    most, start = 0, 0
    for end, at in enumerate(times):
        while at - times[start] >= window:
            start += 1
        most = max(most, end - start + 1)
    return most


async def leave_together(pacer: Pacer, n: int, travel: Callable[[], float], arrived: list[float]) -> None:
    """`n` calls to as many destinations at once, each noted in `arrived` as it reaches
    the platform (it left, then took `travel()` seconds)."""

    async def call(chat: int) -> None:
        await pacer.acquire(chat)
        await pacer.leaving(chat)
        arrived.append(time.monotonic() + travel())

    await asyncio.gather(*(call(chat) for chat in range(n)))


async def test_no_sliding_second_holds_more_calls_than_the_bot_budget_when_the_loop_stalls() -> None:
    # 40 calls a second for the bot, 600 calls to many destinations, and the event loop
    # blocked for 60 ms after every 300 ms (a burst of writes): the slots that fell due are
    # granted when it wakes, but the calls leave so that no window of one second (on the
    # time scale) holds more than the budget, as the Bot API counts them.
    b = Budgets(interval=lambda chat: 1.0, bot_rate=40.0, scale=0.25)
    left: list[float] = []

    async def stall() -> None:
        while len(left) < 600:
            await asyncio.sleep(0.3)
            time.sleep(0.06)

    staller = asyncio.create_task(stall())
    await leave_together(Pacer(b), 600, lambda: 0.0, left)
    staller.cancel()
    assert most_in_any_window(left, b.scale) <= 40
    # and the budget is used: 600 calls at 40 per (scaled) second take about 3.75 s
    assert left[-1] - left[0] < 600 / 40 * b.scale * 1.6


@pytest.mark.alone  # 10 ms of travel judged against 12.5 ms of margin: a preempted loop spends the rest
async def test_calls_that_arrive_unevenly_late_still_arrive_within_the_bot_budget() -> None:
    # A call reaches the platform a little after it leaves, and not equally late each
    # time (up to 10 ms here, on a 0.25 time scale: 40 ms at real speed). Counted by
    # when they arrive, as the platform counts them, no second holds more than the budget.
    random = Random(7)
    b = Budgets(interval=lambda chat: 1.0, bot_rate=40.0, scale=0.25)
    arrived: list[float] = []
    await leave_together(Pacer(b), 400, lambda: random.uniform(0.0, 0.01), arrived)
    arrived.sort()
    assert most_in_any_window(arrived, b.scale) <= 40
    assert arrived[-1] - arrived[0] < 400 / 40 * b.scale * 1.2  # and the budget is still used


async def test_calls_counted_when_sent_hold_the_budget_however_long_they_took_to_be_sent() -> None:
    # A draft's call leaves, then writes ahead to Redis (or reads again) before it is
    # sent: a round trip of uneven length, here up to 2.5 windows of the budget (a store
    # that stalls). Counted by when they are sent, no window holds more than the budget,
    # and a call that fails before it is sent (`stayed`) frees its place.
    random = Random(11)
    b = Budgets(interval=lambda chat: 1.0, bot_rate=10.0, scale=0.1)
    pacer = Pacer(b)
    window = b.scale
    sent_at: list[float] = []

    async def call(chat: int) -> None:
        await pacer.acquire(chat)
        departure = await pacer.leaving(chat, sent=False)
        await asyncio.sleep(random.choice((0.0, 0.0, 0.0, random.uniform(0.0, 2.5 * window))))
        if chat % 7 == 3:
            pacer.stayed(chat, departure)
            return
        pacer.sent(departure)
        sent_at.append(time.monotonic())

    await asyncio.gather(*(call(chat) for chat in range(120)))
    assert len(sent_at) == 120 - len([c for c in range(120) if c % 7 == 3])
    assert most_in_any_window(sent_at, window) <= 10
    assert pacer._pending == 0
