"""What a message that asks a person says, in every channel: pure, plain text lines that
each channel's renderer escapes for its format and adds its controls to (buttons, a
keyboard, numbered options). Wording in `templates/asks/theme.j2`.

    ask_lines(ask, owner, numbered=…)   -> [str]   the ask's message, as it stands
    option_label(label)                 -> str     a button's text
    waiting_line(ask)                   -> str     the draft's line while it waits
    stopping_line(stop), stopped_words(stop)       the draft's and the end line's Stop
"""

from __future__ import annotations

from pathlib import Path

from ..model.asks import Ask, AskState, StopMark
from ..model.owners import Owner
from ..model.view import View
from .ir import middle_cut, plain
from .templates import Theme, theme

MAX_DETAIL_SHOWN = 1000
"""Characters of an ask's detail shown in chat (the web card shows all of it)."""


def asks_theme(templates_dir: str | Path | None = None) -> Theme:
    return theme("asks", templates_dir)


def _answer_words(ask: Ask) -> str:
    if ask.answer is None:
        return ""
    return middle_cut(plain(ask.answer.words), 200)


def headline(ask: Ask, owner: Owner, th: Theme) -> str:
    """The ask's first line: its question while open, its outcome once ended."""
    prompt = plain(ask.prompt)
    label = f"{plain(owner.agent_id)} · {plain(owner.session_key)}"
    if ask.state is AskState.answered and ask.answer is not None:
        text = th.word("answered", prompt=prompt, name=plain(ask.answer.by.shown), answer=_answer_words(ask))
    elif ask.state is AskState.open:
        text = th.word("open", label=label, prompt=prompt)
    else:
        text = th.word(ask.state.value, prompt=prompt)
    return f"{th.icons['declined' if ask.declined else ask.state.value]} {text}"


def ask_lines(
    ask: Ask, owner: Owner, *, numbered: bool = False, templates_dir: str | Path | None = None
) -> list[str]:
    """The ask's message as plain lines: its headline, then while open its detail, its
    options numbered (`numbered`: channels without buttons) and how to type an answer."""
    th = asks_theme(templates_dir)
    lines = [headline(ask, owner, th)]
    if ask.state is not AskState.open:
        return lines
    if ask.detail:
        detail = ask.detail if len(ask.detail) <= MAX_DETAIL_SHOWN else ask.detail[: MAX_DETAIL_SHOWN - 1] + "…"
        lines += [" ".join(line.split()) for line in detail.splitlines() if line.strip()]
    if numbered and ask.options:
        lines += [f"{i}. {plain(label)}" for i, label in enumerate(ask.options, 1)]
        lines.append(th.word("number_hint"))
    if ask.allow_text:
        lines.append(th.word("reply_hint"))
    return lines


def option_label(label: str) -> str:
    return plain(label)


def waiting_line(ask: Ask, templates_dir: str | Path | None = None) -> str:
    """`❓ Waiting for you: PROMPT` — the draft's top line while the ask is open."""
    th = asks_theme(templates_dir)
    return f"{th.icons['open']} {th.word('waiting', prompt=plain(ask.prompt))}"


def stopping_line(stop: StopMark, templates_dir: str | Path | None = None) -> str:
    """`⏹ Stopping — NAME` — the draft's line once Stop was pressed on a live run."""
    th = asks_theme(templates_dir)
    return f"{th.icons['stop']} {th.word('stopping', name=plain(stop.by.shown))}"


def stopped_words(stop: StopMark, templates_dir: str | Path | None = None) -> str:
    """`stopped by NAME` — how the end line names a run stopped from chat."""
    return asks_theme(templates_dir).word("stopped", name=plain(stop.by.shown))


def stop_label(view: View, templates_dir: str | Path | None = None) -> str:
    """The Stop control's words: `⏹ Stop`, or `Press again to stop` while a first press
    waits for its confirmation."""
    return asks_theme(templates_dir).word("stop_confirm" if view.stop_armed else "stop_button")


def word(key: str, templates_dir: str | Path | None = None, **values: object) -> str:
    """One of the short answers a press gets (`already_answered`, …)."""
    return asks_theme(templates_dir).word(key, **values)


__all__ = [
    "ask_lines", "asks_theme", "headline", "option_label", "stop_label", "stopped_words", "stopping_line",
    "waiting_line", "word",
]
