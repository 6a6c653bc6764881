"""`progresscast acp` seen from a chat: the proxy between an ACP editor and agent (both the
SDK's, tests/acp_agent.py), a real Telegram adapter (python-telegram-bot against the Bot
API emulator) following the proxy's session. The draft follows each plan update, and a
permission request is an ask whose buttons are the request's options: a press reaches
the agent."""
# ruff: noqa: F811 — the fixtures are the adapter tests' and the proxy tests', imported; pytest passes them by name

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from progresscast.testing import BotAPIEmulator, ShownMessage
from test_acp_proxy import SESSION, Session, acp  # noqa: F401
from test_telegram_adapter import PRIVATE, Harness, api, harness, scaled  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")


def ask_for(api: BotAPIEmulator, prompt: str) -> ShownMessage | None:
    return next((m for m in api.chat(PRIVATE).visible() if f"asks: {prompt}" in m.text and m.reply_markup), None)


def buttons(message: ShownMessage) -> list[str]:
    return [b["text"] for row in message.reply_markup["inline_keyboard"] for b in row]


async def test_the_chat_follows_the_plan_and_a_press_answers_the_agents_permission_request(
    api: BotAPIEmulator, harness: Any, acp: Any, redis_url: str
) -> None:
    h: Harness = await harness()
    await h.command(PRIVATE, f"/follow {SESSION}")
    s: Session = await acp(redis_url)
    session_id = await s.start()
    turn = asyncio.create_task(s.prompt(session_id, "steps"))

    # The first plan: the first step active, the tool call on its line.
    draft = await api.wait_for(lambda: _card_showing(h, "▶️ Edit the parser", "🔧 Edit parser.py"), 10)
    first = await api.wait_for(lambda: ask_for(api, "Allow Edit the parser?"), 10)
    assert buttons(first) == ["Yes, go ahead", "No, stop"]
    assert "✓" not in draft.text

    api.press(PRIVATE, first.message_id, "Yes, go ahead", first_name="Ana")
    # The agent got the option, marked its tool call done and sent the plan again.
    await api.wait_for(lambda: _card_showing(h, "🔧 Edit parser.py ✓"), 10)
    second = await api.wait_for(lambda: ask_for(api, "Allow Run the tests?"), 10)
    assert s.outcomes() == [{"outcome": "selected", "optionId": "yes"}]
    await api.wait_for(lambda: _active(h) == "Run the tests", 10)

    api.press(PRIVATE, second.message_id, "No, stop", first_name="Ana")
    assert await turn == "end_turn"
    assert s.outcomes() == [{"outcome": "selected", "optionId": "yes"}, {"outcome": "selected", "optionId": "no"}]
    # The third plan (two steps done) is the one the run ended on; both asks say who answered.
    await api.wait_for(lambda: _showing(api, f"✅ {SESSION} · 2/3 done"), 10)
    await api.wait_for(lambda: _showing(api, "Allow Run the tests? — Ana answered: No, stop"), 10)
    assert await s.close() == 0
    assert bytes(s.client_bytes["in"]) == s.agent_bytes("out")


def _showing(api: BotAPIEmulator, text: str) -> bool:
    return any(text in m.text for m in api.chat(PRIVATE).visible())


def _card(h: Harness) -> ShownMessage | None:
    """The session's draft (the ask messages are the bot's messages too)."""
    return next((m for m in h.drafts(PRIVATE) if m.text.startswith(f"main · {SESSION} ·")), None)


def _card_showing(h: Harness, *needles: str) -> ShownMessage | None:
    card = _card(h)
    return card if card is not None and all(n in card.text for n in needles) else None


def _active(h: Harness) -> str | None:
    """The draft's active step (`▶️ …`), once it shows one."""
    card = _card(h)
    for line in card.text.splitlines() if card else []:
        if line.startswith("▶"):
            return line.lstrip("▶\ufe0f ").split("·")[0].strip()
    return None
