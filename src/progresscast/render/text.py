"""Plain text drafts, for channels without formatting: the same layout, selection and
limits as the Telegram classic draft (see `draft.py`), with the text theme's markers
(`[x]` completed, `[>]` in progress, `[ ]` pending, `[!]` blocked, `[-]` skipped,
`[‖]` paused) and Markdown reduced to its text."""

from __future__ import annotations

from pathlib import Path

from ..config.base import RenderSettings
from ..model.view import View
from .draft import compose
from .templates import template, theme

MAX_TEXT = 4096


def render_text(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> str | None:
    """The draft as plain text, or None when the mode shows nothing."""
    lines = compose(view, settings, theme("text", templates_dir), budget=MAX_TEXT)
    if not lines:
        return None
    return template("text/draft.j2", templates_dir).render(lines=[line.text for line in lines])
