"""What the Slack adapter sends, as `Payload`s with their fallbacks — every decision
about how a Slack message looks, the fallbacks included, is made here.

- A draft: Block Kit (`chat.postMessage` with blocks), falling back to its plain text
  when Slack refuses the blocks; or, where the plan display applies (a thread and the
  person it streams to) and the settings ask for it, the plan (`chat.startStream`,
  `chat.stopStream` once the run ended — a new message then opens with
  `chat.startStream` and is stopped by an edit of its own), falling back to Block Kit.
- A final answer: one Block Kit message per part, each falling back to its plain text.
- A `/progresscast card` snapshot: the progress draft, also when the mode shows none.
- An ask: a mrkdwn section (agent text escaped: it mentions nobody) and, while it is
  open, an `actions` block of buttons whose `action_id` (and `value`) is the option's
  control id; once it ended, its outcome and no buttons. A live run its agent can stop
  shows a Stop button (`STOP_CONTROL`) under its Block Kit draft.

A draft in a thread carries its `thread_ts`: the adapter then finds an unsure post in
the thread when it looks for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config.base import RenderSettings
from ..model.asks import STOP_CONTROL, Ask, AskState, option_control
from ..model.needs import Need
from ..model.owners import Owner
from ..model.view import RunState, View
from .asks import ask_lines, option_label, stop_label
from .asks import word as ask_word
from .ending import ping_text
from .ir import middle_cut, u16
from .payload import Payload, present
from .renderers import DestinationRenderers
from .slack import MAX_BLOCKS, MAX_TEXT_OBJECT, escape, render_blocks, render_plan, render_slack_final_answer
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


MAX_BUTTON_TEXT = 75
"""Characters of a button's text (Slack's limit)."""


def _button(text: str, control: str) -> dict[str, Any]:
    return {
        "type": "button", "text": {"type": "plain_text", "text": middle_cut(text, MAX_BUTTON_TEXT), "emoji": True},
        "action_id": control, "value": control,
    }


def stop_actions(view: View, templates_dir: str | Path | None = None) -> dict[str, Any] | None:
    """A live run its agent can stop, not stopped yet: the draft's Stop button."""
    if not view.stoppable or view.run is not RunState.active or view.stop is not None:
        return None
    label = stop_label(view, templates_dir)
    return {"type": "actions", "block_id": "pc-stop", "elements": [_button(label, STOP_CONTROL)]}


def _with_actions(call: dict[str, Any] | None, actions: dict[str, Any] | None) -> dict[str, Any] | None:
    """A Block Kit call with an actions block last (within Slack's 50 blocks); without
    one, as it is: an edit always sends its blocks, so a button that should go goes."""
    if call is None or actions is None or "blocks" not in call["params"]:
        return call
    blocks = [*call["params"]["blocks"][: MAX_BLOCKS - 1], actions]
    return {**call, "params": {**call["params"], "blocks": blocks}}


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
    call = _with_actions(render_blocks(view, blocks, templates_dir=templates_dir), stop_actions(view, templates_dir))
    return _payload(call, thread_ts)


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


def _fitting(lines: list[str]) -> str:
    """The lines as one escaped mrkdwn text within a section's limit: the longest line
    is cut (in the middle) until it fits (escapes count, so it is measured escaped)."""
    lines = list(lines)
    while u16(text := escape("\n".join(lines))) > MAX_TEXT_OBJECT:
        i = max(range(len(lines)), key=lambda k: len(lines[k]))
        lines[i] = middle_cut(lines[i], max(1, len(lines[i]) * 9 // 10))
    return text


def slack_ask(
    owner: Owner, ask: Ask, *, thread_ts: str | None = None, templates_dir: str | Path | None = None
) -> Payload:
    """An ask's message: a section of its lines (escaped mrkdwn, so nothing in it
    mentions anyone) and, while it is open, its options as buttons; once it ended, its
    outcome and no buttons. A typed answer is a reply in the message's thread."""
    hint = ask_word("reply_hint", templates_dir)
    lines = [
        theme("slack", templates_dir).word("ask_reply_hint") if line == hint else line
        for line in ask_lines(ask, owner, templates_dir=templates_dir)
    ]
    text = _fitting(lines)
    blocks: list[dict[str, Any]] = [{"type": "section", "text": {"type": "mrkdwn", "text": text}}]
    if ask.state is AskState.open and ask.options:
        blocks.append({
            "type": "actions", "block_id": "pc-ask",
            "elements": [_button(option_label(label), option_control(ask.ask_id, i)) for i, label in
                         enumerate(ask.options)],
        })
    params: dict[str, Any] = {"text": escape(lines[0]), "blocks": blocks, "unfurl_links": False,
                              "unfurl_media": False}
    fallback: dict[str, Any] = {"text": text, "unfurl_links": False, "unfurl_media": False}
    if thread_ts:
        params["thread_ts"] = fallback["thread_ts"] = thread_ts
    return Payload("chat.postMessage", params, BLOCKS, lambda: Payload("chat.postMessage", fallback, BLOCKS))


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

    def ask(self, owner: Owner, ask: Ask) -> Payload | None:
        return slack_ask(owner, ask, thread_ts=self.thread_ts, templates_dir=self.templates_dir)

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
    "slack_ask",
    "slack_draft",
    "slack_ping",
    "stop_actions",
]
