"""The Slack renderer: Block Kit drafts, the plan display, the final answer.

Goldens reuse the scenarios of test_render_golden.py (`<name>.slack.json`: the Block Kit
call; `<name>.slack-plan.json`: the plan display), plus a few Slack-only limits;
regenerate with `UPDATE_GOLDEN=1` and read the diff. Properties: every card renders
within Slack's limits, passes the emulator's Block Kit check, and agent text never
turns into a mention or a link it did not contain as a Markdown link.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.view import TERMINAL, RunState, View
from progresscast.render import render_slack, render_slack_final_answer
from progresscast.render.markdown import markdown_lines
from progresscast.render.slack import MAX_TASK_TEXT, escape, render_blocks, render_plan
from progresscast.testing.slack_blocks import MAX_MESSAGE_TEXT, Shown, blocks_text, check_blocks, read_mrkdwn
from test_render_golden import ACTIVE, ANSWER, CASES, FIFTY, OWNER, Case, card, check
from test_render_properties import PROPS, render_settings, shows_something, views, with_extremes

SLACK_CASES: dict[str, Case] = {
    **CASES,
    "slack_escapes": Case(
        View(
            OWNER,
            card(
                [
                    ("<!channel> ping <@U0123ABCD>", "in_progress", "see <https://evil.example|docs>"),
                    ("&lt;!here&gt; & <#C0123>", "pending"),
                ],
                "Hi <!everyone> & <@U0123ABCD>: [runbook](https://example.com/a?b=1&c=2) "
                "<https://evil.example|click> *bold* `co`de` ~x~\n\n> &gt; quoted <!here>",
            ),
            Activity(headline="<!subteam^S123> look", tools=("run: echo '<!channel>'",)),
            RunState.active,
        ),
        RenderSettings(maxLines=12, label="<!channel> ops"),
    ),
    "slack_escape_heavy": Case(
        View(OWNER, card(FIFTY, "&<>" * 2730), ANSWER, RunState.active),
        RenderSettings(mode=Mode.partial, maxLines=50, maxLineChars=4096),
    ),
    "slack_long_lines": Case(
        View(
            OWNER,
            card([("&" * 512, "in_progress", "<" * 280), ("x" * 512, "pending")], "y" * 8000),
            ACTIVE,
            RunState.active,
        ),
        RenderSettings(maxLines=50, maxLineChars=4096),
    ),
}


def dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, indent=2) + "\n"


@pytest.mark.parametrize("name", sorted(SLACK_CASES))
def test_golden(name: str) -> None:
    case = SLACK_CASES[name]
    check(name, "slack.json", dumps(render_slack(case.view, case.settings)))
    check(name, "slack-plan.json", dumps(render_slack(case.view, case.settings.model_copy(update={"rich": True}))))


def test_golden_final_answer() -> None:
    answer = "# Done\n\nThe fix is in **#4822** for `<!channel>` & <@U0123>.\n\n" + "\n\n".join(
        f"Paragraph {i}: " + "words & more " * 300 for i in range(8)
    )
    messages = render_slack_final_answer(answer)
    check("final_answer", "slack.json", dumps(messages))
    assert len(messages) > 1
    for message in messages:
        check_blocks(message["params"]["blocks"])
        assert len(message["params"]["text"]) <= MAX_MESSAGE_TEXT
    shown = Shown()
    for message in messages:
        shown.extend(blocks_text(message["params"]["blocks"]))
        shown.extend(read_mrkdwn(message["params"]["text"]))
    assert "for <!channel> & <@U0123>." in shown.text and "Paragraph 7:" in shown.text
    assert shown.mentions == []


def test_every_state_has_a_distinct_mark() -> None:
    case = SLACK_CASES["all_states"]
    payload = render_slack(case.view, case.settings)
    assert payload is not None
    items = [
        item
        for block in payload["params"]["blocks"]
        if block["type"] == "rich_text"
        for el in block["elements"]
        if el["type"] == "rich_text_list"
        for item in el["elements"]
    ]
    marks = [item["elements"][0]["text"] for item in items]
    assert marks == ["✅ ", "⏭️ ", "▶️ ", "⛔ ", "⬜ ", "⬜ "]
    skipped, active = items[1]["elements"][1], items[2]["elements"][1]
    assert skipped["style"] == {"strike": True} and active["style"] == {"bold": True}
    paused = render_slack(SLACK_CASES["paused"].view, SLACK_CASES["paused"].settings)
    assert paused is not None and "⏸️" in paused["params"]["text"]


def test_plan_display_maps_states() -> None:
    case = SLACK_CASES["all_states"]
    payload = render_plan(case.view, case.settings)
    assert payload is not None and payload["method"] == "chat.startStream"
    assert payload["params"]["task_display_mode"] == "plan"
    plan, *tasks = payload["params"]["chunks"]
    assert plan == {"type": "plan_update", "title": "main · ticket-4821 · 2/6 complete"}
    assert [(t["id"], t["status"], t.get("details")) for t in tasks] == [
        ("step-1", "complete", None),
        ("step-2", "complete", "Skipped — not needed for this fix"),
        ("step-3", "in_progress", None),
        ("step-4", "error", "Blocked — waiting for the on-call DBA"),
        ("step-5", "pending", None),
        ("step-6", "pending", None),
    ]
    assert payload["fallback"] == render_blocks(case.view, case.settings)
    paused = render_plan(SLACK_CASES["paused"].view, SLACK_CASES["paused"].settings)
    assert paused is not None
    assert [t.get("details") for t in paused["params"]["chunks"][3:5]] == [
        "Paused",
        "Blocked — waiting for the on-call DBA",  # it still waits for a person
    ]


def test_fallback_is_the_plain_text_without_blocks() -> None:
    case = SLACK_CASES["plan"]
    payload = render_slack(case.view, case.settings)
    assert payload is not None
    assert payload["fallback"]["method"] == "chat.postMessage"
    assert "blocks" not in payload["fallback"]["params"]
    assert payload["fallback"]["params"]["text"] == payload["params"]["text"]
    assert read_mrkdwn(payload["params"]["text"]).text.splitlines()[0] == "main · ticket-4821 · 2/4 complete"


def test_nothing_to_show_is_none() -> None:
    assert render_slack(SLACK_CASES["empty"].view, RenderSettings()) is None
    assert render_slack(SLACK_CASES["off"].view, SLACK_CASES["off"].settings) is None
    assert render_slack_final_answer("") == []


def test_escape() -> None:
    assert escape("<!channel> & <@U1|x>") == "&lt;!channel&gt; &amp; &lt;@U1|x&gt;"


# --- properties ---------------------------------------------------------------------------

SLACK_NASTY = [
    "<!channel>",
    "<!here>",
    "<!everyone>",
    "<@U0123ABCD>",
    "<@U0123ABCD|bob>",
    "<#C0123|general>",
    "<!subteam^S1>",
    "<https://evil.example|click>",
    "<mailto:x@y.z>",
    "&lt;!here&gt;",
    "&amp;lt;",
    "[ok](https://ok.example/a|b>c)",
    "[js](javascript:alert(1))",
    "<https://auto.example/x>",
    "*",
    "_",
    "~",
    "`",
    "```",
    "&",
    "<",
    ">",
    "|",
    "> ",
    "\n",
    "\n\n",
    " ",
    "x",
    "😀",
]
slack_piece = st.sampled_from(SLACK_NASTY)
slack_text = st.lists(slack_piece, min_size=1, max_size=30).map("".join)


@st.composite
def slack_views(draw: Any) -> View:
    n = draw(st.integers(0, 6))
    statuses = ["completed", "in_progress", "pending", "blocked", "skipped", "pending"]
    plan = [
        (draw(slack_text).strip() or "x", statuses[i], draw(st.one_of(st.just(""), slack_text)).strip() or "n")
        for i in range(n)
    ]
    markdown = draw(st.one_of(st.none(), slack_text))
    has_card = bool(plan) or bool(markdown and markdown.strip())
    activity = Activity(
        headline=draw(st.one_of(st.none(), slack_text)),
        tools=tuple(draw(st.lists(slack_text, max_size=3))),
        answer=draw(st.one_of(st.none(), slack_text)),
    )
    return View(
        OWNER, card(plan or None, markdown) if has_card else None, activity, RunState.active, paused=draw(st.booleans())
    )


slack_settings = st.builds(
    RenderSettings,
    mode=st.sampled_from(list(Mode)),
    maxLines=st.integers(3, 50),
    maxLineChars=st.one_of(st.sampled_from([20, 120, 4096]), st.integers(20, 4096)),
    rich=st.booleans(),
    label=st.one_of(st.none(), slack_text),
)


def markdown_hrefs(view: View) -> set[str]:
    """Every link target the agent wrote as a real Markdown link (http/https)."""
    out: set[str] = set()
    for source, kind in ((view.card.markdown if view.card else None, "note"), (view.activity.answer, "answer")):
        for line in markdown_lines(source, kind) if source else ():
            out.update(s.href for s in line.spans if s.href)
    return out


def shown_of(payload: dict[str, Any]) -> Shown:
    shown = read_mrkdwn(payload["params"]["text"])
    shown.extend(blocks_text(payload["params"].get("blocks", [])))
    return shown


def check_payload(view: View, s: RenderSettings) -> None:
    payload = render_slack(view, s)
    if payload is None:
        assert not shows_something(view, s.mode)
        return
    stream = payload["method"] in ("chat.startStream", "chat.stopStream")
    blocks_call = payload["fallback"] if stream else payload
    params = blocks_call["params"]
    assert blocks_call["method"] == "chat.postMessage"
    check_blocks(params["blocks"])  # ≤ 50 blocks, text objects ≤ 3,000: what Slack accepts
    assert 0 < len(params["text"]) <= MAX_MESSAGE_TEXT
    assert params["text"] == blocks_call["fallback"]["params"]["text"]
    hrefs = {
        h.replace("|", "%7C").replace(" ", "%20").replace("<", "%3C").replace(">", "%3E") for h in markdown_hrefs(view)
    }
    for shown in (shown_of(blocks_call), read_mrkdwn(blocks_call["fallback"]["params"]["text"])):
        assert shown.mentions == []
        for url, _ in shown.links:
            assert url in hrefs or url.replace("%7C", "|") in markdown_hrefs(view)
    if stream:
        assert (payload["method"] == "chat.stopStream") == (view.run in TERMINAL)
        for chunk in payload["params"]["chunks"]:
            if chunk["type"] == "task_update":
                assert chunk["status"] in ("pending", "in_progress", "complete", "error")
                assert all(len(chunk.get(k) or "") <= MAX_TASK_TEXT for k in ("title", "details", "output"))
            else:
                assert chunk["type"] == "plan_update" and len(chunk["title"]) <= MAX_TASK_TEXT


@PROPS
@with_extremes
@given(views(), render_settings.flatmap(lambda s: st.sampled_from([s, s.model_copy(update={"rich": True})])))
def test_any_card_renders_within_limits(view: View, s: RenderSettings) -> None:
    check_payload(view, s)


@PROPS
@given(slack_views(), slack_settings)
def test_agent_text_never_mentions_or_links(view: View, s: RenderSettings) -> None:
    check_payload(view, s)


@PROPS
@given(slack_text)
def test_final_answer_never_mentions(answer: str) -> None:
    for message in render_slack_final_answer(answer):
        check_blocks(message["params"]["blocks"])
        assert shown_of(message).mentions == []
