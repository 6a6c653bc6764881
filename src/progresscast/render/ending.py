"""The two one-line messages every chat channel sends besides drafts and answers, in
each channel's wording (its theme):

- the line that says how a run ended — `✅ shop · 3/3 done · 4 m · $0.12` (how long it
  took and what it used, when known: `render/times.py`), `❌ shop · failed · ⛔
  Confirm access`, `⏹️ shop · canceled` — the head of the run's answer, or a message
  of its own when there is none; in `partial`/`block` drafts, the head of the preview;
- a ping, the separate message that notifies when the work needs a person —
  `⛔ Needs you — shop: Confirm access` (a failed or completed run's ping is its end line).

Pure: view (and what needs a person) in, plain text out; each channel's renderer
escapes it for its format. The agent text in them (step names, what the agent waits
for, the session key) is cut to keep the line short.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.card import DONE_STATUSES
from ..model.needs import Need, Notify, needs
from ..model.view import RunState, View
from .asks import stopped_words
from .ir import Line, Span, middle_cut, plain
from .templates import Theme
from .times import ended_extras

MAX_ITEM = 120
"""Units of one named item (a step, what the agent waits for) before a middle `…`."""
MAX_LINE = 400
"""Units of the whole line before a middle `…`."""

_ENDED = {
    RunState.completed: "ended_completed",
    RunState.failed: "ended_failed",
    RunState.canceled: "ended_canceled",
}


def _items(found: Sequence[Need], theme: Theme) -> str:
    names = [middle_cut(plain(n.text), MAX_ITEM) for n in found if n.kind in (Notify.blocked, Notify.input) and n.text]
    return theme.word("items").join(name for name in names if name)


def end_line(view: View, theme: Theme) -> str | None:
    """How the view's run ended, on one line (None: the run has not ended, or it had
    nothing to show — neither a card nor an answer)."""
    word = _ENDED.get(view.run)
    if word is None or (view.card is None and not view.activity.answer):
        return None
    session = plain(view.owner.session_key)
    agent = plain(view.owner.agent_id)
    plan = (view.card.plan or ()) if view.card is not None else ()
    if view.run is RunState.completed and not plan:
        word = "ended_completed_bare"
    done = sum(1 for s in plan if s.status in DONE_STATUSES)
    text = theme.word(word, session=session, agent=agent, done=done, total=len(plan))
    line = _with_mark(theme.marks.get(word.removesuffix("_bare"), ""), text)
    if view.stop is not None:  # Stop pressed in chat: the run ends `⏹ shop · stopped by Ana`
        stopped = theme.word("joiner").join((session, stopped_words(view.stop)))
        line = _with_mark(theme.marks.get("ended_canceled", ""), stopped)
    for extra in ended_extras(view, theme):  # `· 4 m · $0.12`
        line += theme.word("joiner") + extra
    items = _items(needs(view), theme)
    if items:
        line += theme.word("joiner") + _with_mark(theme.marks.get("needs_you", ""), items)
    return middle_cut(line, MAX_LINE)


def ping_text(view: View, found: Sequence[Need], theme: Theme) -> str | None:
    """The ping for what newly needs a person (`found`): the run's end line when the run
    failed or completed, else `⛔ Needs you — shop: Confirm access, …`."""
    if any(n.kind in (Notify.failed, Notify.done) for n in found):
        return end_line(view, theme)
    items = _items(found, theme)
    if not items:
        return None
    text = theme.word(
        "needs_you", session=plain(view.owner.session_key), agent=plain(view.owner.agent_id), items=items
    )
    return middle_cut(_with_mark(theme.marks.get("needs_you", ""), text), MAX_LINE)


def head_lines(head: str | None, body: Sequence[Line]) -> list[Line]:
    """A message's lines with the end line `head` (bold) above `body`, a blank between."""
    if not head:
        return list(body)
    top = Line((Span(head, ("b",)),), kind="end")
    return [top, Line((), kind="blank"), *body] if body else [top]


def _with_mark(mark: str, text: str) -> str:
    return f"{mark} {text}" if mark else text


__all__ = ["end_line", "head_lines", "ping_text"]
