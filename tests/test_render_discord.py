"""Discord renderer: Components V2 goldens, escaping, limits (pure: no I/O).

Goldens reuse the scenarios of test_render_golden.py (`<name>.discord.json`: the
createMessage payload with its plain fallback); regenerate with `UPDATE_GOLDEN=1` and
read the diff. Properties: every card renders inside Discord's limits (≤ 40
components, ≤ 4,000 characters of text, a fallback ≤ 2,000), makes no mention a
reader could see, and carries `allowed_mentions: {"parse": []}`.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import clean_text
from progresscast.model.view import RunState, View
from progresscast.render import render_discord, render_discord_final_answer
from progresscast.render.discord import (
    IS_COMPONENTS_V2,
    MAX_COMPONENTS,
    MAX_CONTENT,
    MAX_TEXT,
    count_components,
    escape,
    text_size,
)
from progresscast.render.discord_payload import discord_draft
from progresscast.render.ir import u16
from progresscast.testing._discord_state import check_body
from progresscast.testing.discord_markdown import components_text, read_markdown
from test_render_golden import ACTIVE, CASES, FIFTY, OWNER, Case, card, check
from test_render_properties import PROPS, render_settings, shows_something, views, with_extremes

PINGS = "@everyone <@123> <@&456> @here <#789> <@!42>"

DISCORD_CASES: dict[str, Case] = {
    **CASES,
    "discord_mentions": Case(
        View(
            OWNER,
            card(
                [(f"Tell {PINGS}", "in_progress", "cc <@&456>"), ("**not bold** _x_ ~~y~~ ||spoiler|| `c`", "pending")],
                f"Hi {PINGS}\n\n- [runbook](https://example.com/a_(b)) [x](javascript:alert(1))\n\n"
                "```\nclose ``` fence <@123>\n```\n\n# heading\n-# subtext\n> quote @here",
            ),
            Activity(headline=f"pinging {PINGS}", tools=("run: echo '@everyone'",)),
            RunState.active,
        ),
        RenderSettings(maxLines=12, label="@everyone ops"),
    ),
    "discord_done": Case(
        View(OWNER, card([("Read", "completed"), ("Skip", "skipped"), ("Ship", "completed")]), Activity(), RunState.completed)
    ),
}


def dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, indent=2) + "\n"


@pytest.mark.parametrize("name", sorted(DISCORD_CASES))
def test_golden(name: str) -> None:
    case = DISCORD_CASES[name]
    check(name, "discord.json", dumps(render_discord(case.view, case.settings)))


def test_golden_final_answer() -> None:
    answer = "# Done\n\nThe fix is in **#4822** for @everyone & <@123>.\n\n" + "\n\n".join(
        f"Paragraph {i}: " + "words * more _ " * 60 for i in range(8)
    )
    messages = render_discord_final_answer(answer)
    check("final_answer", "discord.json", dumps(messages))
    assert len(messages) > 1
    shown = [read_markdown(m["params"]["content"]) for m in messages]
    for message in messages:
        params = message["params"]
        assert 0 < u16(params["content"]) <= MAX_CONTENT
        assert params["allowed_mentions"] == {"parse": []}
        check_body(params, edit=False, v2_allowed=True)
    text = "\n".join(s.text for s in shown)
    assert "for @everyone & <@123>." in text and "Paragraph 7:" in text
    assert [m for s in shown for m in s.mentions] == []


def test_every_state_has_a_distinct_mark_and_the_state_colours_the_container() -> None:
    case = DISCORD_CASES["all_states"]
    payload = render_discord(case.view, case.settings)
    assert payload is not None
    container = payload["params"]["components"][0]
    checklist = next(d["content"] for d in container["components"] if "Read the ticket" in d["content"])
    marks = [row.split(" ", 1)[0] for row in checklist.split("\n")]
    assert len(set(marks[:5])) == 5  # completed, skipped, in progress, blocked, pending
    paused = render_discord(DISCORD_CASES["paused"].view, DISCORD_CASES["paused"].settings)
    assert paused is not None
    assert "⏸️" in "".join(components_text(paused["params"]["components"]))
    colours = {
        name: render_discord(DISCORD_CASES[name].view, DISCORD_CASES[name].settings)["params"]["components"][0]["accent_color"]  # type: ignore[index]
        for name in ("plan", "all_states", "failed", "discord_done")
    }
    assert len(set(colours.values())) == 4, colours  # working, needs a person, failed, done


def test_agent_text_never_becomes_a_mention_or_markup() -> None:
    case = DISCORD_CASES["discord_mentions"]
    payload = render_discord(case.view, case.settings)
    assert payload is not None
    for params in (payload["params"], payload["fallback"]["params"]):
        assert params["allowed_mentions"] == {"parse": []}
        texts = components_text(params.get("components", [])) or [params["content"]]
        read = [read_markdown(t) for t in texts]
        assert [m for r in read for m in r.mentions] == []
        shown = "\n".join(r.text for r in read)
        assert "@everyone <@123> <@&456> @here <#789> <@!42>" in shown
        assert "**not bold** _x_ ~~y~~ ||spoiler|| `c`" in shown
        assert all(url.startswith("https://example.com/") for r in read for url, _ in r.links)


def test_escape() -> None:
    assert escape("@everyone <@1> *a* _b_ `c` ~d~ |e| #f [g](h)") == (
        "\\@everyone \\<\\@1\\> \\*a\\* \\_b\\_ \\`c\\` \\~d\\~ \\|e\\| \\#f \\[g\\](h)"
    )


def test_a_refused_draft_falls_back_to_plain_content() -> None:
    case = DISCORD_CASES["fifty_steps"]
    draft = discord_draft(case.view, case.settings.model_copy(update={"rich": True}))
    assert draft is not None and draft.kind == "components"
    fallback = draft.fallback()
    assert fallback is not None and fallback.kind == "content"
    assert "Step 20: migrate table t20" in fallback.params["content"]
    plain = discord_draft(case.view, case.settings)
    assert plain is not None and plain.kind == "content" and plain.params == fallback.params


def test_a_fifty_step_card_stays_within_the_limits() -> None:
    view = View(OWNER, card([(f"Step {i}: " + "x" * 480, "pending") for i in range(50)], "y" * 8000), ACTIVE, RunState.active)
    payload = render_discord(view, RenderSettings(maxLines=50, maxLineChars=4096))
    assert payload is not None
    components = payload["params"]["components"]
    assert count_components(components) <= MAX_COMPONENTS
    assert MAX_TEXT - 400 < text_size(components) <= MAX_TEXT  # full, and within
    check_body(payload["params"], edit=False, v2_allowed=True)


# --- properties ---------------------------------------------------------------------------

DISCORD_NASTY = [
    "@everyone", "@here", "<@123>", "<@!123>", "<@&456>", "<#789>", "</cmd:1>", "<t:1:R>", "<:e:1>",
    "[x](https://e.com)", "[js](javascript:alert(1))", "**", "*", "_", "__", "~~", "||", "`", "```", ">", "> ",
    ">>> ", "# ", "-# ", "- ", "1. ", "\\", "\n", "\n\n", " ", "x", "😀", "\u200b",
]
discord_text = st.lists(st.sampled_from(DISCORD_NASTY), min_size=1, max_size=30).map("".join)


@st.composite
def discord_views(draw: Any) -> View:
    n = draw(st.integers(0, 6))
    statuses = ["completed", "in_progress", "pending", "blocked", "skipped", "pending"]
    plan = [
        # What the store keeps of a step is cleaned (a lone zero-width space is empty).
        (clean_text(draw(discord_text)).strip() or "x", statuses[i],
         clean_text(draw(st.one_of(st.just(""), discord_text))).strip() or "n")
        for i in range(n)
    ]
    markdown = draw(st.one_of(st.none(), discord_text))
    has_card = bool(plan) or bool(markdown and markdown.strip())
    activity = Activity(
        headline=draw(st.one_of(st.none(), discord_text)),
        tools=tuple(draw(st.lists(discord_text, max_size=3))),
        answer=draw(st.one_of(st.none(), discord_text)),
    )
    return View(OWNER, card(plan or None, markdown) if has_card else None, activity, RunState.active)


def check_payload(view: View, s: RenderSettings) -> None:
    payload = render_discord(view, s)
    if payload is None:
        assert not shows_something(view, s.mode)
        return
    params = payload["params"]
    assert params["flags"] & IS_COMPONENTS_V2 and params["allowed_mentions"] == {"parse": []}
    components = params["components"]
    assert count_components(components) <= MAX_COMPONENTS
    assert 0 < text_size(components) <= MAX_TEXT
    check_body(params, edit=False, v2_allowed=True)  # what the emulator (as Discord) accepts
    fallback = payload["fallback"]["params"]
    assert 0 < u16(fallback["content"]) <= MAX_CONTENT and fallback["allowed_mentions"] == {"parse": []}
    check_body(fallback, edit=False, v2_allowed=True)
    for text in [*components_text(components), fallback["content"]]:
        assert read_markdown(text).mentions == []


@PROPS
@with_extremes
@given(views(), render_settings)
def test_any_card_renders_within_discord_limits(view: View, s: RenderSettings) -> None:
    check_payload(view, s)


@PROPS
@given(discord_views(), render_settings)
def test_discord_syntax_in_agent_text_stays_text(view: View, s: RenderSettings) -> None:
    check_payload(view, s)


@PROPS
@given(st.one_of(discord_text, st.just("word " * 3000 + "\n\n" + "``` " * 900)))
def test_any_answer_splits_into_messages_within_the_limit(answer: str) -> None:
    for message in render_discord_final_answer(answer):
        assert 0 < u16(message["params"]["content"]) <= MAX_CONTENT
        assert read_markdown(message["params"]["content"]).mentions == []


def test_fifty_lines_in_partial_mode_fit() -> None:
    case = DISCORD_CASES["block_fifty"]
    payload = render_discord(case.view, case.settings.model_copy(update={"mode": Mode.partial, "maxLines": 50}))
    assert payload is not None
    assert text_size(payload["params"]["components"]) <= MAX_TEXT
    assert FIFTY  # the scenario's plan
