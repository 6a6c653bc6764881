"""What the Discord adapter sends, as `Payload`s with their fallbacks — every decision
about how a Discord message looks, the fallbacks included, is made here.

- A draft: Components V2 (`kind` "components"), falling back to a plain `content`
  message (`kind` "content") when Discord refuses the components; only the plain
  message where the settings say `richMessages = false`. A message of one
  kind is never edited into the other (Discord cannot take `IS_COMPONENTS_V2` off a
  message): the shared lifecycle replaces it.
- A final answer: one `content` message per part of the one answer splitter.
- A `/progresscast card` snapshot: the progress draft, also when the mode shows none.
- On a live run its agent can stop, the draft's Stop button (an action row after the
  container, or under the plain message's text); every draft says its buttons
  (`components`, `[]` for none), as an edit that leaves them out keeps the old ones.
- An ask (`channels.asks`): a plain `content` message that notifies, its agent text
  escaped, with a row of buttons per option (and "Type an answer…", which opens a
  modal, where it takes text) while it is open; once it ended, its outcome and no
  buttons. Plain, not Components V2: nothing in it can be refused, and it needs no
  fallback.
- A press answered with the pressed message's new look (`UPDATE_MESSAGE`): the ask or
  the draft above, of the kind the message already is (`of_kind`).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.asks import MAX_ANSWER_CHARS, STOP_CONTROL, Ask, AskState, option_control, text_control
from ..model.needs import Need
from ..model.owners import Owner
from ..model.view import RunState, View
from .asks import ask_lines, asks_theme, option_label, stop_label
from .discord import (
    IS_COMPONENTS_V2,
    MAX_COMPONENTS,
    MAX_CONTENT,
    content_message,
    count_components,
    escape,
    render_content,
    render_discord,
    render_discord_final_answer,
)
from .ending import ping_text
from .ir import middle_cut
from .payload import Payload, present
from .renderers import DestinationRenderers
from .templates import theme

COMPONENTS = "components"
CONTENT = "content"

ACTION_ROW, BUTTON, TEXT_INPUT = 1, 2, 4
PRIMARY, SECONDARY, DANGER = 1, 2, 4
ROW_BUTTONS = 5
MAX_LABEL = 80
MAX_MODAL_TITLE = 45
MODAL_PREFIX = "pc:m:"
"""A typed answer's modal: `pc:m:<the ask message's id>` (≤ 100 characters)."""
ANSWER_INPUT = "answer"


def _payload(call: dict[str, Any] | None) -> Payload | None:
    if call is None:
        return None
    params = dict(call["params"])
    v2 = bool(int(params.get("flags", 0) or 0) & IS_COMPONENTS_V2)
    fallback = call.get("fallback")
    return Payload(str(call["method"]), params, COMPONENTS if v2 else CONTENT,
                   (lambda: _payload(fallback)) if fallback else None)


def _draft(call: dict[str, Any] | None, stop: dict[str, Any] | None) -> Payload | None:
    """A draft with its buttons: the Stop row `stop`, or none (`components` always
    said, as an edit that leaves it out keeps the buttons the message had)."""
    if call is None:
        return None
    params = dict(call["params"])
    fallback = call.get("fallback")
    rows = [stop] if stop is not None else []
    if params.get("flags", 0) & IS_COMPONENTS_V2:
        if count_components([*params["components"], *rows]) > MAX_COMPONENTS:
            return _draft(fallback, stop)  # no room for the button: the plain message has
        params["components"] = [*params["components"], *rows]
        return Payload(str(call["method"]), params, COMPONENTS, (lambda: _draft(fallback, stop)) if fallback else None)
    return Payload(str(call["method"]), {**params, "components": rows}, CONTENT)


def _button(label: str, custom_id: str, style: int) -> dict[str, Any]:
    return {"type": BUTTON, "style": style, "label": middle_cut(label, MAX_LABEL), "custom_id": custom_id}


def stop_row(view: View, templates_dir: str | Path | None = None) -> dict[str, Any] | None:
    """A live run its agent can stop, not stopped yet: the draft's Stop button."""
    if not view.stoppable or view.run is not RunState.active or view.stop is not None:
        return None
    label = stop_label(view, templates_dir)
    return {"type": ACTION_ROW, "components": [_button(label, STOP_CONTROL, DANGER)]}


def discord_draft(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> Payload | None:
    """The draft for this view in a destination with these settings (None: no draft):
    Components V2 when `settings.rich` (richMessages), else the plain message."""
    stop = stop_row(view, templates_dir)
    if settings.rich:
        return _draft(render_discord(view, settings, templates_dir=templates_dir), stop)
    return _draft(render_content(view, settings, templates_dir=templates_dir), stop)


def discord_ask(owner: Owner, ask: Ask, *, templates_dir: str | Path | None = None) -> Payload:
    """An ask's message: its text escaped, notifying; while open, a button per option
    (five to a row) and "Type an answer…" where it takes text; once ended, no buttons."""
    th = asks_theme(templates_dir)
    # No "reply to answer": the bot reads no messages on Discord; the text button opens a modal.
    lines = [line for line in ask_lines(ask, owner, templates_dir=templates_dir) if line != th.word("reply_hint")]
    text = escape("\n".join(lines))
    buttons: list[dict[str, Any]] = []
    if ask.state is AskState.open:
        buttons = [
            _button(option_label(label), option_control(ask.ask_id, i), PRIMARY if i == 0 else SECONDARY)
            for i, label in enumerate(ask.options)
        ]
        if ask.allow_text:
            buttons.append(_button(th.word("text_button"), text_control(ask.ask_id), SECONDARY))
    rows = [
        {"type": ACTION_ROW, "components": buttons[i : i + ROW_BUTTONS]} for i in range(0, len(buttons), ROW_BUTTONS)
    ]
    params = {**content_message(middle_cut(text, MAX_CONTENT), silent=False), "components": rows}
    return Payload("createMessage", params, CONTENT)


def of_kind(payload: Payload, *, v2: bool) -> Payload | None:
    """`payload` as a message that is (`v2`) or is not Components V2 can show it: the
    payload or the first of its fallbacks of that kind; None when it has none (a message
    is never edited into the other kind)."""
    wanted = COMPONENTS if v2 else CONTENT
    shown: Payload | None = payload
    while shown is not None and shown.kind != wanted:
        shown = shown.fallback()
    return shown


def answer_modal(message_id: str, templates_dir: str | Path | None = None) -> dict[str, Any]:
    """The modal (interaction response type 9) a "Type an answer…" press opens: one
    text input; its `custom_id` names the ask message, as a typed answer replies to it."""
    title = middle_cut(asks_theme(templates_dir).word("text_button"), MAX_MODAL_TITLE)
    label = middle_cut(theme("discord", templates_dir).word("answer_label"), MAX_MODAL_TITLE)
    field = {
        "type": TEXT_INPUT, "custom_id": ANSWER_INPUT, "label": label, "style": 2,
        "min_length": 1, "max_length": MAX_ANSWER_CHARS, "required": True,
    }
    return {"custom_id": f"{MODAL_PREFIX}{message_id}", "title": title,
            "components": [{"type": ACTION_ROW, "components": [field]}]}


def discord_answer(markdown: str, *, head: str | None = None) -> list[Payload]:
    """A run's final answer as normal messages, under `head` (how the run ended; a
    message of its own for an empty answer); [] for an empty answer without one."""
    return present(_payload(call) for call in render_discord_final_answer(markdown, head))


def discord_ping(view: View, needs: Sequence[Need], *, templates_dir: str | Path | None = None) -> Payload | None:
    """The ping for what newly needs a person: a message that notifies, its agent text
    escaped and no mention parsed (`allowed_mentions` empty)."""
    text = ping_text(view, needs, theme("discord", templates_dir))
    if not text:
        return None
    return Payload("createMessage", content_message(escape(text), silent=False), CONTENT)


class DiscordRenderers(DestinationRenderers):
    """`channels.drafts.Renderers` for one Discord destination (a channel or a thread)."""

    THEME = "discord"

    def draft_with(self, view: View, settings: RenderSettings) -> Payload | None:
        return discord_draft(view, settings, templates_dir=self.templates_dir)

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        return discord_answer(markdown, head=head)

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        return discord_ping(view, needs, templates_dir=self.templates_dir)

    def ask(self, owner: Owner, ask: Ask) -> Payload | None:
        return discord_ask(owner, ask, templates_dir=self.templates_dir)


__all__ = [
    "ANSWER_INPUT", "COMPONENTS", "CONTENT", "MODAL_PREFIX", "DiscordRenderers", "answer_modal", "discord_answer",
    "discord_ask", "discord_draft", "discord_ping", "of_kind", "stop_row",
]
