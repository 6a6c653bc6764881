"""The web card: an HTML fragment, rendered by `templates/web/card.j2`.

* a leading `<progress aria-label="Steps · k/N" value="k" max="N">` (only with a plan;
  k counts completed and skipped steps, as receipts do);
* the whole checklist as an `<ol>`; each `<li>` has class `pc-step pc-step--<state>`
  and `aria-label="<step>, <state>"` — states `completed`, `in progress`, `pending`,
  `blocked`, `skipped`, `paused` (an unfinished step of a paused run) — and the
  active step `aria-current="step"`;
* the note, rendered by markdown-it-py and sanitised by bleach (see `markdown.py`);
* attention paragraphs (`role="alert"`: a failed run, what the agent waits for,
  blocked steps) and the activity
  (`role="status"`: the headline, `paused`, recent tool lines).

With no card: `<p class="pc-empty">No progress card</p>` (and the activity, if any).
The web card has no line limits: every step and the whole note are shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from markupsafe import Markup

from ..card import Status
from ..config import RenderSettings
from ..view import RunState, View
from .fit import UNFINISHED, step_state
from .ir import plain
from .markdown import markdown_web_html
from .templates import template, theme


def render_web(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> str:
    """The card as an HTML fragment (never None: an empty view reads "No progress card")."""
    th = theme("web", templates_dir)
    card = view.card
    plan = (card.plan or ()) if card else ()
    progress = None
    if plan:
        done = sum(s.done for s in plan)
        progress = {"label": th.word("progress", done=done, total=len(plan)), "done": done, "total": len(plan)}
    steps = []
    for step in plan:
        state = step_state(step, view.paused)
        text = plain(step.step)
        steps.append(
            {
                "state": state,
                "text": text,
                "note": plain(step.note) if step.note else "",
                "icon": th.icons.get(state, ""),
                "aria": th.word("step", step=text, state=th.word(state)),
                "current": step.status is Status.in_progress,
            }
        )
    note_html = Markup(markdown_web_html(card.markdown)) if card and card.markdown else Markup("")
    attention: list[dict[str, Any]] = []
    if view.run is RunState.failed:
        attention.append({"kind": "failed", "icon": th.marks.get("failed", ""), "text": th.word("failed")})
    if view.activity.attention:
        text = plain(view.activity.attention)
        attention.append({"kind": "waiting", "icon": th.marks.get("blocked", ""), "text": text})
    for step in plan:
        if step.status is Status.blocked:
            text = th.word("blocked_one", step=plain(step.step))
            attention.append({"kind": "blocked", "icon": th.marks.get("blocked", ""), "text": text})
    status_parts = []
    if view.paused and any(s.status in UNFINISHED for s in plan):
        status_parts.append(th.word("run_paused"))
    if view.run is RunState.canceled:
        status_parts.append(th.word("canceled"))
    if view.activity.headline:
        status_parts.append(plain(view.activity.headline))
    return template("web/card.j2", templates_dir).render(
        progress=progress,
        steps=steps,
        note_html=note_html,
        empty=not plan and not note_html,
        attention=attention,
        status=" · ".join(status_parts),
        tools=[plain(t) for t in view.activity.tools],
        words=th.words,
        marks=th.marks,
    ).strip()
