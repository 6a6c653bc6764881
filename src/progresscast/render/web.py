"""The web card: an HTML fragment, rendered by `templates/web/card.j2`.

* a leading `<progress aria-label="Steps · k/N" value="k" max="N">` with `k of N done`
  beside it as visible text (only with a plan; k counts completed and skipped steps,
  as receipts do);
* what needs a person, above the checklist: `role="alert"` paragraphs for a failed
  run and each blocked step;
* the whole checklist as an `<ol>`; each `<li>` has class `pc-step pc-step--<state>`,
  a CSS-drawn mark `pc-mark pc-mark--<state>` (six distinct shapes and colours, no
  emoji font needed), `aria-label="<step>, <state>"` and the state in words as
  visually hidden text — states `completed`, `in progress`, `pending`, `blocked`,
  `skipped`, `paused` (an unfinished step of a paused run) — and the active step
  `aria-current="step"`;
* the note's own progress bar (a valid `<progress aria-label value max>` first in the
  note) pinned above the note, its label shown beside it;
* the note, rendered by markdown-it-py and sanitised by bleach (see `markdown.py`);
* how the run stands (`Working`, `Run completed`, `Run canceled`; a failed run is
  the alert above) and, once it has ended, its final answer (Markdown, sanitised);
* the activity (`role="status"`: the headline, `paused`, recent tool lines).

Pending and active steps of a paused run read `paused`; a blocked step stays
`blocked`, named in its alert, whether a run is active or not.

With no card: `<p class="pc-empty">No progress card</p>` (and the activity, if any).
The web card has no line limits: every step and the whole note are shown.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, NamedTuple

from markupsafe import Markup

from ..config.base import RenderSettings
from ..model.card import Status
from ..model.view import TERMINAL, RunState, View
from .fit import PAUSABLE, step_state
from .ir import plain
from .markdown import markdown_web_html, note_parts, number_text
from .templates import template, theme

_RUN_WORDS = {RunState.active: "run_active", RunState.completed: "run_completed", RunState.canceled: "canceled"}


class WebStep(NamedTuple):
    """One checklist item as the template reads it (attributes: found on first lookup)."""

    state: str
    state_words: str
    text: str
    note: str
    aria: str
    current: bool


def render_web(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> str:
    """The card as an HTML fragment (never None: an empty view reads "No progress card")."""
    th = theme("web", templates_dir)
    card = view.card
    plan = (card.plan or ()) if card else ()
    progress = None
    if plan:
        done = sum(s.done for s in plan)
        total = len(plan)
        progress = {
            "label": th.word("progress", done=done, total=total),
            "text": th.word("progress_text", done=done, total=total),
            "done": done,
            "total": total,
        }
    steps = []
    for step in plan:
        state = step_state(step, view.paused)
        text = plain(step.step)
        words = th.word(state)
        note = plain(step.note) if step.note else ""
        aria = th.word("step", step=text, state=words)
        steps.append(WebStep(state, words, text, note, aria, step.status is Status.in_progress))
    bar, rest = note_parts(card.markdown) if card and card.markdown else (None, "")
    note_bar = None
    if bar is not None:
        note_bar = {
            "caption": bar.caption,
            "aria": bar.caption,
            "value": number_text(bar.value),
            "max": number_text(bar.max),
            "count": bar.count,
        }
    note_html = Markup(markdown_web_html(rest)) if rest else Markup("")
    attention: list[dict[str, Any]] = []
    if view.run is RunState.failed:
        attention.append({"kind": "failed", "text": th.word("failed")})
    if view.activity.attention:
        attention.append({"kind": "blocked", "text": plain(view.activity.attention)})
    for step in plan:
        if step.status is Status.blocked:
            attention.append({"kind": "blocked", "text": th.word("blocked_one", step=plain(step.step))})
    status_parts = []
    if view.paused and any(s.status in PAUSABLE for s in plan):
        status_parts.append(th.word("run_paused"))
    # How the run stands (a failed one is said once, with what needs a person), and
    # its final answer once it has ended.
    run = None
    if view.run in _RUN_WORDS:
        run = {"kind": view.run.value, "text": th.word(_RUN_WORDS[view.run])}
    answer = view.activity.answer if view.run in TERMINAL else None
    answer_html = Markup(markdown_web_html(answer)) if answer else Markup("")
    if view.activity.headline:
        status_parts.append(plain(view.activity.headline))
    return template("web/card.j2", templates_dir).render(
        progress=progress,
        steps=steps,
        note_html=note_html,
        note_bar=note_bar,
        empty=not plan and not note_html and note_bar is None and not answer_html,
        attention=attention,
        run=run,
        answer_html=answer_html,
        status=" · ".join(status_parts),
        tools=[plain(t) for t in view.activity.tools],
        words=th.words,
        marks=th.marks,
    ).strip()

