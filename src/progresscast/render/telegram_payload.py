"""What the Telegram adapter sends, as `Payload`s with their fallbacks — every decision
about how a Telegram message looks, the fallbacks included, is made here.

- A draft: rich (`sendRichMessage` blocks) when the settings ask for it, falling back
  to classic HTML, then to plain text; classic HTML falls back to plain text.
- A final answer: one classic HTML message per part, each falling back to plain text.
- A `/card` snapshot: the progress draft, also when the chat's mode shows no draft.

Plain text is the text renderer's: the same layout with `[x] [>] [ ]` markers, and
Markdown reduced to its text — for drafts and answers alike, so the same refusal ends
in the same text.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.asks import STOP_CONTROL, Ask, AskState, option_control
from ..model.needs import Need
from ..model.owners import Owner
from ..model.view import RunState, View
from .asks import ask_lines, option_label, stop_label
from .ending import ping_text
from .payload import Payload
from .renderers import DestinationRenderers
from .telegram import answer_chunks, no_mentions, render_telegram, to_html, wrap_message
from .templates import theme
from .text import render_text

RICH_METHOD = "sendRichMessage"
RICH = "rich"
CLASSIC = "classic"


def plain(text: str | None) -> Payload | None:
    """A plain-text message (no parse mode): the last fallback."""
    if not text or not text.strip():
        return None
    return Payload("sendMessage", {"text": text}, CLASSIC)


def _payload(rendered: dict[str, Any] | None, fallback: Any = None) -> Payload | None:
    if rendered is None:
        return None
    method = str(rendered["method"])
    return Payload(method, dict(rendered["params"]), RICH if method == RICH_METHOD else CLASSIC, fallback)


def stop_keyboard(view: View, templates_dir: str | Path | None = None) -> dict[str, Any] | None:
    """A live run its agent can stop, not stopped yet: the draft's Stop button."""
    if not view.stoppable or view.run is not RunState.active or view.stop is not None:
        return None
    label = stop_label(view, templates_dir)
    return {"inline_keyboard": [[{"text": label, "callback_data": STOP_CONTROL}]]}


def _with_markup(payload: Payload | None, markup: dict[str, Any] | None) -> Payload | None:
    """`payload` with an inline keyboard; without one, as it is: an edit without
    `reply_markup` removes the keyboard a message had."""
    if payload is None or markup is None:
        return payload
    return Payload(payload.method, {**payload.params, "reply_markup": markup}, payload.kind, payload.make_fallback)


def telegram_draft(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> Payload | None:
    """The draft for this view in a chat with these settings (None: no draft)."""
    classic = settings.model_copy(update={"rich": False}) if settings.rich else settings
    markup = stop_keyboard(view, templates_dir)

    def as_text() -> Payload | None:
        return _with_markup(plain(render_text(view, classic, templates_dir=templates_dir)), markup)

    def as_classic() -> Payload | None:
        return _with_markup(_payload(render_telegram(view, classic, templates_dir=templates_dir), as_text), markup)

    if settings.rich:
        return _payload(render_telegram(view, settings, templates_dir=templates_dir), as_classic)
    return as_classic()


def telegram_answer(
    markdown: str, *, head: str | None = None, templates_dir: str | Path | None = None
) -> list[Payload]:
    """A run's final answer as normal messages, under `head` (how the run ended; a
    message of its own for an empty answer); [] for an empty answer without one."""
    if not markdown.strip() and not head:
        return []
    out: list[Payload] = []
    for chunk in answer_chunks(markdown if markdown.strip() else "", head):
        text = "\n".join(line.text for line in chunk)
        html = wrap_message(to_html(chunk, templates_dir))
        out.append(Payload("sendMessage", html, CLASSIC, functools.partial(plain, text)))
    return out


def telegram_ping(
    view: View, needs: Sequence[Need], *, templates_dir: str | Path | None = None
) -> Payload | None:
    """The ping for what newly needs a person: plain text (no parse mode: nothing in it
    can be refused), its mentions defused."""
    text = ping_text(view, needs, theme("telegram", templates_dir))
    if not text:
        return None
    return Payload("sendMessage", {"text": no_mentions(text), "link_preview_options": {"is_disabled": True}}, CLASSIC)


def telegram_ask(owner: Owner, ask: Ask, *, templates_dir: str | Path | None = None) -> Payload:
    """An ask's message: plain text (nothing in it can be refused), its options as an
    inline keyboard while it is open; once it ended, its outcome and no keyboard."""
    text = "\n".join(ask_lines(ask, owner, templates_dir=templates_dir))
    params: dict[str, Any] = {"text": no_mentions(text), "link_preview_options": {"is_disabled": True}}
    if ask.state is AskState.open and ask.options:
        buttons = [
            {"text": option_label(label), "callback_data": option_control(ask.ask_id, i)}
            for i, label in enumerate(ask.options)
        ]
        per_row = 2 if all(len(b["text"]) <= 16 for b in buttons) else 1
        rows = [buttons[i : i + per_row] for i in range(0, len(buttons), per_row)]
        params["reply_markup"] = {"inline_keyboard": rows}
    return Payload("sendMessage", params, CLASSIC)


class TelegramRenderers(DestinationRenderers):
    """`channels.drafts.Renderers` for one chat's settings (`/card` in a chat whose mode
    shows no live draft: the snapshot)."""

    THEME = "telegram"

    def draft_with(self, view: View, settings: RenderSettings) -> Payload | None:
        return telegram_draft(view, settings, templates_dir=self.templates_dir)

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        return telegram_answer(markdown, head=head, templates_dir=self.templates_dir)

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        return telegram_ping(view, needs, templates_dir=self.templates_dir)

    def ask(self, owner: Owner, ask: Ask) -> Payload | None:
        return telegram_ask(owner, ask, templates_dir=self.templates_dir)


__all__ = [
    "RICH_METHOD",
    "TelegramRenderers",
    "plain",
    "telegram_answer",
    "telegram_ask",
    "telegram_draft",
    "telegram_ping",
]
