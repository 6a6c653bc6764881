"""`progresscast render CARD.json` payloads through payload_for."""

from __future__ import annotations

import pytest

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.card import CardError
from progresscast.render import payload_for
from progresscast.testing.telegram_html import parse

WRITE = {"plan": [{"step": "Build", "status": "completed"}, {"step": "Test", "status": "in_progress"}], "markdown": "**note**"}
STORED = {
    "sessionKey": "ticket-1",
    "agentId": "research",
    "displayKey": "agent:research:ticket-1",
    "revision": 7,
    **WRITE,
    "updatedAt": "2026-06-01T00:00:00Z",
}


def test_telegram_classic_from_a_write_input() -> None:
    out = payload_for(WRITE, "telegram", RenderSettings(), False)
    assert out["method"] == "sendMessage" and set(out) == {"method", "params"}
    text = parse(out["params"]["text"]).text
    assert text.startswith("main · preview · 1/2 complete\n✅ Build\n▶️ Test")


def test_telegram_from_what_card_get_prints_keeps_the_owner() -> None:
    out = payload_for(STORED, "telegram", RenderSettings(), False)
    assert parse(out["params"]["text"]).text.startswith("research · ticket-1")


def test_rich_text_and_web() -> None:
    rich = payload_for(WRITE, "telegram", RenderSettings(rich=True), False)
    assert rich["method"] == "sendRichMessage" and "blocks" in rich["params"]["rich_message"]
    text = payload_for(WRITE, "text", RenderSettings(), True)
    assert set(text) == {"text"} and "[‖] Test" in text["text"]
    web = payload_for(WRITE, "web", RenderSettings(), True)
    assert set(web) == {"html"} and 'aria-label="Test, paused"' in web["html"]


def test_limits_and_modes_are_applied() -> None:
    plan = {"plan": [{"step": f"s{i} " + "x" * 200, "status": "pending"} for i in range(30)]}
    out = payload_for(plan, "text", RenderSettings(maxLines=4, maxLineChars=30), False)
    lines = out["text"].split("\n")
    assert len(lines) == 4 and all(len(line) <= 30 for line in lines)
    assert payload_for(plan, "telegram", RenderSettings(mode=Mode.off), False) == {"method": "deleteMessage", "params": {}}


def test_activity_may_be_previewed() -> None:
    data = {**WRITE, "activity": {"answer": "Here is the **answer**"}}
    out = payload_for(data, "telegram", RenderSettings(mode=Mode.partial), False)
    assert out["params"]["text"].startswith("Here is the <b>answer</b>")


def test_null_and_clearing_input_render_nothing() -> None:
    assert payload_for(None, "telegram", RenderSettings(), False) == {"method": "deleteMessage", "params": {}}
    assert payload_for({}, "text", RenderSettings(), False) == {"text": None}
    assert payload_for({"plan": [], "markdown": "  "}, "web", RenderSettings(), False)["html"].startswith('<p class="pc-empty"')


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"plan": [{"step": "a", "status": "done"}]}, "plan[0].status"),
        ({"plan": [{"step": "a", "status": "in_progress"}, {"step": "b", "status": "in_progress"}]}, "plan"),
        ({"plan": [{"step": "é" * 257, "status": "pending"}]}, "plan[0].step"),
        ({"markdown": 3}, "markdown"),
        ({"plan": "x"}, "plan"),
        ({"colour": "red"}, "colour"),
        ({**STORED, "plan": [{"step": "", "status": "pending"}]}, "plan[0].step"),
        ({**STORED, "revision": "7"}, "revision"),
        ({**STORED, "sessionKey": 5}, "sessionKey"),
        ([1, 2], "card"),
    ],
)
def test_bad_input_names_the_field(data: object, field: str) -> None:
    with pytest.raises(CardError) as info:
        payload_for(data, "telegram", RenderSettings(), False)
    assert info.value.field == field


def test_unknown_channel() -> None:
    with pytest.raises(ValueError, match="channel"):
        payload_for(WRITE, "sms", RenderSettings(), False)
