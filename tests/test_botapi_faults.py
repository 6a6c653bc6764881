"""The Bot API emulator's random fault mode: what it answers, how often, and that a
refused call does not count against the flood limits."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import httpx
import pytest
import telegram
from telegram.error import NetworkError, TimedOut
from telegram.request import HTTPXRequest

from progresscast.testing import BotAPIEmulator, FaultMix

PRIVATE = 1001

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


async def send(client: httpx.AsyncClient, api: BotAPIEmulator, text: str, chat: int = PRIVATE) -> httpx.Response:
    return await client.post(f"{api.base_url}{api.token}/sendMessage", json={"chat_id": chat, "text": text})


async def test_a_429_looks_like_telegrams_and_the_refused_call_is_not_counted() -> None:
    async with BotAPIEmulator(fault_rate=1.0) as api, httpx.AsyncClient() as client:
        api.fail_randomly(1.0, seed=3, mix=FaultMix(server_error=0, timeout=0, flood=1))
        seen = set()
        for i in range(12):
            answer = await send(client, api, f"m{i}")
            body = answer.json()
            assert answer.status_code == 429
            retry = body["parameters"]["retry_after"]
            assert body == {
                "ok": False, "error_code": 429, "description": f"Too Many Requests: retry after {retry}",
                "parameters": {"retry_after": retry},
            }
            seen.add(retry)
        assert seen <= {1, 2, 3} and len(seen) > 1
        assert api.chat(PRIVATE).texts() == []
        # Twelve refused calls took no token: the private chat's burst of 3 is whole.
        api.fail_randomly(0)
        answers = [await send(client, api, f"ok{i}") for i in range(4)]
        assert [a.status_code for a in answers] == [200, 200, 200, 429]
        assert not api.calls[-1].injected  # the emulator's own flood limit, not a fault


async def test_5xx_answers_as_telegram_words_them_and_applies_nothing() -> None:
    async with BotAPIEmulator(private_pace=None) as api, httpx.AsyncClient() as client:
        api.fail_randomly(1.0, seed=1, mix=FaultMix(server_error=1, timeout=0, flood=0))
        bodies = [(await send(client, api, f"m{i}")) for i in range(20)]
        kinds = {(a.status_code, a.json()["description"]) for a in bodies}
        assert kinds == {(500, "Internal Server Error"), (502, "Bad Gateway")}
        assert all(a.json()["ok"] is False and a.json()["error_code"] == a.status_code for a in bodies)
        assert api.chat(PRIVATE).texts() == []
        bot = telegram.Bot(api.token, base_url=api.base_url)
        with pytest.raises(NetworkError):
            await bot.send_message(PRIVATE, "through PTB")


@pytest.mark.parametrize("applied", [1.0, 0.0])
async def test_timeouts_hold_past_the_read_timeout_and_apply_by_chance(applied: float) -> None:
    async with BotAPIEmulator(private_pace=None) as api:
        api.fail_randomly(1.0, mix=FaultMix(server_error=0, timeout=1, flood=0), applied=applied, hold=0.8)
        request = HTTPXRequest(read_timeout=0.3, connect_timeout=1.0)
        bot = telegram.Bot(api.token, base_url=api.base_url, request=request)
        with pytest.raises(TimedOut):
            await bot.send_message(PRIVATE, "maybe")
        assert api.chat(PRIVATE).texts() == (["maybe"] if applied else [])
        [call] = api.calls_for(PRIVATE)
        assert call.injected and call.timed_out
        assert api.random_faults is not None
        assert api.random_faults.drawn == Counter({"timeout applied" if applied else "timeout dropped": 1})
        await request.shutdown()


async def test_a_share_of_calls_fails_with_a_seeded_mix() -> None:
    calls = 100  # enough for seeds 7 and 8 to draw every kind of fault

    async def run(seed: int) -> list[tuple[int, Any]]:
        async with BotAPIEmulator(private_pace=None, bot_pace=None) as api, httpx.AsyncClient() as client:
            api.fail_randomly(0.3, seed=seed, hold=0.05)
            out = []
            for i in range(calls):
                answer = await client.post(f"{api.base_url}{api.token}/getMe")
                assert answer.status_code == 200  # not a chat method: never failed by default
                answer = await send(client, api, f"m{i}")
                out.append((answer.status_code, answer.json().get("description")))
            assert api.random_faults is not None
            drawn = api.random_faults.drawn
            assert {"5xx", "429"} <= set(drawn) and drawn["timeout applied"] + drawn["timeout dropped"] > 0
            injected = [c for c in api.calls if c.injected]
            assert 0.2 < len(injected) / calls < 0.4
            assert sum(drawn.values()) == len(injected)
            return out

    first = await run(7)
    assert first == await run(7)  # the same seed, the same faults
    assert first != await run(8)


async def test_bad_settings_are_refused() -> None:
    api = BotAPIEmulator()
    with pytest.raises(ValueError, match="between 0 and 1"):
        api.fail_randomly(1.5)
    with pytest.raises(ValueError, match="no method"):
        api.fail_randomly(0.3, methods=["sendMesage"])
    with pytest.raises(ValueError, match="weights"):
        FaultMix(server_error=0, timeout=0, flood=0)
    api.fail_randomly(0.3)
    api.clear_faults()
    assert api.random_faults is None


async def test_latency_holds_every_answer_without_holding_the_others() -> None:
    latency, chats = 0.4, 20
    async with BotAPIEmulator(latency=latency) as api, httpx.AsyncClient(limits=httpx.Limits(max_connections=chats)) as client:
        began = time.monotonic()
        answers = await asyncio.gather(*(send(client, api, f"m{i}", chat=PRIVATE + i) for i in range(chats)))
        took = time.monotonic() - began
        assert [a.status_code for a in answers] == [200] * chats
        # each answer held the latency, all of them at once: not one after another
        assert all(c.answered - c.at >= latency for c in api.calls)
        assert latency <= took < 3 * latency
        assert all(api.chat(PRIVATE + i).visible() for i in range(chats))


def test_a_negative_latency_is_refused() -> None:
    with pytest.raises(ValueError, match="latency: must be 0 or more"):
        BotAPIEmulator(latency=-0.1)
