"""The web card: progress element, checklist with aria-labels per state, sanitised note."""

from __future__ import annotations

import re

from progresscast.config.base import RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render import render_web

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


def test_leading_progress_element_with_visible_count() -> None:
    html = render_web(view(PLAN), RenderSettings())
    assert html.startswith('<div class="pc-progress"><progress aria-label="Steps · 2/5" value="2" max="5">')
    assert '<span class="pc-progress__text" aria-hidden="true">2 of 5 done</span>' in html


def test_what_needs_a_person_comes_before_the_checklist() -> None:
    html = render_web(view(PLAN, "note", run=RunState.failed), RenderSettings())
    assert html.index("Run failed") < html.index("Blocked: d") < html.index('<ol class="pc-steps"') < html.index("pc-note")


def test_state_marks_without_emoji_and_state_in_words() -> None:
    html = render_web(view(PLAN), RenderSettings())
    marks = re.findall(r'<span class="pc-mark pc-mark--([a-z_]+)" aria-hidden="true"></span>', html)
    assert marks == ["blocked", "completed", "skipped", "in_progress", "blocked", "pending"]  # the alert, then the steps
    assert re.findall(r'<span class="pc-sr">, ([a-z ]+)</span>', html) == ["completed", "skipped", "in progress", "blocked", "pending"]
    assert not re.search("[\U0001F000-\U0001FFFF\u2600-\u27BF\u2B00-\u2BFF\uFE0F]", html)


def test_each_state_has_its_own_label_and_class() -> None:
    html = render_web(view(PLAN), RenderSettings())
    assert labels(html) == ["a, completed", "b, skipped", "c, in progress", "d, blocked", "e, pending"]
    classes = re.findall(r"pc-step--([a-z_]+)", html)
    assert classes == ["completed", "skipped", "in_progress", "blocked", "pending"]
    assert html.count('aria-current="step"') == 1


def test_paused_steps_read_paused_but_blocked_stays_blocked_under_its_banner() -> None:
    html = render_web(view(PLAN, paused=True, run=RunState.completed), RenderSettings())
    assert labels(html) == ["a, completed", "b, skipped", "c, paused", "d, blocked", "e, paused"]
    assert "pc-step--paused" in html and "pc-step--blocked" in html
    assert '<p class="pc-attention pc-attention--blocked" role="alert">' in html and "Blocked: d" in html


def test_the_run_state_and_its_final_answer() -> None:
    ended = view(PLAN, run=RunState.completed, activity=Activity(answer="Fixed **it** <script>x</script>"))
    html = render_web(ended, RenderSettings())
    assert '<p class="pc-run pc-run--completed">Run completed</p>' in html
    assert '<section class="pc-answer" aria-label="Final answer"' in html
    assert "<strong>it</strong>" in html and "<script" not in html
    assert html.index("pc-run") < html.index("pc-answer")
    working = render_web(view(PLAN, run=RunState.active, activity=Activity(answer="so far")), RenderSettings())
    assert "Working" in working and "pc-answer" not in working  # the answer is final once the run ends
    canceled = render_web(view(PLAN, run=RunState.canceled), RenderSettings())
    assert canceled.count("Run canceled") == 1
    failed = render_web(view(PLAN, run=RunState.failed), RenderSettings())
    assert failed.count("Run failed") == 1  # said once, as the alert
    assert "pc-run" not in render_web(view(PLAN), RenderSettings())  # a session without runs


def test_escaping_and_sanitised_note() -> None:
    html = render_web(
        view([("<script>x</script> & co", "pending")], "**ok** <script>alert(1)</script> [j](javascript:x) <img src=x>"),
        RenderSettings(),
    )
    assert "&lt;script&gt;x&lt;/script&gt; &amp; co" in html
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html
    assert '<div class="pc-note" dir="auto"><p><strong>ok</strong>' in html


def test_only_absolute_http_and_mailto_links_are_links() -> None:
    # A relative link on the card is a one-click request to the gateway itself (a login
    # link with an attacker's token): it is shown as its text, not as a link.
    note = (
        "[login](/?token=ATTACKER) [up](../s2) [proto](//evil.example/x) [bare](evil.example) "
        "[q](?token=X) [frag](#top) [ok](https://example.org/a?b=1) [mail](mailto:ops@example.org) "
        "<https://example.org/auto>"
    )
    html = render_web(view(None, note), RenderSettings())
    ended = view(None, None, run=RunState.completed, activity=Activity(answer="See [here](/?token=ATTACKER)."))
    answer = render_web(ended, RenderSettings())
    for fragment in (html, answer):
        hrefs = re.findall(r'href="([^"]*)"', fragment)
        assert all(h.startswith(("https://", "http://", "mailto:")) for h in hrefs), hrefs
    assert re.findall(r'href="([^"]*)"', html) == [
        "https://example.org/a?b=1", "mailto:ops@example.org", "https://example.org/auto"
    ]
    assert "login up proto bare q frag" in html and "See here." in answer


def test_note_only_card_has_no_progress() -> None:
    html = render_web(view(None, "just a note"), RenderSettings())
    assert "<progress" not in html and "<ol" not in html
    assert html.startswith('<div class="pc-note"')


def test_the_notes_own_bar_is_pinned_above_the_note_with_its_label() -> None:
    note = '<progress aria-label="Tests · 3/7" value="3" max="7" onclick="x()" style="width:0"></progress>\n\nRunning **them**.'
    html = render_web(view(PLAN, note), RenderSettings())
    assert (
        '<div class="pc-note-bar"><span class="pc-note-bar__label" dir="auto">Tests · 3/7</span> '
        '<progress aria-label="Tests · 3/7" value="3" max="7">3/7</progress></div>\n'
        '<div class="pc-note" dir="auto"><p>Running <strong>them</strong>.</p></div>'
    ) in html
    assert "onclick" not in html and "style" not in html and "<p></p>" not in html


def test_a_bar_that_does_not_check_out_is_dropped() -> None:
    for bar in ('<progress value="8" max="7">', '<progress value="x" max="7">', '<progress value="1">', '<progress value="1" max="0">'):
        html = render_web(view(None, bar + "\n\nText."), RenderSettings())
        assert "progress" not in html and html == '<div class="pc-note" dir="auto"><p>Text.</p></div>'
    # not first in the note: raw HTML like any other
    html = render_web(view(None, 'Text.\n\n<progress aria-label="x" value="1" max="2"></progress>'), RenderSettings())
    assert "<progress" not in html


def test_br_breaks_the_line_and_script_like_text_never_shows() -> None:
    for tag in ("script", "style", "iframe", "object", "template", "noscript", "textarea"):
        for hidden in (f"<{tag}>secret()</{tag}>", f"<{tag}>\n\nsecret()\n\n</{tag}>"):
            html = render_web(view(None, f"First.<br>Second.{hidden} Third.\n\n{hidden}\n\nLast."), RenderSettings())
            assert "secret" not in html, (tag, html)
            assert "First.<br>\nSecond." in html and "<p>Last.</p>" in html and "<p></p>" not in html


def test_a_note_that_is_only_a_bar() -> None:
    html = render_web(view(None, '<progress aria-label="Upload" value="0.5" max="1"></progress>'), RenderSettings())
    assert html == (
        '<div class="pc-note-bar"><span class="pc-note-bar__label" dir="auto">Upload</span> '
        '<progress aria-label="Upload" value="0.5" max="1">0.5/1</progress></div>'
    )


def test_empty_view_and_activity() -> None:
    assert render_web(View(OWNER), RenderSettings()) == '<p class="pc-empty">No progress card</p>'
    html = render_web(View(OWNER, None, Activity(headline="<b>busy</b>", tools=("ls",)), RunState.failed), RenderSettings())
    assert "No progress card" in html and "&lt;b&gt;busy&lt;/b&gt;" in html and "<code>ls</code>" in html
    assert 'role="alert"' in html and "Run failed" in html


def test_a_note_of_raw_html_only_reads_as_no_card() -> None:
    assert render_web(view(None, "<div>\nhidden\n</div>"), RenderSettings()) == '<p class="pc-empty">No progress card</p>'
