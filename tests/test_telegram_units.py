"""The Telegram adapter's small parts: pacing, error classification, settings precedence,
and the Redis state of follows."""

from __future__ import annotations

import warnings
from dataclasses import replace
from typing import cast

import httpx
import pytest
from redis.asyncio import Redis
from telegram.error import BadRequest, ChatMigrated, EndPointNotFound, Forbidden, NetworkError, RetryAfter, TimedOut

from conftest import all_keys
from progresscast.channels.chat.access import AccessPolicy, AccessStore
from progresscast.channels.chat.destinations import RenderSettingsCache, render_settings
from progresscast.channels.draft.outcome import OutcomeKind as K
from progresscast.channels.draft.state import DraftState
from progresscast.channels.state.messages import KEEP_SENT_IDS
from progresscast.channels.state.prefs import prefs_of
from progresscast.config.base import Mode
from progresscast.config.telegram import TelegramSettings
from progresscast.model.owners import Owner
from progresscast.store import keys
from progresscast.store.retention import retention_ms
from progresscast.telegram.client import classify
from progresscast.telegram.follows import ChatPrefs, DraftKey, TelegramState
from progresscast.telegram.pacing import Pace

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")  # PTB's own RetryAfter


# --- pacing (the pacer itself is tested in test_channel_pacing.py) -------------------------


def test_defaults_are_telegrams_limits() -> None:
    pace = Pace()
    assert (pace.destination_interval, pace.group_interval, pace.bot_rate, pace.retry_after_cap) == (1.0, 3.0, 30.0, 60.0)
    budgets = replace(pace.budgets(), scale=1.0)
    # 30 a second, granted at most 30 to 1.05 s (the leaving margin)
    assert (budgets.spacing(42), budgets.spacing(-100), budgets.bot_spacing) == (1.0, 3.0, pytest.approx(1.05 / 30))


# --- what errors mean -----------------------------------------------------------------


def retry_after(seconds: int) -> RetryAfter:
    with warnings.catch_warnings():  # PTB 22 warns in its own constructor
        warnings.simplefilter("ignore")
        return RetryAfter(seconds)


def caused(exc: Exception, cause: BaseException) -> Exception:
    exc.__cause__ = cause
    return exc


@pytest.mark.parametrize(
    ("exc", "rich", "outcome"),
    [
        (retry_after(7), False, K.rate_limited),
        (BadRequest("Message is not modified: specified new message content ..."), False, K.not_modified),
        (BadRequest("Message to edit not found"), False, K.gone),
        (BadRequest("Message to delete not found"), False, K.gone),
        (BadRequest("Message_id_invalid"), False, K.gone),
        (BadRequest("Message can't be edited"), False, K.locked),
        (BadRequest("Message can't be deleted for everyone"), False, K.locked),
        (BadRequest('Can\'t parse entities: unsupported start tag "br" at byte offset 3'), False, K.refused_content),
        (BadRequest("Message text is empty"), True, K.unsupported),
        (BadRequest("Unknown parameter rich_message"), True, K.unsupported),
        # Content errors of a server that knows rich messages: that payload only.
        (BadRequest("Too many blocks in the rich message"), True, K.refused_content),
        (BadRequest("Rich message must be non-empty"), True, K.refused_content),
        (BadRequest("Can't parse rich message blocks"), True, K.refused_content),
        (BadRequest("Rich message must be non-empty"), False, K.refused),
        (BadRequest("Message text is empty"), False, K.refused),
        (BadRequest("Message is too long"), False, K.refused),
        (EndPointNotFound("Endpoint 'sendRichMessage' not found in Bot API"), True, K.unsupported),
        (Forbidden("Forbidden: bot was blocked by the user"), False, K.forbidden),
        (ChatMigrated(-1001), False, K.refused),
        (caused(TimedOut(), httpx.ReadTimeout("read")), False, K.unsure),
        (caused(TimedOut(), httpx.ConnectTimeout("connect")), False, K.transient),
        (TimedOut("Pool timeout: All connections in the connection pool are occupied."), False, K.transient),
        (caused(NetworkError("httpx.ConnectError: refused"), httpx.ConnectError("refused")), False, K.transient),
        (caused(NetworkError("httpx.ReadError"), httpx.ReadError("reset")), False, K.unsure),
        (NetworkError("Internal Server Error (500)"), False, K.unsure),
        (NetworkError("Bad Gateway"), False, K.unsure),
        (RuntimeError("boom"), False, K.unsure),
    ],
)
def test_classify(exc: Exception, rich: bool, outcome: K) -> None:
    assert classify(exc, rich=rich).kind is outcome


def test_retry_after_seconds() -> None:
    assert classify(retry_after(7)).retry_after == 7


# --- settings precedence ----------------------------------------------------------------


def test_chat_override_then_chat_config_then_bot_wide() -> None:
    telegram = TelegramSettings.model_validate(
        {"richMessages": False, "streaming": {"mode": "progress"}, "chats": [{"id": 5, "mode": "partial", "richMessages": True}]}
    )
    assert render_settings(telegram, 9, ChatPrefs()).mode is Mode.progress
    assert render_settings(telegram, 5, ChatPrefs()).mode is Mode.partial
    assert render_settings(telegram, 5, ChatPrefs(mode=Mode.block)).mode is Mode.block
    assert render_settings(telegram, 5, ChatPrefs()).rich is True
    assert render_settings(telegram, 5, ChatPrefs(rich=False)).rich is False
    assert render_settings(telegram, 9, ChatPrefs(rich=True)).rich is True
    assert render_settings(telegram, 9, ChatPrefs(rich=True), rich_available=False).rich is False


def test_destinations_with_the_same_settings_share_one_object() -> None:
    """Every destination's render settings and prefs are kept (a model is ≈ 1.5 KB, per
    chat at 10,000 chats): one object per distinct value."""
    telegram = TelegramSettings.model_validate({"chats": [{"id": 5, "mode": "partial"}]})
    cache = RenderSettingsCache(telegram)
    shared = cache.get(1, ChatPrefs())
    assert cache.get(2, ChatPrefs()) is shared
    partial = cache.get(5, ChatPrefs())
    assert partial.mode is Mode.partial and shared.mode is Mode.progress
    assert cache.get(3, ChatPrefs(mode=Mode.partial)) is partial
    assert cache.get(2, ChatPrefs(rich=True)).rich is True and shared.rich is False  # nothing shared changed
    assert prefs_of({"mode": "block"}) is prefs_of({"mode": "block"}) == ChatPrefs(mode=Mode.block)


def test_allowed_chats() -> None:
    from progresscast.config.agents import AgentSettings
    from progresscast.config.base import Access

    def policy(telegram: TelegramSettings) -> AccessPolicy:
        return AccessPolicy("telegram", telegram, AgentSettings(), cast(AccessStore, None))  # no Redis read here

    # Drafts: under pairing, every destination that follows (a follow is made only under a grant).
    assert policy(TelegramSettings()).drafts_allowed(1)
    assert policy(TelegramSettings(allowedChats=[1])).drafts_allowed(1)
    assert not policy(TelegramSettings(allowedChats=[1])).drafts_allowed(2)
    assert policy(TelegramSettings(allowedChats=[1])).mode is Access.allowlist
    assert policy(TelegramSettings(allowedChats=[])).mode is Access.pairing  # an empty list counts as unset
    assert policy(TelegramSettings(allowedChats=[1], access="open")).mode is Access.open


# --- state in Redis ---------------------------------------------------------------------


@pytest.mark.backends
async def test_follows_are_stored_from_both_sides(redis: Redis) -> None:
    state = TelegramState(redis)
    a = DraftKey(42, 0, Owner("main", "t1"))
    b = DraftKey(42, 7, Owner("research", "agent:x"))
    assert await state.follows.add(a) is True
    assert await state.follows.add(a) is False
    await state.follows.add(b)
    assert await state.follows.of(42) == [a, b]
    assert await state.follows.of(42, 7) == [b]
    async with redis.pipeline(transaction=False) as pipe:  # as a batch of change events reads it
        state.follows.queue_followers(pipe, [Owner("main", "t1")])
        assert state.follows.followers_from([Owner("main", "t1")], await pipe.execute()) == [a]
    assert await state.follows.all() == [a, b]
    assert await state.follows.has(a)
    assert await state.follows.remove(a) is True
    assert not await state.follows.has(a)
    await state.follows.remove(b)
    assert await state.follows.destinations() == []
    assert await all_keys(redis, f"{keys.PREFIX}:tg:*") == []


@pytest.mark.backends
async def test_prefs_drafts_and_marks(redis: Redis) -> None:
    state = TelegramState(redis)
    await state.prefs.set_mode(42, Mode.block)
    await state.prefs.set_rich(42, False)
    assert await state.prefs.of(42) == ChatPrefs(mode=Mode.block, rich=False)
    assert await state.prefs.of(43) == ChatPrefs()
    key = DraftKey(42, 0, Owner("main", "t1"))
    await state.drafts.save(key, DraftState(message_id=3, digest="d", kind="classic"))
    assert (await state.drafts.of(key)).message_id == 3
    await state.drafts.save(key, DraftState())
    assert await redis.exists(keys.channel_draft(keys.TG, key.owner, 42, 0)) == 0
    await state.messages.saw(42, 10)
    await state.messages.saw(42, 4)
    assert await state.messages.last(42) == 10
    await state.bot.refuse_rich(1, "Not Found")
    assert await state.bot.rich_refused(1) == "Not Found"
    assert 0 < await redis.ttl(keys.channel_no_rich(keys.TG, 1)) <= 24 * 3600


@pytest.mark.backends
async def test_a_sent_message_is_remembered_newest_first_and_kept_the_retention(redis: Redis) -> None:
    state = TelegramState(redis)
    ms = await retention_ms(redis)
    assert ms > 0  # the store's default retention
    for message_id in range(1, KEEP_SENT_IDS + 6):
        await state.messages.sent(42, message_id)
    await redis.pexpire(keys.channel_last_message(keys.TG, 42), 5_000)
    await state.messages.saw(42, 3)  # an older id changes nothing, and still renews
    assert await state.messages.last(42) == KEEP_SENT_IDS + 5
    assert await state.messages.sent_after(42, KEEP_SENT_IDS) == frozenset({KEEP_SENT_IDS + k for k in range(1, 6)})
    assert await state.messages.sent_after(42, 0) == frozenset(range(6, KEEP_SENT_IDS + 6))
    for name in (keys.channel_sent(keys.TG, 42), keys.channel_last_message(keys.TG, 42)):
        assert ms - 60_000 < await redis.pttl(name) <= ms, name  # each write set its time to live


@pytest.mark.backends
async def test_a_draft_write_renews_the_keys_its_destination_has(redis: Redis) -> None:
    """A draft's read tells which of its destination's keys are not made yet (its first
    draft's write asks for none of them); those that are made are renewed by the write."""
    key = DraftKey(42, 0, Owner("main", "t-1"))
    before = TelegramState(redis)
    await before.follows.add(key)
    await before.prefs.set_mode(42, Mode.progress)
    await before.messages.sent(42, 7)
    names = [keys.channel_followers(keys.TG, key.owner), *before.scope.destination(42)]
    for name in names:
        assert await redis.pexpire(name, 60_000), name  # made, and nearly expired
    state = TelegramState(redis)  # another process (a restart): it renewed nothing yet
    async with redis.pipeline(transaction=False) as pipe:
        state.queue_draft_following(key, pipe)
        read = state.draft_following_of(key, await pipe.execute())
    assert read.following and read.mark == 7
    await state.drafts.save(key, DraftState(message_id=7))
    ms = await retention_ms(redis)
    for name in names:
        assert ms - 60_000 < await redis.pttl(name) <= ms, name


# --- start-up calls: retried while the Bot API is unreachable, refusals are not ------------


async def test_start_up_calls_are_retried_while_unreachable_and_refusals_are_not() -> None:
    from progresscast.backoff import Backoff
    from progresscast.telegram.bot import _while_unreachable

    calls: list[int] = []

    async def flaky() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise NetworkError("connection refused")

    await _while_unreachable(Backoff(base=0.001, cap=0.001), "", flaky)
    assert len(calls) == 3

    async def refused() -> None:
        calls.append(1)
        raise BadRequest("Bad webhook: HTTPS URL must be provided for webhook")

    calls.clear()
    with pytest.raises(BadRequest):
        await _while_unreachable(Backoff(base=0.001, cap=0.001), " to set the webhook", refused)
    assert len(calls) == 1


def test_backoff_stays_at_its_cap_after_any_number_of_failures() -> None:
    from progresscast.backoff import Backoff

    backoff = Backoff()
    assert backoff.delay(0) == 0.5 and backoff.delay(1) == 1.0
    assert backoff.delay(10) == backoff.delay(5_000) == backoff.cap  # hours of an unreachable API
