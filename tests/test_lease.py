"""The bot lease's scripts and fencing on a real Redis (embedded and Cluster), and the
settings of several bots."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from progresscast.channels.draft.state import DraftState
from progresscast.channels.state.ids import DraftKey
from progresscast.channels.state.prefs import ChatPrefs
from progresscast.config.base import Mode
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.lease import Fence, FenceClosed, Lease
from progresscast.telegram.follows import TelegramState
from progresscast.telegram.standby import bots

pytestmark = pytest.mark.backends  # the store itself: each test runs on every backend

BOT = "123456"


def lease(redis: Any, holder: str, ttl: float = 5.0) -> Lease:
    return Lease(redis, keys.tg_lease(BOT), keys.tg_fence(BOT), ttl, holder=holder)


async def test_one_holder_at_a_time_and_each_taking_gets_a_higher_fence(redis: Any) -> None:
    a, b = lease(redis, "a"), lease(redis, "b")
    assert await a.acquire()
    assert not await b.acquire()
    assert await b.current_holder() == "a"
    first = a.fence.number
    await a.release()
    assert await b.acquire()
    assert b.fence.number > first
    assert await a.current_holder() == "b"


async def test_renew_and_release_with_a_wrong_token_fail(redis: Any) -> None:
    a = lease(redis, "a", ttl=60)
    assert await a.acquire()
    impostor = lease(redis, "b", ttl=60)
    impostor.fence.number, impostor.fence.deadline = 1, float("inf")
    assert not await impostor.renew()
    assert not impostor.fence.is_open()  # a failed renew closes the fence at once
    await impostor.release()
    assert await redis.get(keys.tg_lease(BOT)) == "a"  # left alone
    await redis.pexpire(keys.tg_lease(BOT), 500)
    assert await a.renew()
    assert await redis.pttl(keys.tg_lease(BOT)) > 50_000  # the right token extends it
    await a.release()
    assert await redis.get(keys.tg_lease(BOT)) is None


async def test_the_fence_closes_before_the_lease_can_expire(redis: Any) -> None:
    a = lease(redis, "a", ttl=0.6)
    assert await a.acquire()
    assert a.fence.is_open()
    while a.fence.is_open():
        await asyncio.sleep(0.01)
    # Closed by the local deadline while Redis still has the key: nobody else holds it yet.
    assert await redis.get(keys.tg_lease(BOT)) == "a"
    b = lease(redis, "b", ttl=0.6)
    while not await b.acquire():
        await asyncio.sleep(0.02)
    assert not await a.renew()  # expired and taken: the old holder learns it lost


def holders(redis: Any) -> tuple[TelegramState, TelegramState]:
    """The state as an old holder (fence 1) and a newer one (fence 2) write it, both
    past their local check: a write of the old one is what reaches Redis after a pause."""
    old_fence, new_fence = Fence(), Fence()
    old_fence.number, old_fence.deadline = 1, float("inf")
    new_fence.number, new_fence.deadline = 2, float("inf")
    return TelegramState(redis, fence=old_fence), TelegramState(redis, fence=new_fence)


def draft_key(key: DraftKey) -> str:
    """Where Telegram's stored draft state is kept."""
    return keys.channel_draft(keys.TG, key.owner, key.chat_id, key.thread_id)


async def written_by_both(redis: Any) -> tuple[TelegramState, TelegramState, DraftKey]:
    """A draft the old holder wrote (message 7), then the newer one (message 8)."""
    old, new = holders(redis)
    key = DraftKey(42, 0, Owner("main", "t1"))
    await old.drafts.save(key, DraftState(message_id=7))
    await new.drafts.save(key, DraftState(message_id=8))
    return old, new, key


async def test_a_draft_write_of_an_older_holder_is_refused(redis: Any) -> None:
    old, new, key = await written_by_both(redis)
    with pytest.raises(FenceClosed):
        await old.drafts.save(key, DraftState(message_id=7, revision=3))
    assert (await new.drafts.of(key)).message_id == 8
    assert (await TelegramState(redis).drafts.of(key)).message_id == 8  # the stored state reads as before
    assert old.fence is not None
    old.fence.close()
    with pytest.raises(FenceClosed):  # past its deadline it does not even try
        await old.drafts.save(key, DraftState(message_id=9))


async def test_a_delete_of_an_older_holder_is_refused_after_a_newer_one_wrote(redis: Any) -> None:
    old, new, key = await written_by_both(redis)
    with pytest.raises(FenceClosed):
        await old.drafts.forget(key)
    with pytest.raises(FenceClosed):
        await old.drafts.save(key, DraftState())  # the empty state is a delete
    assert (await new.drafts.of(key)).message_id == 8
    await new.drafts.forget(key)  # the current holder's delete works
    assert await redis.get(draft_key(key)) is None
    await old.drafts.forget(key)  # nothing stored: nothing to refuse


async def test_a_holder_deletes_what_it_or_an_older_holder_wrote(redis: Any) -> None:
    old, new = holders(redis)
    mine, older, unfenced = (DraftKey(42, 0, Owner("main", t)) for t in ("t1", "t2", "t3"))
    await new.drafts.save(mine, DraftState(message_id=1))
    await old.drafts.save(older, DraftState(message_id=2))
    await TelegramState(redis).drafts.save(unfenced, DraftState(message_id=3))  # no lease: no number
    await new.drafts.save(mine, DraftState())
    await new.drafts.forget(older)
    await old.drafts.forget(unfenced)
    for key in (mine, older, unfenced):
        assert await redis.get(draft_key(key)) is None


async def test_a_draft_started_under_a_lease_carries_its_fence(redis: Any) -> None:
    old, new = holders(redis)
    key = DraftKey(42, 0, Owner("main", "t1"))
    assert await new.drafts.start(key, DraftState(done_run="r1"))
    assert not await old.drafts.start(key, DraftState(done_run="r0"))  # NX: never over a state
    with pytest.raises(FenceClosed):  # the creator's number guards it like any write
        await old.drafts.save(key, DraftState(message_id=7))
    with pytest.raises(FenceClosed):
        await old.drafts.forget(key)
    assert (await new.drafts.of(key)).done_run == "r1"


async def test_follows_and_overrides_are_not_written_past_the_deadline(redis: Any) -> None:
    old, _ = holders(redis)
    assert old.fence is not None
    old.fence.close()
    key = DraftKey(42, 0, Owner("main", "t1"))
    for write in (old.follows.add(key), old.follows.remove(key), old.prefs.set_mode(42, Mode.off), old.prefs.set_rich(42, True)):
        with pytest.raises(FenceClosed):
            await write
    assert await TelegramState(redis).follows.of(42) == []
    assert await TelegramState(redis).prefs.of(42) == ChatPrefs()


# --- several bots --------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "progresscast.toml"
    path.write_text(text)
    return path


def test_a_bot_inherits_every_setting_it_does_not_set(tmp_path: Path) -> None:
    settings = load_settings(
        write(
            tmp_path,
            """
[channels.telegram]
token = "111:first"
apiBaseUrl = "http://127.0.0.1:1/bot"
allowedChats = [1, 2]
richMessages = true
leaseSeconds = 3
[channels.telegram.streaming]
mode = "partial"
[channels.telegram.streaming.progress]
maxLines = 5
[[channels.telegram.chats]]
id = 1
follow = ["t1"]

[[channels.telegram.bots]]
token = "222:second"
allowedChats = [3]
[channels.telegram.bots.streaming.progress]
maxLineChars = 60
""",
        )
    )
    first, second = bots(settings)
    assert (first.bot_id, first.namespace, first.group) == ("111", "tg", "telegram")
    assert (second.bot_id, second.namespace, second.group) == ("222", "tg-222", "telegram-222")
    own = second.telegram
    assert own.token == "222:second" and own.allowedChats == [3]
    assert own.apiBaseUrl == "http://127.0.0.1:1/bot" and own.richMessages and own.leaseSeconds == 3
    assert own.streaming.mode is Mode.partial
    assert (own.streaming.progress.maxLines, own.streaming.progress.maxLineChars) == (5, 60)  # tables merge
    assert [c.id for c in own.chats] == [1]
    assert first.telegram.streaming.progress.maxLineChars == 120 and first.telegram.allowedChats == [1, 2]


@pytest.mark.parametrize(
    ("bots_toml", "message"),
    [
        ('[[channels.telegram.bots]]\nallowedChats = [1]\n',
         "channels.telegram.bots[0].token: the same bot as channels.telegram.token (it inherits the token"),
        ('[[channels.telegram.bots]]\ntoken = "222:b"\n[[channels.telegram.bots]]\ntoken = "222:b-renewed"\n',
         "channels.telegram.bots[1].token: the same bot as channels.telegram.bots[0].token"),
        ('[[channels.telegram.bots]]\ntoken = "222:b"\ntokn = "x"\n',
         "unknown setting `channels.telegram.bots[0].tokn` — did you mean `token`?"),
        ('[channels.telegram.webhook]\nurl = "https://e.org/telegram/a"\nsecretToken = "s3cret"\n'
         '[[channels.telegram.bots]]\ntoken = "222:b"\n',
         "channels.telegram.bots[0].webhook.url: the same webhook path as channels.telegram.webhook.url (it inherits"),
        ('[[channels.telegram.bots]]\ntoken = "222:b"\nleaseSeconds = 0\n',
         "channels.telegram.bots[0].leaseSeconds: Input should be greater than or equal to 0.5"),
    ],
)
def test_bot_config_mistakes_are_one_line_naming_the_setting(tmp_path: Path, bots_toml: str, message: str) -> None:
    path = write(tmp_path, '[channels.telegram]\ntoken = "111:a"\n' + bots_toml)
    with pytest.raises(ConfigError) as caught:
        load_settings(path)
    assert str(caught.value).startswith(f"config {path}: {message}"), caught.value
    assert "\n" not in str(caught.value)


def test_a_new_holder_counts_every_chat_as_just_called() -> None:
    """The previous holder may have called any chat a moment before it released the lease."""
    from progresscast.channels.pacing import Budgets, Pacer

    now = [100.0]
    budgets = Budgets(interval=lambda chat: 3.0 if int(str(chat)) < 0 else 1.0, bot_rate=30, scale=1.0)
    pacer = Pacer(budgets, clock=lambda: now[0])
    assert pacer.ready_in(5) == 0
    pacer.as_if_all_called()
    assert (pacer.ready_in(5), pacer.ready_in(-5)) == (1.0, 3.0)
    now[0] += 1.0
    assert (pacer.ready_in(5), pacer.ready_in(-5)) == (0.0, 2.0)


async def test_a_state_at_its_defaults_is_stored_under_a_lease_as_json(redis: Any) -> None:
    # Fields at their defaults are not written: the fence number is then the only one.
    _, new = holders(redis)
    key = DraftKey(42, 0, Owner("main", "t1"))
    assert await new.drafts.start(key, DraftState())
    assert new.fence is not None
    assert json.loads(await redis.get(draft_key(key))) == {"fence": new.fence.number}
    assert await new.drafts.of(key) == DraftState()
