"""Property tests over random valid cards: every mode and limit setting.

Cards of 0–50 steps — 512-byte steps of astral emoji, `<`, `&`, RTL text, control
characters — long step notes, 8 KB Markdown notes with raw HTML, streamed answers;
for each: the Telegram HTML is accepted by Telegram's HTML rules (our strict parser,
`progresscast.testing.telegram_html`), visible text ≤ 4,096, raw ≤ 32,768 bytes;
a progress draft has ≤ maxLines lines each ≤ maxLineChars; the active step is
visible whenever nothing that needs a person outranks it; no agent text turns into markup; rich messages pass the emulator's
InputRichMessage check; the web card keeps only ordinary formatting.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, CardInput, Status
from progresscast.model.owners import Owner
from progresscast.model.view import TERMINAL, RunState, View
from progresscast.render import render_final_answer_messages, render_telegram, render_text, render_web
from progresscast.render.ir import plain
from progresscast.render.markdown import markdown_lines
from progresscast.testing.telegram_html import parse, utf16_len, visible_length
from progresscast.testing.telegram_rich import check_rich, rich_text

TELEGRAM_TAGS = {"b", "i", "u", "s", "code", "pre", "blockquote", "a"}
ICONS = {"in_progress": "▶️", "paused": "⏸️"}
TEXT_ICONS = {"in_progress": "[>]", "paused": "[‖]"}

EMOJI = ["😀", "👩‍👩‍👧‍👦", "🇺🇦", "👍🏽", "❤️", "𝕏", "🧪"]
RTL = ["שלום עולם", "مرحبا بالعالم", "\u05d0", "\u0627"]
NASTY = [
    "<", ">", "&", "&amp;", "&lt;b&gt;", "<script>alert(1)</script>", "<b>", "</b>", "<br>", '"', "'",
    "\n", "\t", "  ", "&#x27;", "`", "*", "_", "[x](javascript:alert(1))", "\u2028", "\x00", "\x1b",
    "\u200b", "\u202e", "…", "·", "—", "\r\n", "<a href='https://x'>y</a>", "<pre>", "</code>",
]
MAX_STEPS = [
    "😀" * 128,  # 512 bytes of astral emoji
    "<" * 512,
    "&" * 512,
    "שלום " * 51,
    "x" * 512,
    "<script>" * 64,
]
MD_PIECES = [
    "# Heading\n", "## Sub `code`\n", "- item\n", "1. one\n", "  - nested\n", "> quote **b**\n> > deeper\n",
    "```py\ncode < & >\n```\n", "```\nunclosed fence\n", "[link](https://example.com/a?b=1&c=2)",
    "[js](javascript:alert(1))", "<script>alert(1)</script>", "<div onclick='x'>html\n</div>\n",
    "<img src=x onerror=alert(1)>", "**bold *and em***", "*em*", "~~s~~", "| a | b |\n|---|---|\n| 1 | `2` |\n",
    "\n\n", "---\n", "&amp; &lt; &#x27;", "<b>bold</b>", "\\", "![img *alt*](http://x/y.png)",
    "<https://auto.link/x>", "    indented code\n", "[**bold link** `c`](https://e.com)", "\n", " ", "text ",
    "A long paragraph of words, " * 30 + "\n\n", "```\n" + "long code line " * 40 + "\n```\n",
]

safe_chars = st.characters(blacklist_categories=("Cs",))
piece = st.one_of(st.sampled_from(EMOJI + RTL + NASTY), st.text(safe_chars, max_size=12))


def _bytes_cut(text: str, limit: int) -> str:
    return text.encode()[:limit].decode("utf-8", "ignore")


def _is_valid_step(text: str) -> bool:
    try:
        CardInput.parse({"plan": [{"step": text, "status": "pending"}]})
    except Exception:
        return False
    return True


step_text = st.one_of(
    st.sampled_from(MAX_STEPS),
    st.lists(piece, min_size=1, max_size=40).map(lambda p: "".join(p)),
).map(lambda t: _bytes_cut(t, 512)).filter(lambda t: _is_valid_step(t))


note_text = st.one_of(st.none(), st.lists(piece, max_size=30).map("".join), st.sampled_from(["n" * 400, "<b>" * 100]))


def _fill(parts: list[str], size: int) -> str:
    """The parts repeated up to `size` UTF-8 bytes."""
    unit = "".join(parts)
    if not unit:
        return ""
    return _bytes_cut(unit * (size // len(unit.encode()) + 1), size)


markdown = st.one_of(
    st.none(),
    st.lists(st.one_of(st.sampled_from(MD_PIECES), piece), max_size=40).map("".join),
    st.lists(st.one_of(st.sampled_from(MD_PIECES), piece), min_size=1, max_size=30).map(lambda p: _fill(p, 8192)),
).map(lambda m: None if m is None else _bytes_cut(m, 8192))


@st.composite
def plans(draw: Any) -> list[dict[str, Any]] | None:
    n = draw(st.one_of(st.integers(0, 8), st.integers(0, 50), st.just(50)))
    if n == 0:
        return draw(st.sampled_from([None, []]))
    statuses = draw(st.lists(st.sampled_from(["pending", "completed", "blocked", "skipped"]), min_size=n, max_size=n))
    active = draw(st.one_of(st.none(), st.integers(0, n - 1)))
    if active is not None:
        statuses[active] = "in_progress"
    texts = draw(st.lists(step_text, min_size=n, max_size=n))
    notes = draw(st.lists(note_text, min_size=n, max_size=n))
    plan = []
    for text, status, note in zip(texts, statuses, notes, strict=False):
        item: dict[str, Any] = {"step": text, "status": status}
        if note is not None:
            item["note"] = note
        plan.append(item)
    return plan


@st.composite
def views(draw: Any) -> View:
    owner = Owner("main", draw(st.sampled_from(["ticket-4821", "x" * 200, "שלום", "😀" * 50, "a<b>&c"])))
    data: dict[str, Any] = {}
    plan = draw(plans())
    if plan is not None:
        data["plan"] = plan
    note = draw(markdown)
    if note is not None:
        data["markdown"] = note
    parsed = CardInput.parse(data)
    card = None
    if not parsed.clears:
        card = Card(
            sessionKey=owner.session_key,
            agentId=owner.agent_id,
            displayKey=owner.display_key,
            revision=1,
            plan=parsed.plan,
            markdown=parsed.markdown,
            updatedAt="2026-06-01T00:00:00Z",
        )
    answer = draw(
        st.one_of(
            st.none(),
            st.lists(st.one_of(st.sampled_from(MD_PIECES), piece), max_size=30).map("".join),
            st.lists(st.one_of(st.sampled_from(MD_PIECES), piece), min_size=1, max_size=20).map(lambda p: _fill(p, 16000)),
        )
    )
    activity = Activity(
        headline=draw(st.one_of(st.none(), st.lists(piece, max_size=30).map("".join))),
        tools=tuple(draw(st.lists(st.lists(piece, min_size=1, max_size=10).map("".join), max_size=7))),
        answer=answer,
    )
    return View(
        owner=owner,
        card=card,
        activity=activity,
        run=draw(st.sampled_from(list(RunState))),
        paused=draw(st.booleans()),
    )


render_settings = st.builds(
    RenderSettings,
    mode=st.sampled_from(list(Mode)),
    maxLines=st.one_of(st.sampled_from([1, 2, 3, 4, 8, 50]), st.integers(1, 50)),
    maxLineChars=st.one_of(st.sampled_from([20, 21, 40, 120, 4096]), st.integers(20, 4096)),
    checklistLines=st.one_of(st.none(), st.integers(1, 50)),
    rich=st.just(False),
    label=st.one_of(st.none(), st.sampled_from(["<b>Ops</b> & co", "😀" * 300, "ops"])),
)

def extreme_view(mode_answer: bool, paused: bool, run: RunState = RunState.active, steps: int = 50) -> View:
    """Up to 50 steps of 512 bytes, the active one in the middle, long notes, an 8 KB note."""
    statuses = ["completed"] * 20 + ["in_progress"] + ["blocked"] * 3 + ["pending"] * 20 + ["skipped"] * 6
    statuses = statuses[20 - steps // 2 : 20 - steps // 2 + steps] if steps < 50 else statuses
    texts = MAX_STEPS * 9
    plan = [
        {"step": texts[i], "status": st, "note": "<b>n</b> & " * 40} for i, st in enumerate(statuses)
    ]
    parsed = CardInput.parse({"plan": plan or None, "markdown": _fill(MD_PIECES, 8192)})
    owner = Owner("main", "x" * 200)
    card = Card(
        sessionKey=owner.session_key, agentId="main", displayKey=owner.display_key, revision=1,
        plan=parsed.plan, markdown=parsed.markdown, updatedAt="2026-06-01T00:00:00Z",
    )
    activity = Activity(
        headline="h" * 280,
        tools=tuple("<tool> & " * 30 for _ in range(5)),
        answer=_fill(MD_PIECES, 16000) if mode_answer else None,
    )
    return View(owner=owner, card=card, activity=activity, run=run, paused=paused)


def invisible_card_view(run: RunState) -> View:
    """A card whose only content renders to nothing (raw HTML): a preview of a run that
    ended still shows how it ended; of a live one, nothing."""
    owner = Owner("main", "ticket-4821")
    card = Card(
        sessionKey=owner.session_key, agentId="main", displayKey=owner.display_key, revision=1, plan=None,
        markdown="<script>alert(1)</script>", updatedAt="2026-06-01T00:00:00Z",
    )
    return View(owner=owner, card=card, activity=Activity(), run=run)


EXTREMES = [
    (invisible_card_view(run), RenderSettings(mode=mode, maxLines=1, maxLineChars=20))
    for run in (RunState.completed, RunState.active)
    for mode in (Mode.progress, Mode.partial, Mode.block)
] + [
    (extreme_view(answer, paused, run), RenderSettings(mode=mode, maxLines=lines, maxLineChars=chars))
    for mode in (Mode.progress, Mode.partial, Mode.block)
    for lines, chars in ((1, 20), (2, 21), (3, 20), (8, 120), (50, 4096), (50, 20), (3, 4096))
    for answer, paused, run in ((True, False, RunState.active), (True, True, RunState.failed))
] + [
    (extreme_view(True, paused, RunState.active, steps), RenderSettings(mode=mode, maxLines=lines, maxLineChars=chars))
    for mode in (Mode.progress, Mode.partial)
    for lines, chars in ((50, 20), (50, 4096), (12, 33))
    for steps in (0, 2)
    for paused in (False, True)
]


def with_extremes(test: Any) -> Any:
    for view, s in EXTREMES:
        test = example(view, s)(test)
    return test


PROPS = settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


# --- what a draft must contain -------------------------------------------------------------


def shows_something(view: View, mode: Mode) -> bool:
    """A mode shows a draft when it has something visible: a plan, a note or answer
    whose Markdown renders to some text (raw HTML alone does not), activity lines. A
    preview of a run that ended is headed by how it ended, shown whenever the run had a
    card or an answer, even one with nothing visible in it."""
    card, activity = view.card, view.activity
    if mode is Mode.off:
        return False
    has_card = card is not None and bool(card.plan or (card.markdown and markdown_lines(card.markdown)))
    if mode is Mode.progress:
        return has_card or bool(activity.headline or activity.tools)
    ended = view.run in TERMINAL and not view.after_end and (card is not None or bool(activity.answer))
    return ended or has_card or bool(activity.answer and markdown_lines(activity.answer, "answer"))


def active_visible(lines: list[str], view: View, icons: dict[str, str]) -> bool:
    """The active step's line: its icon, then the start of its text (before any `…`)."""
    assert view.card is not None
    step = view.card.active_step
    assert step is not None
    icon = icons["paused" if view.paused else "in_progress"] + " "
    text = plain(step.step)
    full = text + (" — " + plain(step.note) if step.note and plain(step.note) else "")
    for line in lines:
        if not line.startswith(icon):
            continue
        body = line[len(icon) :]
        # the start of the step, then nothing, the `…` of a cut or the joined count
        for k in range(1, len(body) + 1):
            if not full.startswith(body[:k]):
                break
            if k == len(body) or body[k] == "…" or body[k:].startswith(" · "):
                return True
    return False


def has_active(view: View) -> bool:
    """An active step that nothing needing a person (a blocked step, a failed run) outranks."""
    if view.card is None or view.card.active_step is None or view.run is RunState.failed:
        return False
    return not any(s.status is Status.blocked for s in view.card.plan or ())


def check_lines(lines: list[str], s: RenderSettings) -> None:
    if s.mode is Mode.progress:
        assert len(lines) <= s.maxLines, (len(lines), s.maxLines)
        for line in lines:
            assert utf16_len(line) <= s.maxLineChars, (utf16_len(line), s.maxLineChars, line)


# --- Telegram classic --------------------------------------------------------------------


@PROPS
@with_extremes
@given(views(), render_settings)
def test_classic_html_is_accepted_and_within_limits(view: View, s: RenderSettings) -> None:
    payload = render_telegram(view, s)
    if not shows_something(view, s.mode):
        assert payload is None
        return
    assert payload is not None and payload["method"] == "sendMessage"
    html = payload["params"]["text"]
    parsed = parse(html)  # raises TelegramHTMLError where Telegram would refuse it
    assert parsed.text.strip(), "Telegram refuses an empty message"
    assert visible_length(html) <= 4096
    assert len(html.encode()) <= 32_768
    tags = {t.lower() for t in re.findall(r"<\s*/?\s*([A-Za-z][^\s>/]*)", html)}
    assert tags <= TELEGRAM_TAGS, tags
    lines = parsed.text.split("\n")
    check_lines(lines, s)
    if has_active(view):
        assert active_visible(lines, view, ICONS), lines


@PROPS
@given(views(), render_settings)
def test_agent_text_never_becomes_markup(view: View, s: RenderSettings) -> None:
    """Every step's text shows literally: what is shown of it is a piece of the plain text."""
    payload = render_telegram(view, s.model_copy(update={"mode": Mode.progress, "maxLines": 50, "maxLineChars": 4096}))
    if payload is None or view.card is None or not view.card.plan:
        return
    text = parse(payload["params"]["text"]).text
    for step in view.card.plan:
        if step.status is Status.in_progress or len(view.card.plan) <= 40:
            head = plain(step.step)[:6]
            assert head.split("…")[0] in text


# --- Telegram rich -----------------------------------------------------------------------


@PROPS
@with_extremes
@given(views(), render_settings)
def test_rich_payload_is_accepted_and_within_limits(view: View, s: RenderSettings) -> None:
    s = s.model_copy(update={"rich": True})
    payload = render_telegram(view, s)
    if not shows_something(view, s.mode):
        assert payload is None
        return
    assert payload is not None and payload["method"] == "sendRichMessage"
    assert set(payload["params"]) == {"rich_message"}
    rich = payload["params"]["rich_message"]
    assert set(rich) == {"blocks"}
    check_rich(rich)  # the emulator's InputRichMessage check: ≤ 500 blocks, ≤ 32,768 characters
    blocks = rich["blocks"]
    assert {b["type"] for b in blocks} <= {"paragraph", "list"}
    lists = [b for b in blocks if b["type"] == "list"]
    rows = s.maxLines if s.mode is Mode.progress else (s.checklistLines or s.maxLines)
    assert len(lists) <= (1 if view.card and view.card.plan else 0)
    # One line may go to the count alone, and a failed run's line outranks every step but
    # a blocked one; past those, a line is always left for a step.
    if view.card and view.card.plan and rows >= (3 if view.run is RunState.failed else 2):
        assert len(lists) == 1
    lines: list[str] = []
    for block in blocks:
        if block["type"] == "paragraph":
            lines += rich_text(block["text"]).split("\n")
            continue
        for item in block["items"]:
            assert item["has_checkbox"] is True
            assert set(item["blocks"][0]) == {"type", "text"}
            step = view.card.plan[item["value"] - 1]  # type: ignore[union-attr]
            assert item["is_checked"] is (step.status is Status.completed)
            assert item["label"] == f"{item['value']}."
            lines.append(rich_text(item["blocks"][0]["text"]))
    check_lines(lines, s)
    if has_active(view):
        icon = ICONS["paused" if view.paused else "in_progress"]
        assert active_visible(lines, view, {"paused": icon, "in_progress": icon}), lines


# --- text ----------------------------------------------------------------------------------


@PROPS
@with_extremes
@given(views(), render_settings)
def test_text_within_limits(view: View, s: RenderSettings) -> None:
    text = render_text(view, s)
    if not shows_something(view, s.mode):
        assert text is None
        return
    assert text is not None and text.strip()
    assert utf16_len(text) <= 4096
    lines = text.split("\n")
    check_lines(lines, s)
    if has_active(view):
        assert active_visible(lines, view, TEXT_ICONS), lines


# --- web -----------------------------------------------------------------------------------

WEB_TAGS = {
    "section",  # the final answer's own frame (the card's template)
    "progress", "ol", "ul", "li", "span", "div", "p", "code", "pre", "strong", "em", "b", "i", "s", "del",
    "blockquote", "h3", "h4", "h5", "h6", "a", "hr", "br", "table", "thead", "tbody", "tr", "th", "td",
}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


@PROPS
@given(views())
def test_web_card_is_sanitised(view: View) -> None:
    html = render_web(view, RenderSettings())
    collector = _Collector()
    collector.feed(html)
    collector.close()
    for tag, attrs in collector.tags:
        assert tag in WEB_TAGS, tag
        for name, value in attrs.items():
            assert not name.startswith("on") and name != "style", (tag, name)
            if name == "href":
                assert (value or "").lower().startswith(("http://", "https://", "mailto:")), value
    assert "<script" not in html.lower() and "<img" not in html.lower()
    plan = view.card.plan if view.card else None
    if plan:
        done = sum(s.done for s in plan)
        assert html.startswith(
            f'<div class="pc-progress"><progress aria-label="Steps · {done}/{len(plan)}" value="{done}" max="{len(plan)}">'
        )
        assert f">{done} of {len(plan)} done</span>" in html
        items = [attrs for tag, attrs in collector.tags if tag == "li" and "pc-step" in (attrs.get("class") or "")]
        assert len(items) == len(plan)
        for step, attrs in zip(plan, items, strict=False):
            pausable = step.status in (Status.pending, Status.in_progress)  # blocked stays blocked
            state = "paused" if view.paused and pausable else step.status.value.replace("_", " ")
            assert attrs["aria-label"] == f"{plain(step.step)}, {state}"


# --- final answer --------------------------------------------------------------------------


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(
    st.one_of(
        st.lists(st.one_of(st.sampled_from(MD_PIECES), piece), max_size=60).map("".join),
        st.lists(st.one_of(st.sampled_from(MD_PIECES), piece), min_size=1, max_size=20).map(lambda p: _fill(p, 20000)),
    )
)
def test_final_answer_messages_split_without_loss(answer: str) -> None:
    messages = render_final_answer_messages(answer)
    shown = []
    for message in messages:
        assert message["method"] == "sendMessage"
        html = message["params"]["text"]
        text = parse(html).text
        assert text.strip() and visible_length(html) <= 4096 and len(html.encode()) <= 32_768
        shown.append(text)
    expected = "".join(line.text for line in markdown_lines(answer, "answer"))
    # Whitespace-only lines at a split are dropped (Telegram would trim them anyway):
    # every visible character must arrive, in order.
    assert re.sub(r"\s+", "", "".join(shown)) == re.sub(r"\s+", "", expected)
