"""Golden files: what each renderer shows for each state, reviewed by eye once.

Regenerate after an intended change with `UPDATE_GOLDEN=1 .venv/bin/python -m pytest
tests/test_render_golden.py`, then read the diff. Files, per scenario under
tests/golden/: `<name>.telegram.html` (the `text` of the sendMessage payload, as
Telegram gets it), `<name>.rich.json`, `<name>.text.txt`, `<name>.web.html`; a
renderer that shows nothing writes `null`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import pytest

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, CardInput
from progresscast.model.owners import Owner
from progresscast.model.timing import StepTime, Usage
from progresscast.model.view import RunState, View
from progresscast.render import render_final_answer_messages, render_telegram, render_text, render_web
from progresscast.testing.telegram_html import parse

GOLDEN = Path(__file__).parent / "golden"
UPDATE = os.environ.get("UPDATE_GOLDEN") == "1"
OWNER = Owner("main", "ticket-4821")


def card(plan: list[tuple[str, str] | tuple[str, str, str]] | None = None, markdown: str | None = None) -> Card:
    data: dict[str, Any] = {}
    if plan is not None:
        data["plan"] = [dict(zip(("step", "status", "note"), p, strict=False)) for p in plan]
    if markdown is not None:
        data["markdown"] = markdown
    parsed = CardInput.parse(data)
    return Card(
        sessionKey=OWNER.session_key,
        agentId=OWNER.agent_id,
        displayKey=OWNER.display_key,
        revision=4,
        plan=parsed.plan,
        markdown=parsed.markdown,
        updatedAt="2026-06-01T12:00:00Z",
    )


@dataclass
class Case:
    view: View
    settings: RenderSettings = field(default_factory=RenderSettings)


FOUR = [
    ("Reproduce the timeout", "completed", "3 of 3 runs > 30 s"),
    ("Find the slow query", "completed", "missing index on region_id"),
    ("Fix and add a regression test", "in_progress"),
    ("Open a pull request", "pending"),
]
ALL_STATES = [
    ("Read the ticket", "completed"),
    ("Skip the flaky benchmark", "skipped", "not needed for this fix"),
    ("Write the migration", "in_progress"),
    ("Get DBA approval", "blocked", "waiting for the on-call DBA"),
    ("Deploy to staging", "pending"),
    ("Open a pull request", "pending"),
]
NOTE = (
    "## Findings\n\nCheckout **times out** for EU users: `orders_by_region` scans the whole table.\n\n"
    "- [runbook](https://example.com/runbook)\n- [bad link](javascript:alert(1))\n\n"
    "```sql\nCREATE INDEX CONCURRENTLY ON orders (region_id);\n```\n\n"
    "<script>alert('x')</script>\n\n> quoted *reply* with `code`\n"
)
FIFTY = [(f"Step {i + 1}: migrate table t{i + 1}", "completed" if i < 19 else ("in_progress" if i == 19 else "pending")) for i in range(50)]
FIFTY[30] = ("Step 31: migrate table t31", "blocked", "lock timeout")
FIFTY[5] = ("Step 6: migrate table t6", "skipped")
BAR_NOTE = (
    '<progress aria-label="Tests · 3/7" value="3" max="7"></progress>\n\n'
    "**Checking** [results](https://example.com).<br>Next step.<script>ignored()</script>"
)
ACTIVE = Activity(headline="Running the EU checkout tests", tools=("run: pytest tests/checkout -k eu", "read: src/checkout/queries.py"))
ANSWER = Activity(
    answer="The timeout comes from a **missing index**.\n\n" + "Details follow. " * 40 + "\n\n```py\nslow_query()\n```"
)

# Times on the card, fixed: the run started at T0, the reader's clock is T0 + 7 min 20 s
# (`View.at` puts it on the run's last whole minute: 7 min).
T0 = 1_780_000_000.0
STEP_TIMES = (StepTime(T0, T0 + 42), StepTime(T0 + 42, T0 + 185), StepTime(T0 + 185), None)
TIMED = View(
    OWNER, card(FOUR, "Ticket **#4821**: reproduced."), ACTIVE, RunState.active, started_at=T0, step_times=STEP_TIMES,
).at(T0 + 440)
TIMED_ENDED = View(
    OWNER, card([(s, "completed") for s, *_ in FOUR]), ANSWER, RunState.completed, paused=True, started_at=T0,
    ended_at=T0 + 250, step_times=(*STEP_TIMES[:2], StepTime(T0 + 185, T0 + 230), StepTime(T0 + 230, T0 + 249)),
    usage=Usage(12_000, 3_400, 0.1234),
).at(T0 + 9_999)

CASES: dict[str, Case] = {
    "timed": Case(TIMED),
    "timed_tight": Case(TIMED, RenderSettings(maxLines=2, maxLineChars=40)),
    "timed_ended": Case(TIMED_ENDED, RenderSettings(mode=Mode.partial)),
    "plan": Case(View(OWNER, card(FOUR, "Ticket **#4821**: reproduced."), ACTIVE, RunState.active)),
    "all_states": Case(View(OWNER, card(ALL_STATES, NOTE), Activity(), RunState.active), RenderSettings(maxLines=12)),
    "paused": Case(View(OWNER, card(ALL_STATES, NOTE), Activity(), RunState.completed, paused=True), RenderSettings(maxLines=12)),
    "failed": Case(View(OWNER, card(ALL_STATES), Activity(headline="Tests failed"), RunState.failed, paused=True)),
    "fifty_steps": Case(View(OWNER, card(FIFTY, NOTE), ACTIVE, RunState.active)),
    "fifty_steps_tight": Case(View(OWNER, card(FIFTY), ACTIVE, RunState.active), RenderSettings(maxLines=3, maxLineChars=40)),
    "note_only": Case(View(OWNER, card(None, NOTE), Activity(), RunState.active), RenderSettings(maxLines=20)),
    "escaping": Case(
        View(
            OWNER,
            card(
                [("<b>x</b> & <script>alert(1)</script>", "in_progress", "a < b && c > d"), ("שלום עולם — مرحبا بالعالم", "pending")],
                "<img src=x onerror=alert(1)> **bold** &amp; [x](javascript:alert(1)) <b>raw</b>",
            ),
            Activity(headline="<i>not italic</i>"),
            RunState.active,
        ),
        RenderSettings(label="<b>Ops</b> & friends"),
    ),
    "long_lines": Case(
        View(OWNER, card([("😀" * 128, "in_progress", "n" * 280), ("x" * 512, "pending")]), Activity(), RunState.active),
        RenderSettings(maxLineChars=40),
    ),
    "cleared_activity": Case(View(OWNER, None, ACTIVE, RunState.active)),
    "empty": Case(View(OWNER, None, Activity(), RunState.none)),
    "partial": Case(View(OWNER, card(FOUR, "Ticket **#4821**."), ANSWER, RunState.active), RenderSettings(mode=Mode.partial)),
    "partial_no_card": Case(View(OWNER, None, ANSWER, RunState.active), RenderSettings(mode=Mode.partial)),
    "block_fifty": Case(View(OWNER, card(FIFTY, NOTE), ANSWER, RunState.active), RenderSettings(mode=Mode.block)),
    "off": Case(View(OWNER, card(FOUR), ACTIVE, RunState.active), RenderSettings(mode=Mode.off)),
    "one_line": Case(View(OWNER, card(ALL_STATES, NOTE), ACTIVE, RunState.active), RenderSettings(maxLines=1)),
    "two_lines": Case(View(OWNER, card(ALL_STATES, NOTE), ACTIVE, RunState.failed), RenderSettings(maxLines=2)),
    "note_bar": Case(View(OWNER, card(FOUR, BAR_NOTE), ACTIVE, RunState.active)),
    "partial_bounded": Case(
        View(OWNER, card(FIFTY, BAR_NOTE), ANSWER, RunState.active), RenderSettings(mode=Mode.partial, checklistLines=4)
    ),
}


def outputs(case: Case) -> dict[str, str]:
    classic = render_telegram(case.view, case.settings)
    rich = render_telegram(case.view, case.settings.model_copy(update={"rich": True}))
    text = render_text(case.view, case.settings)
    return {
        "telegram.html": "null\n" if classic is None else classic["params"]["text"] + "\n",
        "rich.json": json.dumps(rich, ensure_ascii=False, indent=2) + "\n",
        "text.txt": "null\n" if text is None else text + "\n",
        "web.html": render_web(case.view, case.settings) + "\n",
    }


def check(name: str, suffix: str, actual: str) -> None:
    path = GOLDEN / f"{name}.{suffix}"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
        return
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDEN=1 and review it"
    assert actual == path.read_text(encoding="utf-8"), f"{path.name} changed (UPDATE_GOLDEN=1 to accept, then review)"


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    for suffix, actual in outputs(CASES[name]).items():
        check(name, suffix, actual)


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_classic_is_valid_telegram_html(name: str) -> None:
    payload = render_telegram(CASES[name].view, CASES[name].settings)
    if payload is None:
        assert name in ("empty", "off")
        return
    assert payload["method"] == "sendMessage"
    assert payload["params"]["parse_mode"] == "HTML"
    assert payload["params"]["link_preview_options"] == {"is_disabled": True}
    assert set(payload["params"]) == {"text", "parse_mode", "link_preview_options"}
    parse(payload["params"]["text"])


def test_golden_final_answer() -> None:
    answer = "# Done\n\nThe fix is in **#4822**.\n\n" + "\n\n".join(f"Paragraph {i}: " + "words " * 120 for i in range(8))
    messages = render_final_answer_messages(answer)
    check("final_answer", "telegram.json", json.dumps(messages, ensure_ascii=False, indent=2) + "\n")


def test_golden_timed_end_lines() -> None:
    """How a run ended, with how long it took and what it used: the cost when known,
    else the tokens; every channel's wording."""
    from progresscast.render.ending import end_line
    from progresscast.render.templates import theme

    tokens_only = replace(TIMED_ENDED, usage=Usage(12_000, 3_400))
    lines = [
        f"{channel}: {end_line(view, theme(channel))}"
        for channel in ("telegram", "slack", "discord", "matrix", "text")
        for view in (TIMED_ENDED, tokens_only)
    ]
    check("timed_end_lines", "txt", "\n".join(lines) + "\n")
