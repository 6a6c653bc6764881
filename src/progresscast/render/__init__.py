"""Per-channel renderers: pure functions of a View and the channel settings.

    render_telegram(view, settings)           -> {"method", "params"} | None
    render_text(view, settings)               -> str | None
    render_web(view, settings)                -> str (HTML fragment)
    render_final_answer_messages(markdown)    -> [sendMessage payloads]
    render_slack(view, settings)              -> {"method", "params", "fallback"} | None
    render_slack_final_answer(markdown)       -> [chat.postMessage payloads]
    render_discord(view, settings)            -> {"method", "params", "fallback"} | None
    render_discord_final_answer(markdown)     -> [createMessage payloads]
    render_matrix(view, settings)             -> {"method", "params", "fallback"} | None
    render_matrix_final_answer(markdown)      -> [m.room.message payloads]
    payload_for(data, channel, settings, paused) -> what `progresscast render` prints
    history.history_text(entries, tz)         -> str (`card history --format text`)
    history.render_web_history(entries, card, now_ms) -> str (the web page's timeline)

Every function takes a keyword `templates_dir` (the config's `templates.dir`).
No I/O besides reading templates once; no Redis.

Layout: `draft.py` (what a draft shows in each mode: `card_lines.py` chooses the card's
lines, `draft_lines.py` fits each one), `fit.py` (the priority order, line caps),
`markdown.py` (Markdown → lines / sanitised HTML, cached by content), `ir.py` (the
line model and UTF-16 cuts), `answer.py` (the one answer splitter), `telegram.py`, `rich.py`,
`slack.py`, `discord.py`, `matrix.py`, `text.py`, `web.py`, `history.py` (a card's history as a timeline),
`templates.py` (template lookup, Jinja environments, themes), `preview.py` (CLI).
"""

from __future__ import annotations

from .discord import render_discord, render_discord_final_answer
from .matrix import render_matrix, render_matrix_final_answer
from .preview import payload_for, view_from_data
from .rich import render_rich
from .slack import render_slack, render_slack_final_answer
from .telegram import render_final_answer_messages, render_telegram
from .text import render_text
from .web import render_web

__all__ = [
    "payload_for",
    "render_discord",
    "render_discord_final_answer",
    "render_final_answer_messages",
    "render_matrix",
    "render_matrix_final_answer",
    "render_rich",
    "render_slack",
    "render_slack_final_answer",
    "render_telegram",
    "render_text",
    "render_web",
    "view_from_data",
]
