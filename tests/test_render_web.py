"""The web card: progress element, checklist with aria-labels per state, sanitised note."""

from __future__ import annotations

import re

from progresscast.activity import Activity
from progresscast.card import Card, CardInput
from progresscast.config import RenderSettings
from progresscast.owners import Owner
from progresscast.render import render_web
from progresscast.view import RunState, View

OWNER = Owner("main", "s1")


def view(plan: list[tuple[str, str]] | None, markdown: str | None = None, **kw: object) -> View:
    data: dict[str, object] = {}
    if plan is not None:
        data["plan"] = [{"step": s, "status": st} for s, st in plan]
    if markdown is not None:
        data["markdown"] = markdown
    parsed = CardInput.parse(data)
    card = Card(
        sessionKey="s1", agentId="main", displayKey=OWNER.display_key, revision=1,
        plan=parsed.plan, markdown=parsed.markdown, updatedAt="2026-06-01T00:00:00Z",
    )
    return View(OWNER, card, **kw)  # type: ignore[arg-type]


PLAN = [("a", "completed"), ("b", "skipped"), ("c", "in_progress"), ("d", "blocked"), ("e", "pending")]


def labels(html: str) -> list[str]:
    return re.findall(r'<li class="pc-step pc-step--[a-z_]+" aria-label="([^"]*)"', html)


def test_leading_progress_element() -> None:
    html = render_web(view(PLAN), RenderSettings())
    assert html.startswith('<progress aria-label="Steps · 2/5" value="2" max="5">')


def test_each_state_has_its_own_label_and_class() -> None:
    html = render_web(view(PLAN), RenderSettings())
    assert labels(html) == ["a, completed", "b, skipped", "c, in progress", "d, blocked", "e, pending"]
    classes = re.findall(r"pc-step--([a-z_]+)", html)
    assert classes == ["completed", "skipped", "in_progress", "blocked", "pending"]
    assert html.count('aria-current="step"') == 1


def test_paused_steps_read_paused() -> None:
    html = render_web(view(PLAN, paused=True), RenderSettings())
    assert labels(html) == ["a, completed", "b, skipped", "c, paused", "d, paused", "e, paused"]
    assert "pc-step--paused" in html


def test_escaping_and_sanitised_note() -> None:
    html = render_web(
        view([("<script>x</script> & co", "pending")], "**ok** <script>alert(1)</script> [j](javascript:x) <img src=x>"),
        RenderSettings(),
    )
    assert "&lt;script&gt;x&lt;/script&gt; &amp; co" in html
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert '<div class="pc-note" dir="auto"><p><strong>ok</strong>' in html


def test_note_only_card_has_no_progress() -> None:
    html = render_web(view(None, "just a note"), RenderSettings())
    assert "<progress" not in html and "<ol" not in html
    assert html.startswith('<div class="pc-note"')


def test_empty_view_and_activity() -> None:
    assert render_web(View(OWNER), RenderSettings()) == '<p class="pc-empty">No progress card</p>'
    html = render_web(View(OWNER, None, Activity(headline="<b>busy</b>", tools=("ls",)), RunState.failed), RenderSettings())
    assert "No progress card" in html and "&lt;b&gt;busy&lt;/b&gt;" in html and "<code>ls</code>" in html
    assert 'role="alert"' in html and "Run failed" in html


def test_a_note_of_raw_html_only_reads_as_no_card() -> None:
    assert render_web(view(None, "<div>\nhidden\n</div>"), RenderSettings()) == '<p class="pc-empty">No progress card</p>'
