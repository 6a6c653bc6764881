"""The Matrix renderer: goldens for every scenario of test_render_golden.py
(`<name>.matrix.json`: the `m.room.message` content and its fallback) and the final
answer; regenerate with `UPDATE_GOLDEN=1` and read the diff. Properties: the HTML uses
only the spec's subset, every event (and its edit) fits in 65,536 bytes, nobody is
mentioned, and agent text never turns into markup."""

from __future__ import annotations

import json
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.view import RunState, View
from progresscast.render import payload_for, render_matrix, render_matrix_final_answer
from progresscast.render.matrix import (
    MATRIX_TAGS,
    MAX_CONTENT_BYTES,
    edit_content,
    json_size,
    sanitize,
)
from progresscast.render.matrix_payload import MatrixRenderers, matrix_notice
from test_render_golden import CASES, OWNER, Case, card, check
from test_render_properties import PROPS, render_settings, shows_something, views, with_extremes

MATRIX_CASES: dict[str, Case] = {
    **CASES,
    "matrix_mentions": Case(
        View(
            OWNER,
            card(
                [("@room please look", "in_progress", "ping @alice:example.org"), ("<script>alert(1)</script>", "pending")],
                "@room [me](https://matrix.to/#/@alice:example.org) <a href='https://x'>y</a> <font color=red>r</font>",
            ),
            Activity(headline="@room <b>now</b>"),
            RunState.active,
        ),
        RenderSettings(label="@room ops"),
    ),
    "matrix_huge": Case(
        View(
            OWNER,
            card([(f"{i} " + "<" * 500, "pending", "&" * 500) for i in range(50)]),
            Activity(answer="".join(f"[link {i}](https://example.com/{'a' * 2000})\n\n" for i in range(40))),
            RunState.active,
        ),
        RenderSettings(mode=Mode.partial, maxLines=50, maxLineChars=4096),
    ),
}


def dumps(payload: Any) -> str:
    return json.dumps(payload, ensure_ascii=False, indent=2) + "\n"


@pytest.mark.parametrize("name", sorted(MATRIX_CASES))
def test_golden(name: str) -> None:
    case = MATRIX_CASES[name]
    check(name, "matrix.json", dumps(render_matrix(case.view, case.settings)))


def test_golden_final_answer() -> None:
    answer = "# Done\n\nThe fix is in **#4822** for @room & <script>x()</script>.\n\n" + "\n\n".join(
        f"Paragraph {i}: " + "words & more " * 300 for i in range(8)
    )
    messages = render_matrix_final_answer(answer)
    check("final_answer", "matrix.json", dumps(messages))
    assert len(messages) > 1
    for message in messages:
        assert message["params"]["msgtype"] == "m.text"
        check_content(message["params"])
    text = "\n".join(m["params"]["body"] for m in messages)
    assert "for @room & ." in text and "Paragraph 7:" in text


# --- what every content must be ------------------------------------------------------


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


ALLOWED_ATTRS = {"a": {"href", "target"}, "ol": {"start"}, "code": {"class"}}


def html_tags(fragment: str) -> _Tags:
    parser = _Tags()
    parser.feed(fragment)
    parser.close()
    return parser


def check_content(content: dict[str, Any]) -> None:
    """Within the spec's HTML subset and the event size (also as an edit); no mention."""
    assert content["m.mentions"] == {}
    assert content["msgtype"] in ("m.notice", "m.text")
    assert isinstance(content["body"], str) and content["body"].strip()
    if "formatted_body" in content:
        assert content["format"] == "org.matrix.custom.html"
        for tag, attrs in html_tags(content["formatted_body"]).tags:
            assert tag in MATRIX_TAGS, tag
            assert set(attrs) <= ALLOWED_ATTRS.get(tag, set()), (tag, attrs)
            if tag == "a":
                assert str(attrs["href"]).startswith(("https://", "http://"))
            if tag == "code" and "class" in attrs:
                assert str(attrs["class"]).startswith("language-")
    edit = edit_content(content, "$" + "e" * 43)
    assert edit["m.mentions"] == {} and edit["m.new_content"]["m.mentions"] == {}
    assert json_size(edit) <= MAX_CONTENT_BYTES


@pytest.mark.parametrize("name", sorted(MATRIX_CASES))
def test_every_golden_is_valid(name: str) -> None:
    case = MATRIX_CASES[name]
    payload = render_matrix(case.view, case.settings)
    if payload is None:
        assert name in ("empty", "off")
        return
    assert payload["method"] == "m.room.message"
    check_content(payload["params"])
    check_content(payload["fallback"]["params"])
    assert "formatted_body" not in payload["fallback"]["params"]
    assert payload["fallback"]["params"]["body"] == payload["params"]["body"]


def test_every_state_has_a_distinct_mark() -> None:
    case = MATRIX_CASES["all_states"]
    payload = render_matrix(case.view, case.settings)
    assert payload is not None
    html = payload["params"]["formatted_body"]
    items = html[html.index("<ul>") + 4 : html.index("</ul>")].split("</li>")[:-1]
    assert [item.removeprefix("<li>").split(" ")[0] for item in items] == ["✅", "⏭️", "▶️", "⛔", "⬜", "⬜"]
    assert "<del>Skip the flaky benchmark" in items[1] and "<strong>Write the migration</strong>" in items[2]
    paused = render_matrix(MATRIX_CASES["paused"].view, MATRIX_CASES["paused"].settings)
    assert paused is not None and "⏸️" in paused["params"]["body"]


def test_agent_text_is_escaped_and_mentions_nobody() -> None:
    case = MATRIX_CASES["matrix_mentions"]
    payload = render_matrix(case.view, case.settings)
    assert payload is not None
    content = payload["params"]
    html = content["formatted_body"]
    assert "<script" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "&lt;b&gt;now&lt;/b&gt;" in html and "<b>" not in html
    assert "<font" not in html and "href='https://x'" not in html
    assert "@room ops" in content["body"] and content["m.mentions"] == {}


def test_a_huge_card_fits_in_one_event() -> None:
    case = MATRIX_CASES["matrix_huge"]
    payload = render_matrix(case.view, case.settings)
    assert payload is not None
    check_content(payload["params"])
    assert json_size(payload["params"]) > MAX_CONTENT_BYTES // 4  # it was fitted, not emptied
    assert "link 39" in payload["params"]["body"]


def test_sanitize_keeps_the_subset_only() -> None:
    dirty = (
        '<p onclick="x">a</p><script>b</script><a href="javascript:alert(1)">c</a>'
        '<code class="language-py evil">d</code><img src="https://x/y.png"><iframe>e</iframe>'
    )
    clean = sanitize(dirty)
    assert "onclick" not in clean and "<script" not in clean and "javascript:" not in clean
    assert "<iframe" not in clean and 'src="https' not in clean and "evil" not in clean


def test_thread_relation_and_notice() -> None:
    case = MATRIX_CASES["plan"]
    draft = MatrixRenderers(case.settings, "$root").draft(case.view)
    assert draft is not None
    relation = draft.params["m.relates_to"]
    assert relation["rel_type"] == "m.thread" and relation["event_id"] == "$root"
    edit = edit_content(dict(draft.params), "$draft")
    assert "m.relates_to" not in edit["m.new_content"]
    assert edit["m.relates_to"] == {"rel_type": "m.replace", "event_id": "$draft"}
    fallback = draft.fallback()
    assert fallback is not None and fallback.params["m.relates_to"] == relation
    reply = matrix_notice("@room hi", thread_root="$root")
    assert reply.params["m.mentions"] == {} and reply.params["m.relates_to"]["event_id"] == "$root"
    # A reply repeats what a person typed: its HTML is that text escaped, lines kept.
    typed = matrix_notice("Sorry, I can't follow <b>x</b> & <script>y</script>\nUsage: !pc follow")
    assert typed.params["format"] == "org.matrix.custom.html" and typed.params["msgtype"] == "m.notice"
    assert typed.params["formatted_body"] == (
        "Sorry, I can't follow &lt;b&gt;x&lt;/b&gt; &amp; &lt;script&gt;y&lt;/script&gt;<br>Usage: !pc follow"
    )
    assert MatrixRenderers(case.settings).draft(case.view) is not None
    assert "m.relates_to" not in (MatrixRenderers(case.settings).draft(case.view) or draft).params


def test_a_snapshot_shows_the_progress_draft_whatever_the_mode() -> None:
    case = MATRIX_CASES["plan"]
    off = case.settings.model_copy(update={"mode": Mode.off})
    renderers = MatrixRenderers(off, "$root")
    assert renderers.draft(case.view) is None  # mode off: no live draft
    snapshot = renderers.snapshot(case.view)
    progress = MatrixRenderers(case.settings.model_copy(update={"mode": Mode.progress}), "$root").draft(case.view)
    assert snapshot is not None and progress is not None and snapshot.params == progress.params


def test_preview_command_payload() -> None:
    data = {"plan": [{"step": "a", "status": "in_progress"}]}
    payload = payload_for(data, "matrix", RenderSettings())
    assert payload["method"] == "m.room.message" and "▶️ a" in payload["params"]["body"]
    assert payload_for(None, "matrix", RenderSettings()) == {"method": "m.room.redaction", "params": {}}


# --- properties ------------------------------------------------------------------------


@PROPS
@with_extremes
@given(views(), render_settings)
def test_every_draft_is_valid_and_fits(view: View, s: RenderSettings) -> None:
    payload = render_matrix(view, s)
    if payload is None:
        assert not shows_something(view, s.mode)
        return
    check_content(payload["params"])
    if s.mode is Mode.progress:
        assert len(payload["params"]["body"].split("\n")) <= s.maxLines
