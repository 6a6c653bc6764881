"""Telegram drafts, classic and rich: layout, states, escaping, limits, final answers."""

from __future__ import annotations

from typing import Any

import pytest

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, CardInput, Status, Step
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render import render_final_answer_messages, render_telegram, render_text
from progresscast.render.markdown import markdown_lines
from progresscast.testing.telegram_html import parse, visible_length
from progresscast.testing.telegram_rich import check_rich, rich_text

OWNER = Owner("main", "ticket-4821")


def card(plan: list[dict[str, Any]] | None = None, markdown: str | None = None) -> Card:
    parsed = CardInput.parse({k: v for k, v in (("plan", plan), ("markdown", markdown)) if v is not None})
    return Card(
        sessionKey=OWNER.session_key, agentId=OWNER.agent_id, displayKey=OWNER.display_key, revision=2,
        plan=parsed.plan, markdown=parsed.markdown, updatedAt="2026-06-01T00:00:00Z",
    )


def steps(*pairs: tuple[str, str]) -> list[dict[str, Any]]:
    return [{"step": s, "status": st} for s, st in pairs]


def classic(view: View, **settings: Any) -> str:
    payload = render_telegram(view, RenderSettings(**settings))
    assert payload is not None
    return payload["params"]["text"]


def shown(view: View, **settings: Any) -> list[str]:
    return parse(classic(view, **settings)).text.split("\n")


ALL = steps(
    ("done step", "completed"), ("active step", "in_progress"), ("waiting step", "pending"),
    ("stuck step", "blocked"), ("dropped step", "skipped"),
)


def test_payload_shape_for_classic() -> None:
    payload = render_telegram(View(OWNER, card(ALL)), RenderSettings())
    assert payload == {
        "method": "sendMessage",
        "params": {
            "text": payload["params"]["text"],  # type: ignore[index]
            "parse_mode": "HTML",
            "link_preview_options": {"is_disabled": True},
        },
    }


def test_every_state_is_distinct_and_paused_too() -> None:
    lines = shown(View(OWNER, card(ALL)), maxLines=20)
    icons = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in lines if " step" in line and not line.startswith("⚠")}
    assert len(set(icons.values())) == 5, icons
    paused = shown(View(OWNER, card(ALL), paused=True), maxLines=20)
    paused_icons = {line.split(" ", 1)[1]: line.split(" ", 1)[0] for line in paused if " step" in line and not line.startswith("⚠")}
    # completed, skipped and blocked keep theirs; active and pending read paused, unlike any other state
    assert paused_icons["done step"] == icons["done step"]
    assert paused_icons["dropped step"] == icons["dropped step"]
    assert paused_icons["stuck step"] == icons["stuck step"]
    pause = {paused_icons[k] for k in ("active step", "waiting step")}
    assert len(pause) == 1 and pause.isdisjoint(icons.values())
    assert paused[0] == "main · ticket-4821 · 2/5 complete · paused"  # the header says so too


def test_active_step_is_bold_in_classic() -> None:
    html = classic(View(OWNER, card(ALL)), maxLines=20)
    assert "<b>active step</b>" in html


def test_progress_layout_header_attention_activity_checklist() -> None:
    view = View(OWNER, card(ALL), Activity(headline="Running tests", tools=("pytest -q",)), RunState.failed)
    lines = shown(view, maxLines=20)
    assert lines[0] == "main · ticket-4821 · 2/5 complete"  # label and count share a line; skipped counts as done
    assert lines[1] == "❌ Run failed"
    assert lines[2] == "💬 Running tests"
    assert lines[3] == "🔧 pytest -q"
    # the blocked step is said once: as its checklist row
    assert lines[4:] == ["✅ done step", "▶️ active step", "⬜ waiting step", "⛔ stuck step", "⏭️ dropped step"]


def test_label_setting_and_note_headline_without_plan() -> None:
    view = View(OWNER, card(None, "## Looking at **the logs**\n\nSecond paragraph."))
    lines = shown(view, label="Ops bot")
    assert lines == ["Ops bot", "Looking at the logs", "Second paragraph."]
    # one line left for the note: its lines joined with a space
    assert shown(view, label="Ops bot", maxLines=1) == ["Looking at the logs Second paragraph."]


def test_long_plan_keeps_active_next_and_latest_within_max_lines() -> None:
    plan = steps(*[(f"step {i}", "completed") for i in range(30)], ("now", "in_progress"), *[(f"later {i}", "pending") for i in range(19)])
    lines = shown(View(OWNER, card(plan)), maxLines=5)
    # no summary line: with 30/50 on screen, the hidden steps are no news
    assert lines == ["main · ticket-4821 · 30/50 complete", "✅ step 29", "▶️ now", "⬜ later 0", "⬜ later 1"]


def test_one_and_two_lines() -> None:
    plan = steps(("Check", "completed"), ("Confirm access", "blocked"), ("Repair", "in_progress"), ("Verify", "pending"))
    assert shown(View(OWNER, card(plan)), maxLines=1) == ["⛔ Confirm access · 1/4"]
    assert shown(View(OWNER, card(plan)), maxLines=2) == ["⛔ Confirm access · 1/4", "▶️ Repair"]
    unblocked = steps(("Check", "completed"), ("Repair", "in_progress"), ("Verify", "pending"))
    assert shown(View(OWNER, card(unblocked)), maxLines=1) == ["▶️ Repair · 1/3"]
    assert shown(View(OWNER, card(unblocked)), maxLines=2) == ["main · ticket-4821 · 1/3 complete", "▶️ Repair"]


def test_blocked_steps_left_out_are_summarised() -> None:
    plan = steps(*[(f"b{i}", "blocked") for i in range(5)], ("now", "in_progress"), ("next", "pending"))
    assert shown(View(OWNER, card(plan)), maxLines=1) == ["⛔ b0 · 0/7 · +4 blocked"]
    assert shown(View(OWNER, card(plan)), maxLines=3) == [
        "⛔ b0 · 0/7",
        "⛔ b1",
        "… 5 more: 3 blocked, 1 in progress, 1 pending",
    ]


def test_long_lines_cut_in_the_middle() -> None:
    view = View(OWNER, card(steps(("a" * 100 + "Z" * 100, "in_progress"))))
    lines = shown(view, maxLineChars=30)
    step = next(line for line in lines if line.startswith("▶️"))
    assert len(step) <= 30 and "…" in step and step.endswith("Z")


def test_escaping_of_every_piece_of_agent_text() -> None:
    nasty = "<b>x</b> & <script>alert(1)</script>"
    view = View(
        OWNER,
        card([{"step": nasty, "status": "in_progress", "note": "a<b"}], "<i>raw</i> &amp; <script>x</script>"),
        Activity(headline="<u>h</u>", tools=("<pre>t</pre>",)),
    )
    for mode in (Mode.progress, Mode.partial):
        html = classic(view, mode=mode, maxLines=20, label="<s>L</s>")
        text = parse(html).text
        assert nasty in text
        assert "<script" not in html and "<i>raw" not in html
        if mode is Mode.progress:
            assert "<u>h</u>" in text and "<pre>t</pre>" in text and "<s>L</s>" in text


def test_note_markdown_becomes_telegram_html() -> None:
    note = (
        "# Title\n\n- one\n- **two**\n\n1. first\n\n```py\nx = 1 < 2\n```\n\n"
        "[ok](https://example.com) [bad](javascript:alert(1)) [ftp](ftp://x.y) <span>raw</span>\n\n> quoted"
    )
    html = classic(View(OWNER, card(None, "intro\n\n" + note)), maxLines=30)
    assert "<b>Title</b>" in html
    assert "• one" in html and "• <b>two</b>" in html and "1. first" in html
    assert '<pre><code class="language-py">x = 1 &lt; 2</code></pre>' in html
    assert '<a href="https://example.com">ok</a>' in html
    assert "ftp://" not in html.split("ftp")[0] and '<a href="ftp' not in html and "javascript" not in html.replace("[bad](javascript:alert(1))", "")
    assert "<span>" not in html and "raw" in html
    assert "<blockquote>quoted</blockquote>" in html
    parse(html)


def test_mode_off_and_empty_view_render_nothing() -> None:
    assert render_telegram(View(OWNER, card(ALL)), RenderSettings(mode=Mode.off)) is None
    assert render_telegram(View(OWNER), RenderSettings()) is None
    assert render_text(View(OWNER), RenderSettings()) is None
    # progress drafts do not show the answer: a view with only an answer is empty there
    answer_only = View(OWNER, None, Activity(answer="hi"))
    assert render_telegram(answer_only, RenderSettings()) is None
    assert render_telegram(answer_only, RenderSettings(mode=Mode.partial)) is not None


def test_a_note_of_raw_html_only_shows_nothing() -> None:
    view = View(OWNER, card(None, "<div>\nhidden\n</div>"))
    assert render_telegram(view, RenderSettings()) is None
    assert render_telegram(view, RenderSettings(mode=Mode.partial, rich=True)) is None


def test_clear_keeps_other_activity() -> None:
    view = View(OWNER, None, Activity(headline="Thinking", tools=("grep -r x",)))
    lines = shown(view)
    assert lines == ["main · ticket-4821", "💬 Thinking", "🔧 grep -r x"]


def test_partial_attaches_checklist_below_the_answer_trimmed_from_the_front() -> None:
    answer = "".join(f"Line {i} of the answer.\n\n" for i in range(1000))
    plan = steps(*[(f"step {i} " + "x" * 80, "completed") for i in range(40)], ("now", "in_progress"), ("stuck", "blocked"))
    view = View(OWNER, card(plan, "note"), Activity(answer=answer))
    html = classic(view, mode=Mode.partial)
    text = parse(html).text
    assert visible_length(html) <= 4096
    assert text.startswith("…")
    assert "Line 999 of the answer." in text and "Line 0 of" not in text
    assert text.index("Line 999") < text.index("40/42 complete") < text.index("▶️ now") < text.index("⛔ stuck")
    # the checklist keeps to its own line limit (default: maxLines), by the same priorities
    card_lines = text[text.index("40/42 complete") :].split("\n\n")[0].split("\n")
    assert len(card_lines) == 8
    assert sum(line.startswith("✅") for line in card_lines) == 5
    wider = parse(classic(view, mode=Mode.partial, checklistLines=20)).text
    assert sum(line.startswith("✅") for line in wider.split("\n")) == 17


@pytest.mark.parametrize("answer", ["~~s~~" * 3000, "# " + "x" * 12_000, "- " * 6000])
def test_a_long_answer_cut_mid_line_shows_its_tail_as_a_continuation(answer: str) -> None:
    # The tail worth parsing starts mid-line; read as a line start, "~~~~" would open a
    # code fence that hides the rest, "- " a list item.
    for settings in (RenderSettings(mode=Mode.partial, maxLines=1, maxLineChars=20), RenderSettings(mode=Mode.partial)):
        view = View(OWNER, None, Activity(answer=answer))
        payload = render_telegram(view, settings)
        assert payload is not None
        text = parse(payload["params"]["text"]).text
        assert text.startswith("…") and len(text) > 1000
        assert render_text(view, settings) is not None


def test_block_mode_renders_like_partial() -> None:
    view = View(OWNER, card(ALL), Activity(answer="Answer **so far**"))
    assert render_telegram(view, RenderSettings(mode=Mode.block)) == render_telegram(view, RenderSettings(mode=Mode.partial))


def test_long_links_do_not_break_the_byte_limit() -> None:
    link = "https://example.com/" + "a" * 2000
    note = " ".join(f"[{i}]({link}{i})" for i in range(3))
    answer = "\n\n".join(f"[l{i}]({link}{i})" for i in range(200))
    view = View(OWNER, card(steps(("s", "in_progress")), note), Activity(answer=answer))
    html = classic(view, mode=Mode.partial)
    assert len(html.encode()) <= 32_768 and visible_length(html) <= 4096
    parse(html)


def test_at_most_100_entities() -> None:
    note = " ".join(f"**b{i}**" for i in range(300))
    html = classic(View(OWNER, card(None, "x\n\n" + note)), mode=Mode.partial)
    assert len(parse(html).entities) <= 100
    assert "b299" in parse(html).text  # formatting dropped, never the text


# --- rich --------------------------------------------------------------------------------


def rich(view: View, **settings: Any) -> dict[str, Any]:
    payload = render_telegram(view, RenderSettings(rich=True, **settings))
    assert payload is not None and payload["method"] == "sendRichMessage"
    check_rich(payload["params"]["rich_message"])
    return payload["params"]["rich_message"]


def test_rich_checklist_is_one_list_of_checkboxes() -> None:
    message = rich(View(OWNER, card(ALL, "**Note** with [a link](https://e.com)")), maxLines=20)
    assert set(message) == {"blocks"}
    blocks = message["blocks"]
    assert [b["type"] for b in blocks].count("list") == 1
    assert {b["type"] for b in blocks} == {"paragraph", "list"}
    items = next(b for b in blocks if b["type"] == "list")["items"]
    assert [i["has_checkbox"] for i in items] == [True] * 5
    # only completed is checked; skipped is struck through instead
    assert [i["is_checked"] for i in items] == [True, False, False, False, False]
    assert [i["label"] for i in items] == ["1.", "2.", "3.", "4.", "5."]
    texts = [rich_text(i["blocks"][0]["text"]) for i in items]
    assert texts == ["done step", "▶️ active step", "waiting step", "⛔ stuck step", "⏭️ dropped step"]
    assert {"type": "strikethrough", "text": "dropped step"} in items[4]["blocks"][0]["text"]
    note = blocks[-1]["text"]
    assert {"type": "bold", "text": "Note"} in note
    assert {"type": "url", "text": "a link", "url": "https://e.com"} in note


def test_rich_selection_numbers_show_the_gaps() -> None:
    plan = steps(*[(f"step {i}", "completed") for i in range(20)], ("now", "in_progress"), *[(f"later {i}", "pending") for i in range(29)])
    plan[40]["status"] = "blocked"
    message = rich(View(OWNER, card(plan)))
    items = next(b for b in message["blocks"] if b["type"] == "list")["items"]
    assert [i["value"] for i in items] == [20, 21, 22, 23, 24, 25, 41]
    assert rich_text(message["blocks"][0]["text"]) == "main · ticket-4821 · 20/50 complete"


def test_rich_paused_and_empty() -> None:
    message = rich(View(OWNER, card(ALL), paused=True), maxLines=20)
    items = next(b for b in message["blocks"] if b["type"] == "list")["items"]
    texts = [rich_text(i["blocks"][0]["text"]) for i in items]
    assert texts[1:4] == ["⏸️ active step", "⏸️ waiting step", "⛔ stuck step"]
    assert render_telegram(View(OWNER), RenderSettings(rich=True)) is None


def test_rich_limits_with_a_huge_partial() -> None:
    answer = "\n\n".join(f"para {i} " + "w" * 300 for i in range(400))
    plan = steps(*[("😀" * 128, "pending") for _ in range(49)], ("now", "in_progress"))
    message = rich(View(OWNER, card(plan, "note " * 1500), Activity(answer=answer)), mode=Mode.partial)
    blocks = message["blocks"]
    count = sum(1 + (2 * len(b["items"]) if b["type"] == "list" else 0) for b in blocks)
    assert count <= 500


# --- final answer ----------------------------------------------------------------------


def test_final_answer_split_into_messages_without_loss() -> None:
    answer = "# Result\n\n" + "\n\n".join(f"Paragraph {i}: " + "word " * 150 for i in range(20)) + "\n\n```\n" + "code\n" * 2000 + "```"
    messages = render_final_answer_messages(answer)
    assert len(messages) > 1
    texts = []
    for message in messages:
        assert message["method"] == "sendMessage" and message["params"]["parse_mode"] == "HTML"
        html = message["params"]["text"]
        assert visible_length(html) <= 4096 and len(html.encode()) <= 32_768
        texts.append(parse(html).text.replace("\n", ""))
    assert "".join(texts) == "".join(line.text for line in markdown_lines(answer, "answer"))
    # a split inside the code block reopens it in the next message
    assert sum("<pre>" in m["params"]["text"] for m in messages) >= 2


def test_final_answer_short_and_empty() -> None:
    assert render_final_answer_messages("") == []
    assert render_final_answer_messages("  \n ") == []
    (one,) = render_final_answer_messages("Done: **all green**.")
    assert one["params"]["text"] == "Done: <b>all green</b>."


@pytest.mark.parametrize("text", ["x" * 10_000, "😀" * 5000])
def test_final_answer_splits_a_single_long_line(text: str) -> None:
    messages = render_final_answer_messages(text)
    assert len(messages) >= 2
    assert "".join(parse(m["params"]["text"]).text for m in messages) == text
    assert all(visible_length(m["params"]["text"]) <= 4096 for m in messages)


def test_a_lone_surrogate_that_reached_a_card_is_shown_as_a_replacement_character() -> None:
    # Inputs refuse lone surrogates; a card stored before that rule (or built in code)
    # may still hold one. The renderer must still produce text Telegram can take.
    stored = card(steps(("Fix", "in_progress"), ("Ship", "pending")))
    plan = [Step.model_construct(step="Fix a\ud800b", status=Status.in_progress), *(stored.plan or [])[1:]]
    view = View(OWNER, stored.model_copy(update={"plan": plan}), Activity(headline="now \udc80 this"))
    for payload in (render_telegram(view, RenderSettings()), render_telegram(view, RenderSettings(rich=True))):
        assert payload is not None
        text = str(payload["params"])
        text.encode("utf-8")  # no lone surrogate left
        assert "Fix a\ufffdb" in text and "now \ufffd this" in text
