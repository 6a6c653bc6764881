"""One priority order for what a draft shows, at every limit from one line up.

A table of cards (0–2 blocked steps, an active step or none, 1–50 steps, with and
without activity) × maxLines 1–10 checks which facts are present — not exact
strings — and Hypothesis checks the same rules over any card and any limits.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, CardInput, Status
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render import render_rich, render_telegram, render_text
from progresscast.render.draft import compose
from progresscast.render.fit import NEXT_STEPS
from progresscast.render.ir import Line, plain
from progresscast.render.templates import theme
from progresscast.testing.telegram_html import parse, utf16_len
from progresscast.testing.telegram_rich import rich_text
from test_render_properties import PROPS, views

OWNER = Owner("main", "ticket-4821")
LABEL = "main · ticket-4821"
TEXT = theme("text")


def make_card(plan: list[dict[str, Any]] | None, markdown: str | None = None) -> Card:
    parsed = CardInput.parse({k: v for k, v in (("plan", plan), ("markdown", markdown)) if v is not None})
    return Card(
        sessionKey=OWNER.session_key, agentId=OWNER.agent_id, displayKey=OWNER.display_key, revision=1,
        plan=parsed.plan, markdown=parsed.markdown, updatedAt="2026-06-01T00:00:00Z",
    )


def draft(view: View, **settings: Any) -> list[Line]:
    lines = compose(view, RenderSettings(**settings), TEXT, budget=4096)
    assert lines is not None
    return lines


# --- the fact table ------------------------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    size: int
    blocked: tuple[int, ...]
    active: int | None

    def steps(self) -> list[dict[str, Any]]:
        out = []
        for i in range(self.size):
            if i in self.blocked:
                status = "blocked"
            elif i == self.active:
                status = "in_progress"
            elif i < (self.size // 2 if self.active is None else self.active):
                status = "completed"
            else:
                status = "pending"
            out.append({"step": f"Task {chr(65 + i % 26)}{i}", "status": status})
        return out


PLANS = [
    Plan(1, (), 0),
    Plan(1, (), None),
    Plan(3, (1,), None),
    Plan(4, (1,), 2),
    Plan(7, (), 3),
    Plan(7, (0, 6), 3),
    Plan(50, (), 19),
    Plan(50, (29,), 19),
    Plan(50, (5, 40), None),
    Plan(50, (30, 31), 49),
]
ACTIVITY = Activity(headline="Running the suite", tools=("run: pytest -q", "read: setup.cfg"))


@pytest.mark.parametrize("activity", [Activity(), ACTIVITY], ids=["quiet", "activity"])
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: f"{p.size}steps-b{len(p.blocked)}-a{p.active}")
@pytest.mark.parametrize("max_lines", range(1, 11))
def test_which_facts_are_present(plan: Plan, activity: Activity, max_lines: int) -> None:
    steps = plan.steps()
    view = View(OWNER, make_card(steps, "A note line.\n\nAnother one."), activity, RunState.active)
    lines = draft(view, maxLines=max_lines)
    texts = [line.text for line in lines]
    n, done = plan.size, sum(s["status"] == "completed" for s in steps)
    shown = [line.index for line in lines if line.kind == "step"]
    assert len(lines) <= max_lines
    assert shown == sorted(set(shown)), "steps are shown once each, in plan order"

    # (1) what needs a person: every blocked step while they fit (one line goes to a
    # summary when they do not), else the first one and a count of the rest
    blocked = list(plan.blocked)
    if blocked:
        assert blocked[0] in shown
        if len(blocked) <= max_lines:
            assert set(blocked) <= set(shown)
        elif max_lines == 1:
            assert texts[0].endswith(f"+{len(blocked) - 1} blocked")
    # (2) the active step, right after them
    if plan.active is not None and max_lines > len(blocked):
        assert plan.active in shown
    # (3) k/N exactly once, on a line of its own or joined to the first line
    count = f"{done}/{n}"
    assert sum(line.count(count) for line in texts) == 1
    has_header = any(line.kind == "header" for line in lines)
    ahead = len(blocked) + (plan.active is not None)
    assert has_header == (max_lines > ahead)
    if not has_header:
        assert count in texts[0]
    # (5) the label shares the count's line
    assert (LABEL in "\n".join(texts)) == has_header
    if has_header:
        assert texts[0] == f"{LABEL} · {count} complete"
    # (6)–(8): lower priorities only once every higher one is in
    pending = [i for i, s in enumerate(steps) if s["status"] == "pending"]
    if plan.active is not None:
        pending = [i for i in pending if i > plan.active] + [i for i in pending if i < plan.active]
    nexts = pending[:NEXT_STEPS]
    activity_shown = any(line.kind in ("headline", "tool") for line in lines)
    if activity_shown:
        assert set(nexts) <= set(shown) and has_header
    done_shown = [i for i in shown if steps[i]["status"] == "completed"]
    if done_shown:
        assert set(nexts) <= set(shown)
    if activity.headline and max_lines - len(blocked) - (plan.active is not None) - 1 - len(nexts) - (done > 0) >= 1:
        assert activity_shown
    # a summary line only when blocked steps were left out
    summary = [t for line, t in zip(lines, texts, strict=True) if line.kind == "summary"]
    assert bool(summary) == (len(blocked) > max_lines and max_lines >= 2)
    if plan.size <= max_lines - 1 - bool(activity.headline) - len(activity.tools):
        assert len(shown) == plan.size  # a plan that fits is shown whole


OPENCLAW = [
    # (plan, maxLines, the lines)
    (
        [("One", "completed"), ("Two", "completed"), ("Three", "in_progress"), ("Four", "pending")],
        3,
        ["main · ticket-4821 · 2/4 complete", "[>] Three", "[ ] Four"],
    ),
    (
        [("Check", "completed"), ("Confirm access", "blocked"), ("Repair", "in_progress"), ("Verify", "pending")],
        3,
        ["main · ticket-4821 · 1/4 complete", "[!] Confirm access", "[>] Repair"],
    ),
    ([("Check", "completed"), ("Confirm access", "blocked"), ("Repair", "in_progress"), ("Verify", "pending")], 1, ["[!] Confirm access · 1/4"]),
    ([("Check", "completed"), ("Repair", "in_progress"), ("Verify", "pending")], 1, ["[>] Repair · 1/3"]),
    (
        [("A", "completed"), ("B", "blocked"), ("C", "pending")],
        5,
        ["main · ticket-4821 · 1/3 complete", "[x] A", "[!] B", "[ ] C", "A note line. Another one."],
    ),
]


@pytest.mark.parametrize("plan, max_lines, expected", OPENCLAW)
def test_the_cases_side_by_side_with_openclaw(plan: list[tuple[str, str]], max_lines: int, expected: list[str]) -> None:
    view = View(OWNER, make_card([{"step": s, "status": st} for s, st in plan], "A note line.\n\nAnother one."))
    text = render_text(view, RenderSettings(maxLines=max_lines))
    assert text is not None and text.split("\n") == expected


def test_fifty_steps_one_blocked_defaults_say_step_30_once() -> None:
    steps = Plan(50, (29,), 19).steps()
    view = View(OWNER, make_card(steps, "A note."), ACTIVITY, RunState.active)
    text = render_text(view, RenderSettings())
    assert text is not None
    lines = text.split("\n")
    assert len(lines) == 8 and sum("Task D29" in line for line in lines) == 1
    assert lines[0] == f"{LABEL} · 19/50 complete"


def test_partial_and_block_checklists_keep_to_their_own_limit() -> None:
    steps = Plan(50, (29,), 19).steps()
    answer = "The **answer** so far."
    view = View(OWNER, make_card(steps), Activity(answer=answer), RunState.active)
    for mode in (Mode.partial, Mode.block):
        for limit in (1, 3, 8):
            lines = draft(view, mode=mode, checklistLines=limit)
            assert lines[0].text == "The answer so far."  # the answer stays in view, on top
            card_lines = [line for line in lines if line.kind not in ("answer", "blank")]
            assert len(card_lines) == limit
            assert any(line.index == 29 for line in card_lines)  # the blocked step first
        # unset: maxLines
        assert len([line for line in draft(view, mode=mode, maxLines=5) if line.kind not in ("answer", "blank")]) == 5


# --- raw HTML in a note, in every channel -------------------------------------------------

OPENCLAW_NOTE = (
    '<progress aria-label="Tests · 3/7" value="3" max="7"></progress>\n\n'
    "**Checking** [results](https://example.com).<br>Next step.<script>ignored()</script>"
)
HIDDEN = ["script", "style", "iframe", "object", "template", "noscript", "textarea"]


def channel_texts(view: View, **settings: Any) -> dict[str, str]:
    s = RenderSettings(**settings)
    classic = render_telegram(view, s)
    rich = render_rich(view, s)
    text = render_text(view, s)
    assert classic is not None and rich is not None and text is not None
    rich_lines = []
    for block in rich["params"]["rich_message"]["blocks"]:
        if block["type"] == "paragraph":
            rich_lines.append(rich_text(block["text"]))
        else:
            rich_lines += [rich_text(item["blocks"][0]["text"]) for item in block["items"]]
    return {"telegram": parse(classic["params"]["text"]).text, "rich": "\n".join(rich_lines), "text": text}


@pytest.mark.parametrize("mode", [Mode.progress, Mode.partial])
def test_the_channel_summary_case_reads_the_same_everywhere(mode: Mode) -> None:
    view = View(OWNER, make_card(None, OPENCLAW_NOTE), Activity(answer="Answer."))
    for channel, text in channel_texts(view, mode=mode, maxLines=8).items():
        lines = text.split("\n")
        assert "▰▰▰▱▱▱▱ Tests · 3/7" in lines, channel
        assert "Checking results." in lines and "Next step." in lines, channel
        assert "ignored" not in text and "<" not in text, channel
    # on one line, the note's lines join with one space
    one = render_text(view, RenderSettings(maxLines=1))
    assert one == "Checking results. Next step."


@pytest.mark.parametrize("tag", HIDDEN)
@pytest.mark.parametrize("form", ["inline", "block"])
def test_script_like_text_never_shows_and_br_breaks_lines(tag: str, form: str) -> None:
    hidden = f"<{tag}>secret()</{tag}>" if form == "inline" else f"<{tag}>\n\nsecret()\n\n</{tag}>"
    note = f"First.<br>Second.{hidden} Third.\n\n{hidden}\n\nLast."
    view = View(OWNER, make_card([{"step": "Do", "status": "in_progress"}], note), Activity(answer=note))
    for mode in (Mode.progress, Mode.partial):
        for channel, text in channel_texts(view, mode=mode, maxLines=20).items():
            assert "secret" not in text, (channel, mode, text)
            assert "First." in text.split("\n"), (channel, mode, text)
            assert "Last." in text.split("\n"), (channel, mode, text)


def test_the_notes_bar_as_text_and_what_is_dropped() -> None:
    def bar_lines(note: str) -> list[str]:
        view = View(OWNER, make_card([{"step": "Do", "status": "in_progress"}], note))
        return [t for t in channel_texts(view, maxLines=8)["text"].split("\n") if "▰" in t or "▱" in t]

    assert bar_lines('<progress aria-label="Tests · 3/7" value="3" max="7"></progress>') == ["▰▰▰▱▱▱▱ Tests · 3/7"]
    assert bar_lines('<progress value="42" max="100" id="x" onclick="y()">') == ["▰▰▰▰▱▱▱▱▱▱ 42/100"]
    assert bar_lines('<progress aria-label="Done" value="5" max="5"></progress>') == ["▰▰▰▰▰ Done"]
    for bad in ('<progress value="8" max="7">', '<progress value="three" max="7">', '<progress max="7">', "Text <progress value=1 max=2>"):
        assert bar_lines(bad) == [], bad


def test_the_bar_takes_its_place_in_the_priorities() -> None:
    steps = [{"step": "Done", "status": "completed"}, {"step": "Now", "status": "in_progress"}, {"step": "Next", "status": "pending"}]
    note = '<progress aria-label="Upload" value="1" max="4"></progress>\n\nSome note.'
    view = View(OWNER, make_card(steps, note), ACTIVITY)
    texts = [line.text for line in draft(view, maxLines=3)]
    assert texts == [f"{LABEL} · 1/3 complete", "[>] Now", "▰▱▱▱ Upload"]  # above the label's own line and the rest
    only_bar = View(OWNER, make_card(None, '<progress aria-label="Upload" value="1" max="4"></progress>'))
    assert render_text(only_bar, RenderSettings(maxLines=1)) == "▰▱▱▱ Upload"


# --- properties ------------------------------------------------------------------------------

limits = st.builds(
    RenderSettings,
    mode=st.sampled_from([Mode.progress, Mode.partial, Mode.block]),
    maxLines=st.one_of(st.integers(1, 12), st.integers(1, 50)),
    maxLineChars=st.one_of(st.sampled_from([20, 21, 40, 120]), st.integers(20, 4096)),
    checklistLines=st.one_of(st.none(), st.integers(1, 12)),
)
SUMMARY = re.compile(r"… (\d+) more(?:: (.*))?$")
KINDS = {"blocked": "blocked", "in progress": "active", "done": "done", "pending": "pending"}


def card_part(lines: Sequence[Line], mode: Mode) -> list[Line]:
    """The lines that count against the limit: all of a progress draft, the card's
    lines of a partial/block one (not the answer, nor the line heading it once the run ended)."""
    if mode is Mode.progress:
        return list(lines)
    return [line for line in lines if line.kind not in ("answer", "blank", "end")]


@PROPS
@given(views(), limits)
def test_priority_properties(view: View, s: RenderSettings) -> None:
    lines = compose(view, s, TEXT, budget=4096)
    if lines is None:
        return
    plan = (view.card.plan or ()) if view.card else ()
    rows = s.maxLines if s.mode is Mode.progress else (s.checklistLines or s.maxLines)
    part = card_part(lines, s.mode)
    structural = [line for line in part if line.kind != "note"]
    # never more than the limit, never a line longer than maxLineChars
    assert len(structural) <= rows
    if s.mode is Mode.progress:
        assert len(lines) <= s.maxLines
        for line in lines:
            assert utf16_len(line.text) <= s.maxLineChars, line.text
    shown = [line.index for line in lines if line.kind == "step"]
    # no step twice, in plan order — and no step's text on another line of the card's own
    assert shown == sorted(set(shown))
    own = [line.text for line in part if line.kind in ("attention", "step", "summary")]
    for step in plan:
        text = plain(step.step)
        # (a text that another step's own text or note also holds may rightly show there)
        others = [plain(o.step) + "\n" + plain(o.note or "") for o in plan if o is not step]
        if len(text) >= 8 and not any(text in other for other in others):
            assert sum(text in line for line in own) <= 1, text
    blocked = [i for i, step in enumerate(plan) if step.status is Status.blocked]
    if blocked:
        # a blocked step is always visible: its row, with its mark and the start of its text
        assert blocked[0] in shown
        row = next(line for line in lines if line.kind == "step" and line.index == blocked[0])
        icon = TEXT.icons["blocked"]  # paused or not: it waits for a person
        assert row.text.startswith(icon + " ")
        first = plain(plan[blocked[0]].step)
        assert not first or row.text[len(icon) + 1 :][:1] in (first[:1], "…")
    active = next((i for i, step in enumerate(plan) if step.status is Status.in_progress), None)
    if active is not None and not blocked and view.run is not RunState.failed:
        assert active in shown
    # the numbers of a summary line add up with the shown steps to the plan
    for line in lines:
        if line.kind != "summary":
            continue
        match = SUMMARY.match(line.text)
        assert match, line.text
        assert int(match.group(1)) + len(shown) == len(plan)
        hidden = {"blocked": 0, "active": 0, "done": 0, "pending": 0}
        for i, step in enumerate(plan):
            if i in shown:
                continue
            kind = {"blocked": "blocked", "in_progress": "active", "pending": "pending"}.get(step.status.value, "done")
            hidden[kind] += 1
        assert hidden["blocked"] > 0  # only then is there a summary line
        for part_text in (match.group(2) or "").split(", "):
            if part_text:
                number, kind = part_text.split(" ", 1)
                assert int(number) == hidden[KINDS[kind]], (line.text, hidden)
    # the text the channels show matches the lines
    text = render_text(view, s)
    assert text is not None and text.split("\n") == [line.text for line in lines]
