"""What the Matrix adapter sends, as `Payload`s with their fallbacks — every decision
about how a Matrix message looks, the fallbacks included, is made here.

- A draft: the `m.notice` of `render/matrix.py`, falling back to its plain `body`
  when the server refuses the content.
- A final answer: one `m.text` per part, each falling back to its plain `body`.
- A `!pc card` snapshot: the progress draft, also when the room's mode shows none.
- A command's reply: an `m.notice` of plain text, its HTML the same text escaped
  (`notice_html`): nothing a person typed and the reply repeats becomes markup.
- An ask: an `m.text` (it notifies; it mentions nobody) of the shared ask lines, its
  options numbered while it is open (Matrix has no buttons: a person reacts with the
  number or replies with it, `matrix.presses`), its outcome once it ended (the
  adapter edits it with `m.replace`). Its HTML is its text escaped, as a reply's.

In a thread (`m.thread`) every message carries the thread relation (with the reply
fallback to the thread's root that clients without threads show); an edit does not
repeat it (`matrix.edit_content`): an edit stays where the event it replaces is.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.asks import Ask
from ..model.needs import Need
from ..model.owners import Owner
from ..model.view import View
from .asks import ask_lines
from .ending import ping_text
from .matrix import EVENT_TYPE, HTML_FORMAT, NOTICE, TEXT, render_matrix, render_matrix_final_answer
from .payload import Payload, present
from .renderers import DestinationRenderers
from .templates import theme

KIND = "notice"


def in_thread(content: dict[str, Any], thread_root: str | None) -> dict[str, Any]:
    """`content` as a message of the thread whose root is `thread_root` (None: the room)."""
    if not thread_root:
        return content
    relation = {"rel_type": "m.thread", "event_id": thread_root, "is_falling_back": True,
                "m.in_reply_to": {"event_id": thread_root}}
    return {**content, "m.relates_to": relation}


def _payload(call: dict[str, Any] | None, thread_root: str | None) -> Payload | None:
    """A rendered call (`{"method", "params", "fallback"}`) as a Payload, its fallback chained."""
    if call is None:
        return None
    fallback = call.get("fallback")
    return Payload(
        str(call["method"]), in_thread(dict(call["params"]), thread_root), KIND,
        lambda: _payload(fallback, thread_root) if fallback else None,
    )


def matrix_draft(
    view: View, settings: RenderSettings, *, thread_root: str | None = None, templates_dir: str | Path | None = None
) -> Payload | None:
    """The draft for this view with these settings (None: no draft)."""
    return _payload(render_matrix(view, settings, templates_dir=templates_dir), thread_root)


def matrix_answer(markdown: str, *, head: str | None = None, thread_root: str | None = None) -> list[Payload]:
    """A run's final answer as normal messages, under `head` (how the run ended; a
    message of its own for an empty answer); [] for an empty answer without one."""
    return present(_payload(call, thread_root) for call in render_matrix_final_answer(markdown, head))


def matrix_ping(
    view: View, needs: Sequence[Need], *, thread_root: str | None = None, templates_dir: str | Path | None = None
) -> Payload | None:
    """The ping for what newly needs a person: an `m.text` (which notifies, unlike the
    draft's `m.notice`) that mentions nobody (`m.mentions` empty)."""
    text = ping_text(view, needs, theme("matrix", templates_dir))
    if not text:
        return None
    content = {"msgtype": TEXT, "body": text, "m.mentions": {}}
    return Payload(EVENT_TYPE, in_thread(content, thread_root), KIND)


def notice_html(text: str) -> str:
    """A reply's plain text as HTML: escaped, its lines kept."""
    return html.escape(text, quote=False).replace("\n", "<br>")


def matrix_notice(text: str, *, thread_root: str | None = None) -> Payload:
    """A plain-text notice (a command's reply); it mentions nobody."""
    content = {
        "msgtype": NOTICE, "body": text, "format": HTML_FORMAT, "formatted_body": notice_html(text), "m.mentions": {},
    }
    return Payload(EVENT_TYPE, in_thread(content, thread_root), KIND)


def matrix_ask(
    owner: Owner, ask: Ask, *, thread_root: str | None = None, templates_dir: str | Path | None = None
) -> Payload:
    """An ask's message: its options numbered and how to answer while it is open, its
    outcome once it ended; an `m.text`, which notifies, that mentions nobody."""
    text = "\n".join(ask_lines(ask, owner, numbered=True, templates_dir=templates_dir))
    content = {
        "msgtype": TEXT, "body": text, "format": HTML_FORMAT, "formatted_body": notice_html(text), "m.mentions": {},
    }
    return Payload(EVENT_TYPE, in_thread(content, thread_root), KIND)


class MatrixRenderers(DestinationRenderers):
    """`channels.drafts.Renderers` for one Matrix destination (room, thread)."""

    THEME = "matrix"

    def __init__(
        self, settings: RenderSettings, thread_root: str | None = None, templates_dir: str | Path | None = None
    ) -> None:
        super().__init__(settings, templates_dir)
        self.thread_root = thread_root

    def draft_with(self, view: View, settings: RenderSettings) -> Payload | None:
        return matrix_draft(view, settings, thread_root=self.thread_root, templates_dir=self.templates_dir)

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        return matrix_answer(markdown, head=head, thread_root=self.thread_root)

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        return matrix_ping(view, needs, thread_root=self.thread_root, templates_dir=self.templates_dir)

    def ask(self, owner: Owner, ask: Ask) -> Payload | None:
        return matrix_ask(owner, ask, thread_root=self.thread_root, templates_dir=self.templates_dir)


__all__ = [
    "KIND",
    "MatrixRenderers",
    "in_thread",
    "matrix_answer",
    "matrix_ask",
    "matrix_draft",
    "matrix_notice",
    "matrix_ping",
    "notice_html",
]
