"""An edit's bookkeeping written behind (`Drafts.defer`): held in the process, read back
by every read of the draft there, stored with the draft's next write, after
`save_within`, or at a stop — and never over what someone else stored meanwhile. On a
real Redis (every backend)."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from progresscast.channels.draft.state import DraftState
from progresscast.channels.state.drafts import SAVE_WITHIN
from progresscast.channels.state.ids import DraftKey
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.lease import Fence, FenceClosed
from progresscast.telegram.follows import TelegramState

pytestmark = pytest.mark.backends

KEY = DraftKey(42, 0, Owner("main", "t1"))
SHOWN = DraftState(message_id=7, digest="d1", kind="classic", revision=1)
EDITED = DraftState(message_id=7, digest="d2", kind="classic", revision=2)
AGAIN = DraftState(message_id=7, digest="d3", kind="classic", revision=3)


def held(number: int = 1) -> Fence:
    fence = Fence()
    fence.number, fence.deadline = number, float("inf")
    return fence


async def in_redis(redis: Any, key: DraftKey = KEY) -> DraftState:
    """What Redis itself holds for the draft (no process's memory)."""
    return DraftState.from_json(await redis.get(keys.channel_draft(keys.TG, key.owner, key.chat_id, key.thread_id)))


async def shown_then_edited(redis: Any, fence: Fence | None = None, *, save_within: float = SAVE_WITHIN) -> TelegramState:
    state = TelegramState(redis, fence=fence or held())
    state.drafts.save_within = save_within
    await state.drafts.save(KEY, SHOWN)
    await state.drafts.defer(KEY, SHOWN, EDITED)
    return state


async def test_an_edit_is_held_and_read_back_here_until_it_is_stored(redis: Any) -> None:
    state = await shown_then_edited(redis)
    assert await in_redis(redis) == SHOWN  # not written yet
    assert await state.drafts.of(KEY) == EDITED  # but every read here sees it
    await state.drafts.defer(KEY, EDITED, AGAIN)  # a second edit: still one held state
    assert await state.drafts.of(KEY) == AGAIN and await in_redis(redis) == SHOWN
    await state.drafts.close()  # a stop stores it
    assert await in_redis(redis) == AGAIN
    assert await state.drafts.of(KEY) == AGAIN


async def test_the_next_write_of_the_draft_stores_the_newest_state(redis: Any) -> None:
    state = await shown_then_edited(redis)
    reposted = DraftState(message_id=8, digest="d3", kind="classic", revision=3, stale=7, reposted_at=5.0)
    await state.drafts.save(KEY, reposted)
    assert await in_redis(redis) == reposted
    await state.drafts.close()  # nothing held any more: the older edit is not written over it
    assert await in_redis(redis) == reposted


async def test_a_held_state_is_stored_once_it_is_save_within_old(redis: Any) -> None:
    state = await shown_then_edited(redis, save_within=0.3)
    loop = asyncio.get_running_loop()
    start = loop.time()
    while await in_redis(redis) != EDITED:  # the timer stores it, with no other write
        assert loop.time() - start < 5, "never stored"
        await asyncio.sleep(0.02)
    assert loop.time() - start >= 0.2
    # A loop too busy for the timer: an edit that finds the held state that old writes through.
    await state.drafts.defer(KEY, EDITED, AGAIN)
    time.sleep(0.35)  # busy: no timer runs meanwhile
    last = DraftState(message_id=7, digest="d4", kind="classic", revision=4)
    await state.drafts.defer(KEY, AGAIN, last)
    assert await in_redis(redis) == last


async def test_what_someone_else_stored_meanwhile_wins_over_the_held_state(redis: Any) -> None:
    state = await shown_then_edited(redis)
    theirs = DraftState(message_id=9, digest="x", kind="classic", revision=5)
    await TelegramState(redis, fence=held(1)).drafts.save(KEY, theirs)  # another process of this holding
    assert await state.drafts.of(KEY) == theirs
    await state.drafts.close()
    assert await in_redis(redis) == theirs  # forgotten, not written over theirs


async def test_another_holding_of_the_lease_never_uses_or_writes_the_held_state(redis: Any) -> None:
    fence = held(1)
    state = await shown_then_edited(redis, fence)
    fence.number = 3  # the lease lost and taken again: what was held before is another holding's
    assert await state.drafts.of(KEY) == SHOWN
    await state.drafts.close()
    assert await in_redis(redis) == SHOWN


async def test_a_lost_lease_stores_nothing_held(redis: Any) -> None:
    fence = held(1)
    state = await shown_then_edited(redis, fence)
    fence.close()
    with pytest.raises(FenceClosed):
        await state.drafts.close()
    assert await in_redis(redis) == SHOWN


async def test_a_held_state_is_stored_under_the_lease_fence(redis: Any) -> None:
    """Storing what was held is a fenced write like any other: an old holder past its
    local check (a pause) never undoes what a newer holder stored, even the same state."""
    state = await shown_then_edited(redis, held(1))
    await TelegramState(redis, fence=held(2)).drafts.save(KEY, SHOWN)
    with pytest.raises(FenceClosed):
        await state.drafts.close()
    raw = await redis.get(keys.channel_draft(keys.TG, KEY.owner, KEY.chat_id, KEY.thread_id))
    assert json.loads(raw)["fence"] == 2 and await in_redis(redis) == SHOWN
