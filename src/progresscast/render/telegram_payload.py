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
from ..model.needs import Need
from ..model.view import View
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


def telegram_draft(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> Payload | None:
    """The draft for this view in a chat with these settings (None: no draft)."""
    classic = settings.model_copy(update={"rich": False}) if settings.rich else settings

    def as_text() -> Payload | None:
        return plain(render_text(view, classic, templates_dir=templates_dir))

    def as_classic() -> Payload | None:
        return _payload(render_telegram(view, classic, templates_dir=templates_dir), as_text)

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


__all__ = [
    "RICH_METHOD",
    "TelegramRenderers",
    "plain",
    "telegram_answer",
    "telegram_draft",
    "telegram_ping",
]
