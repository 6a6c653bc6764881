"""What the Discord adapter sends, as `Payload`s with their fallbacks — every decision
about how a Discord message looks, the fallbacks included, is made here.

- A draft: Components V2 (`kind` "components"), falling back to a plain `content`
  message (`kind` "content") when Discord refuses the components; only the plain
  message where the settings say `richMessages = false`. A message of one
  kind is never edited into the other (Discord cannot take `IS_COMPONENTS_V2` off a
  message): the shared lifecycle replaces it.
- A final answer: one `content` message per part of the one answer splitter.
- A `/progresscast card` snapshot: the progress draft, also when the mode shows none.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.needs import Need
from ..model.view import View
from .discord import content_message, escape, render_content, render_discord, render_discord_final_answer
from .ending import ping_text
from .payload import Payload, present
from .renderers import DestinationRenderers
from .templates import theme

COMPONENTS = "components"
CONTENT = "content"


def _payload(call: dict[str, Any] | None) -> Payload | None:
    if call is None:
        return None
    params = dict(call["params"])
    kind = COMPONENTS if "components" in params else CONTENT
    fallback = call.get("fallback")
    return Payload(str(call["method"]), params, kind, (lambda: _payload(fallback)) if fallback else None)


def discord_draft(view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None) -> Payload | None:
    """The draft for this view in a destination with these settings (None: no draft):
    Components V2 when `settings.rich` (richMessages), else the plain message."""
    if settings.rich:
        return _payload(render_discord(view, settings, templates_dir=templates_dir))
    return _payload(render_content(view, settings, templates_dir=templates_dir))


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


__all__ = [
    "COMPONENTS", "CONTENT", "DiscordRenderers", "discord_answer", "discord_draft", "discord_ping",
]
