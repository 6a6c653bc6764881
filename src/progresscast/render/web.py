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

First of all come the asks (`pc-asks`): each open one with its prompt, its detail
(Markdown, sanitised as the note is), its options as buttons (checkboxes and Send for
a multiple choice) and a text box when it takes text; each one ended in the last
RECENT_ENDED_MS says how (answered by NAME, expired, withdrawn). A live run its
agent can stop shows a Stop button (`pc-stop`, its confirming label in
`data-confirm`), or `Stopping — NAME` once pressed (its ⏹ a CSS mark). The controls are drawn only
for a viewer who may answer (`can_answer`, the page's input: a read-only token sees
the ask and no controls); the page's script (static/live.js) sends them.

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
from ..model.asks import Ask, AskState
from ..model.card import Status
from ..model.timing import MINUTE
from ..model.view import TERMINAL, RunState, View
from .asks import asks_theme, option_label, stopped_words
from .fit import PAUSABLE, step_state
from .ir import plain
from .markdown import markdown_web_html, note_parts, number_text
from .templates import Theme, template, theme
from .times import ended_extras, run_time, step_time

_RUN_WORDS = {RunState.active: "run_active", RunState.completed: "run_completed", RunState.canceled: "canceled"}
RECENT_ENDED_MS = 10 * 60 * 1000
"""How long an ask that ended still shows on the card, saying how it ended."""
ENDED_SHOWN = 3
"""Ended asks shown at most (the newest)."""
# An ask's state drawn with the card's own CSS marks (no emoji font needed).
_ASK_MARKS = {
    AskState.open: "blocked", AskState.answered: "completed", AskState.expired: "paused",
    AskState.withdrawn: "skipped",
}


class WebStep(NamedTuple):
    """One checklist item as the template reads it (attributes: found on first lookup)."""

    state: str
    state_words: str
    text: str
    note: str
    aria: str
    current: bool
    took: str
    """How long the step has been active, or took (`2 min`); '' when not shown."""


class WebAsk(NamedTuple):
    """One ask as the template reads it: text is plain (escaped there), `detail_html` sanitised."""

    ask_id: str
    state: str
    mark: str
    prompt: str
    detail_html: Markup
    options: list[str]
    multi: bool
    allow_text: bool
    expires_at: str
    outcome: str


def _iso(ms: int) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def web_asks(view: View, now_ms: int | None, th: Theme) -> list[WebAsk]:
    """The open asks, then the ones ended in the last RECENT_ENDED_MS (all ended ones
    when `now_ms` is None), the newest ENDED_SHOWN of them. An open ask past its
    expiry reads expired (`now_ms` is the store's clock as the page read it)."""
    shown: list[WebAsk] = []
    ended: list[WebAsk] = []
    for ask in view.asks:
        state = ask.state_at(now_ms) if now_ms is not None else ask.state
        if state is not AskState.open:
            closed = ask.closed_ms if ask.closed_ms is not None else ask.expires_ms
            if now_ms is not None and now_ms - closed > RECENT_ENDED_MS:
                continue
        item = _web_ask(ask, state, th)
        (shown if state is AskState.open else ended).append(item)
    return shown + ended[-ENDED_SHOWN:]


def _web_ask(ask: Ask, state: AskState, th: Theme) -> WebAsk:
    if state is AskState.answered and ask.answer is not None:
        outcome = th.word("ask_answered", name=plain(ask.answer.by.shown), answer=plain(ask.answer.words))
    elif state is AskState.open:
        outcome = ""
    else:
        outcome = th.word(f"ask_{state.value}")
    is_open = state is AskState.open
    return WebAsk(
        ask_id=ask.ask_id,
        state=state.value,
        mark="failed" if ask.declined else _ASK_MARKS[state],  # an approval denied: a red cross, not a tick
        prompt=plain(ask.prompt),
        # Markup: sanitised by bleach, as the note is; shown only while the ask waits.
        detail_html=Markup(markdown_web_html(ask.detail)) if ask.detail and is_open else Markup(""),
        options=[option_label(o) for o in ask.options] if is_open else [],
        multi=ask.multi,
        allow_text=ask.allow_text and is_open,
        expires_at=_iso(ask.expires_ms),
        outcome=outcome,
    )


def stop_control(view: View, th: Theme, templates_dir: str | Path | None = None) -> dict[str, str] | None:
    """A live run its agent can stop: the Stop button's words, or the line saying who
    pressed it (`Stopping — NAME`, the chats' wording; its ⏹ drawn by CSS as the
    card's other marks); None when there is nothing to stop."""
    if view.run is not RunState.active:
        return None
    asks_th = asks_theme(templates_dir)
    if view.stop is not None:
        return {"kind": "stopping", "text": asks_th.word("stopping", name=plain(view.stop.by.shown))}
    if not view.stoppable:
        return None
    return {"kind": "button", "text": th.word("stop_button"), "confirm": asks_th.word("stop_confirm")}


def render_web(
    view: View,
    settings: RenderSettings,
    *,
    templates_dir: str | Path | None = None,
    can_answer: bool = False,
    now_ms: int | None = None,
) -> str:
    """The card as an HTML fragment (never None: an empty view reads "No progress card").
    `can_answer`: the viewer's token may answer asks and stop runs (its controls are
    drawn); `now_ms`: the clock the asks are read against (None: as stored)."""
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
    for index, step in enumerate(plan):
        state = step_state(step, view.paused)
        text = plain(step.step)
        words = th.word(state)
        note = plain(step.note) if step.note else ""
        aria = th.word("step", step=text, state=words)
        took = step_time(view, index, step, th) or ""
        steps.append(WebStep(state, words, text, note, aria, step.status is Status.in_progress, took))
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
        run = {"kind": view.run.value, "text": th.word(_RUN_WORDS[view.run]), "refresh_at": ""}
        if view.run in TERMINAL and view.stop is not None:
            run["text"] += " · " + stopped_words(view.stop, templates_dir)
        extras = ended_extras(view, th) if view.run in TERMINAL else [run_time(view, th) or ""]
        for extra in filter(None, extras):  # `Working · 5 min`, `Run completed · 4 min · $0.12`
            run["text"] += th.word("joiner") + extra
        if view.run is RunState.active and view.now is not None and view.started_at is not None:
            # the page asks again when the times it shows change (static/live.js)
            run["refresh_at"] = _iso(int((view.now + MINUTE) * 1000))
    answer = view.activity.answer if view.run in TERMINAL else None
    answer_html = Markup(markdown_web_html(answer)) if answer else Markup("")
    if view.activity.headline:
        status_parts.append(plain(view.activity.headline))
    asks = web_asks(view, now_ms, th)
    return template("web/card.j2", templates_dir).render(
        progress=progress,
        steps=steps,
        note_html=note_html,
        note_bar=note_bar,
        empty=not plan and not note_html and note_bar is None and not answer_html and not asks,
        asks=asks,
        stop=stop_control(view, th, templates_dir),
        can_answer=can_answer,
        attention=attention,
        run=run,
        answer_html=answer_html,
        status=" · ".join(status_parts),
        tools=[plain(t) for t in view.activity.tools],
        words=th.words,
        marks=th.marks,
    ).strip()

