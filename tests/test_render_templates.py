"""Template lookup and overrides (`templates.dir`): themes change wording, never limits."""

from __future__ import annotations

from pathlib import Path

from progresscast.config.base import RenderSettings
from progresscast.model.card import Card, CardInput
from progresscast.model.owners import Owner
from progresscast.model.view import View
from progresscast.render import render_telegram, render_text, render_web
from progresscast.render.templates import template, template_root, theme
from progresscast.testing.telegram_html import parse, visible_length

OWNER = Owner("main", "s1")


def view(n: int = 3) -> View:
    plan = [{"step": f"step {i} " + "w" * 100, "status": "in_progress" if i == 0 else "pending"} for i in range(n)]
    parsed = CardInput.parse({"plan": plan})
    card = Card(
        sessionKey="s1", agentId="main", displayKey=OWNER.display_key, revision=1,
        plan=parsed.plan, updatedAt="2026-06-01T00:00:00Z",
    )
    return View(OWNER, card)


def test_packaged_templates_are_found() -> None:
    root = template_root()
    for name in ("telegram/draft.j2", "telegram/theme.j2", "text/draft.j2", "text/theme.j2", "web/card.j2", "web/theme.j2"):
        assert (root / name).is_file(), name
    assert root == Path(__file__).resolve().parents[1] / "templates"


def test_environment_is_built_once_and_autoescapes_html_only() -> None:
    env = template("web/card.j2").environment
    assert env is template("text/draft.j2").environment is template("telegram/draft.j2", None).environment
    assert env.autoescape("web/card.j2") and env.autoescape("telegram/draft.j2")  # type: ignore[operator]
    assert not env.autoescape("text/draft.j2")  # type: ignore[operator]


def test_theme_override_changes_icons_and_keeps_the_rest(tmp_path: Path) -> None:
    (tmp_path / "telegram").mkdir()
    (tmp_path / "telegram" / "theme.j2").write_text(
        '{%- set icons = {"in_progress": "🚧", "pending": "◻️"} -%}{%- set words = {"count": "{done} of {total}"} -%}'
    )
    th = theme("telegram", tmp_path)
    assert th.icons["in_progress"] == "🚧" and th.icons["completed"] == "✅"  # missing keys fall back
    payload = render_telegram(view(), RenderSettings(), templates_dir=tmp_path)
    assert payload is not None
    text = parse(payload["params"]["text"]).text
    assert "🚧 step 0" in text and "◻️ step 1" in text and "0 of 3" in text
    # the packaged theme is untouched
    default = render_telegram(view(), RenderSettings())
    assert default is not None and "▶️ step 0" in parse(default["params"]["text"]).text


def test_frame_override_and_fallback(tmp_path: Path) -> None:
    (tmp_path / "web").mkdir()
    (tmp_path / "web" / "card.j2").write_text('<div class="mine">{{ steps|length }}</div>')
    assert render_web(view(), RenderSettings(), templates_dir=tmp_path) == '<div class="mine">3</div>'
    # text templates were not overridden: the packaged ones are used
    assert render_text(view(), RenderSettings(), templates_dir=tmp_path) == render_text(view(), RenderSettings())


def test_an_override_that_adds_visible_text_cannot_break_the_limit(tmp_path: Path) -> None:
    (tmp_path / "telegram").mkdir()
    (tmp_path / "telegram" / "draft.j2").write_text(
        "{% for block in blocks %}{{ block.body }}{{ 'padding ' * 1000 }}{% endfor %}"
    )
    payload = render_telegram(view(40), RenderSettings(maxLines=50, maxLineChars=4096), templates_dir=tmp_path)
    assert payload is not None
    html = payload["params"]["text"]
    assert visible_length(html) <= 4096 and "padding" not in html
