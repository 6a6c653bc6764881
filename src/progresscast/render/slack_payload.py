"""What the Slack adapter sends, as `Payload`s with their fallbacks — every decision
about how a Slack message looks, the fallbacks included, is made here.

- A draft: Block Kit (`chat.postMessage` with blocks), falling back to its plain text
  when Slack refuses the blocks; or, where the plan display applies (a thread and the
  person it streams to) and the settings ask for it, the plan (`chat.startStream`,
  `chat.stopStream` once the run ended — a new message then opens with
  `chat.startStream` and is stopped by an edit of its own), falling back to Block Kit.
- A final answer: one Block Kit message per part, each falling back to its plain text.
- A `/progresscast card` snapshot: the progress draft, also when the mode shows none.

A draft in a thread carries its `thread_ts`: the adapter then finds an unsure post in
the thread when it looks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.needs import Need
from ..model.view import View
from .ending import ping_text
from .payload import Payload, present
from .renderers import DestinationRenderers
from .slack import escape, render_blocks, render_plan, render_slack_final_answer
from .templates import theme

BLOCKS = "blocks"
PLAN = "plan"
STREAM_METHODS = frozenset({"chat.startStream", "chat.stopStream"})


@dataclass(frozen=True)
class Recipient:
    """Whom a plan display streams to (Slack requires it in channels)."""

    user_id: str
    team_id: str


def _payload(call: dict[str, Any] | None, thread_ts: str | None, recipient: Recipient | None = None) -> Payload | None:
    """A rendered call (`{"method", "params", "fallback"}`) as a Payload, its fallbacks chained."""
    if call is None:
        return None
    params = dict(call["params"])
    if thread_ts:
        params["thread_ts"] = thread_ts
    stream = call["method"] in STREAM_METHODS
    if stream and recipient is not None:
        params["recipient_user_id"] = recipient.user_id
        params["recipient_team_id"] = recipient.team_id
    fallback = call.get("fallback")
    kind = PLAN if stream else BLOCKS
    # A stream cannot be started stopped: a finished plan's new message is started
    # with the same chunks, and stopped by an edit of its own (each call paced).
    opening = Payload("chat.startStream", params, PLAN) if call["method"] == "chat.stopStream" else None
    return Payload(
        str(call["method"]), params, kind, lambda: _payload(fallback, thread_ts) if fallback else None,
        opening=opening,
    )


def slack_draft(
    view: View,
    settings: RenderSettings,
    *,
    thread_ts: str | None = None,
    recipient: Recipient | None = None,
    templates_dir: str | Path | None = None,
) -> Payload | None:
    """The draft for this view with these settings (None: no draft). `settings.rich`
    asks for the plan display: set it only where a stream applies (a thread, and a
    recipient)."""
    if settings.rich and thread_ts and recipient is not None:
        return _payload(render_plan(view, settings, templates_dir=templates_dir), thread_ts, recipient)
    blocks = settings.model_copy(update={"rich": False}) if settings.rich else settings
    return _payload(render_blocks(view, blocks, templates_dir=templates_dir), thread_ts)


def slack_answer(markdown: str, *, head: str | None = None, thread_ts: str | None = None) -> list[Payload]:
    """A run's final answer as normal messages, under `head` (how the run ended; a
    message of its own for an empty answer); [] for an empty answer without one."""
    return present(_payload(call, thread_ts) for call in render_slack_final_answer(markdown, head))


def slack_ping(
    view: View, needs: Sequence[Need], *, thread_ts: str | None = None, templates_dir: str | Path | None = None
) -> Payload | None:
    """The ping for what newly needs a person: its text, mrkdwn-escaped (nothing in it
    can mention anyone)."""
    text = ping_text(view, needs, theme("slack", templates_dir))
    if not text:
        return None
    params: dict[str, Any] = {"text": escape(text)}
    if thread_ts:
        params["thread_ts"] = thread_ts
    return Payload("chat.postMessage", params, BLOCKS)


class SlackRenderers(DestinationRenderers):
    """`channels.drafts.Renderers` for one Slack destination (channel, thread)."""

    THEME = "slack"

    def __init__(
        self,
        settings: RenderSettings,
        thread_ts: str | None = None,
        templates_dir: str | Path | None = None,
        recipient: Recipient | None = None,
    ) -> None:
        super().__init__(settings, templates_dir)
        self.thread_ts = thread_ts
        self.recipient = recipient

    def draft_with(self, view: View, settings: RenderSettings) -> Payload | None:
        return slack_draft(
            view, settings, thread_ts=self.thread_ts, recipient=self.recipient, templates_dir=self.templates_dir
        )

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        return slack_answer(markdown, head=head, thread_ts=self.thread_ts)

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        return slack_ping(view, needs, thread_ts=self.thread_ts, templates_dir=self.templates_dir)

    def snapshot_settings(self) -> RenderSettings:
        """Block Kit: a snapshot is never the plan display."""
        return super().snapshot_settings().model_copy(update={"rich": False})


__all__ = [
    "BLOCKS",
    "PLAN",
    "STREAM_METHODS",
    "Recipient",
    "SlackRenderers",
    "slack_answer",
    "slack_draft",
    "slack_ping",
]
