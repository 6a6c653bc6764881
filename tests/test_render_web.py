"""The web card: progress element, checklist with aria-labels per state, sanitised note."""

from __future__ import annotations

import re

from progresscast.config.base import RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.asks import Actor, Answer, Ask, AskKind, AskState, StopMark
from progresscast.model.card import Card, CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render import render_web
from progresscast.render.web import RECENT_ENDED_MS

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


# -- asks and Stop ------------------------------------------------------------

NOW = 1_900_000_000_000
ANA = Actor("web", "web", "ana", "Ana <admin>")


def ask(ask_id: str = "a1", **kw: object) -> Ask:
    base: dict[str, object] = {
        "kind": AskKind.approval, "prompt": "Run <rm -rf build>?", "options": ("Allow", "Deny"),
        "created_ms": NOW - 1000, "expires_ms": NOW + 60_000,
    }
    return Ask(ask_id, **{**base, **kw})  # type: ignore[arg-type]


def test_an_open_ask_comes_first_with_its_options_as_buttons_for_a_viewer_who_may_answer() -> None:
    detail = "**Why**: <script>alert(1)</script> [x](javascript:y) <img src=x onerror=z>"
    v = view(PLAN, "note", run=RunState.active, asks=(ask(detail=detail),))
    html = render_web(v, RenderSettings(), can_answer=True, now_ms=NOW)
    assert html.startswith('<section class="pc-asks" aria-label="Questions for you">')
    assert html.index("pc-asks") < html.index("pc-progress") < html.index("pc-note")
    assert 'data-ask-id="a1"' in html and "Run &lt;rm -rf build&gt;?" in html
    buttons = re.findall(r'<button type="button" class="pc-ask__option" data-option="([^"]*)" dir="auto">([^<]*)</button>', html)
    assert buttons == [("Allow", "Allow"), ("Deny", "Deny")]
    # the detail is Markdown, sanitised as the note is
    assert '<div class="pc-ask__detail" dir="auto"><p><strong>Why</strong>: ' in html
    assert "<script" not in html and "<img" not in html and 'href="javascript' not in html and "onerror" not in html
    assert "pc-ask__form" not in html  # an approval takes no typed answer
    assert '<time class="pc-clock" datetime="2030-03-17T17:47:40Z">' in html  # when it expires


def test_a_viewer_who_may_not_answer_sees_the_ask_and_no_controls() -> None:
    v = view(PLAN, run=RunState.active, asks=(ask(allow_text=True),), stoppable=True)
    html = render_web(v, RenderSettings(), now_ms=NOW)
    assert "Run &lt;rm -rf build&gt;?" in html
    assert "<button" not in html and "<textarea" not in html and "<form" not in html
    assert "needs the scope operator.answer" in html


def test_text_and_multiple_choice_asks_have_a_form() -> None:
    text = ask("t1", kind=AskKind.text, prompt="Which branch?", options=(), allow_text=True)
    multi = ask("m1", kind=AskKind.choice, prompt="Which <tests>?", options=("unit", "e<2>e"), multi=True)
    html = render_web(view(None, None, asks=(text, multi)), RenderSettings(), can_answer=True, now_ms=NOW)
    assert '<textarea id="pc-text-t1" class="pc-ask__text" name="text" rows="2" maxlength="2000" dir="auto"></textarea>' in html
    assert re.findall(r'<input type="checkbox" name="option" value="([^"]*)">', html) == ["unit", "e&lt;2&gt;e"]
    assert html.count('<button type="submit" class="pc-ask__send">Send</button>') == 2
    assert "pc-ask__option" not in html  # a multiple choice is ticked, then sent
    assert "No progress card" not in html  # the asks are what the card shows


def test_ended_asks_say_how_they_ended_and_lose_their_controls() -> None:
    answered = ask("x1", state=AskState.answered, closed_ms=NOW - 5000,
                   answer=Answer(ANA, NOW - 5000, ("Allow",), "but <b>only</b> once"))
    withdrawn = ask("x2", state=AskState.withdrawn, closed_ms=NOW - 4000)
    lapsed = ask("x3", expires_ms=NOW - 1)  # open as stored, past its expiry on the clock
    old = ask("x4", prompt="Long ago", state=AskState.expired, closed_ms=NOW - RECENT_ENDED_MS - 1)
    html = render_web(view(PLAN, asks=(answered, withdrawn, lapsed, old)), RenderSettings(), can_answer=True, now_ms=NOW)
    assert "Answered by Ana &lt;admin&gt;: Allow, but &lt;b&gt;only&lt;/b&gt; once" in html
    assert "Withdrawn: the agent no longer waits for an answer" in html
    assert "Expired: no answer came in time" in html
    assert "Long ago" not in html  # ended long before: no longer shown
    assert "<button" not in html and "pc-ask--open" not in html


def test_an_approval_denied_is_marked_as_refused_and_one_allowed_as_done() -> None:
    def answered(ask_id: str, *chosen: str, text: str | None = None, **kw: object) -> Ask:
        return ask(ask_id, state=AskState.answered, closed_ms=NOW - 1000, answer=Answer(ANA, NOW - 1000, chosen, text), **kw)

    shown: dict[str, str] = {}
    for asks in (  # the card shows the newest three that ended
        (answered("y1", "Allow"), answered("n1", "Deny"), answered("n2", text="use staging instead")),
        (answered("y2", "Ship it", options=("Ship it", "Hold")), answered("c1", "B", kind=AskKind.choice, options=("A", "B"))),
    ):
        html = render_web(view(PLAN, asks=asks), RenderSettings(), can_answer=True, now_ms=NOW)
        shown |= dict(re.findall(r'data-ask-id="(\w+)".*?pc-mark--(\w+)', html, re.S))
    assert shown == {"y1": "completed", "n1": "failed", "n2": "failed", "y2": "completed", "c1": "completed"}


def test_the_stop_button_for_a_live_stoppable_run_and_who_pressed_it() -> None:
    v = view(PLAN, run=RunState.active, stoppable=True)
    html = render_web(v, RenderSettings(), can_answer=True)
    assert '<button type="button" class="pc-stop" data-confirm="Press again to stop" data-label="Stop">Stop</button>' in html
    assert "pc-stop" not in render_web(v, RenderSettings())  # not for a read-only viewer
    assert "pc-stop" not in render_web(view(PLAN, run=RunState.active), RenderSettings(), can_answer=True)  # not stoppable
    ended = view(PLAN, run=RunState.completed, stoppable=False)
    assert "pc-stop" not in render_web(ended, RenderSettings(), can_answer=True)
    stopping = view(PLAN, run=RunState.active, stoppable=True, stop=StopMark(ANA, NOW))
    html = render_web(stopping, RenderSettings(), can_answer=True)
    assert '<p class="pc-stopping" role="status">Stopping — Ana &lt;admin&gt;</p>' in html
    assert "<button" not in html
    assert "Stopping — Ana" in render_web(stopping, RenderSettings())  # every viewer sees it
    stopped = view(PLAN, run=RunState.canceled, stop=StopMark(ANA, NOW))
    assert "Run canceled · stopped by Ana &lt;admin&gt;" in render_web(stopped, RenderSettings())
