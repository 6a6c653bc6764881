"""What the emulated Slack workspace remembers: channels, the messages they show, calls."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from typing import Any

from ._answered import Answered
from ._shown import ShownMessages
from .slack_blocks import Shown, blocks_text, read_mrkdwn


class SlackError(Exception):
    """A Web API failure, answered as ``{"ok": false, "error": …}`` (HTTP 200 unless ``status``)."""

    def __init__(self, error: str, status: int = 200, *, headers: dict[str, str] | None = None, **extra: Any) -> None:
        super().__init__(error)
        self.error = error
        self.status = status
        self.headers = headers or {}
        self.extra = extra

    def envelope(self) -> dict[str, Any]:
        return {"ok": False, "error": self.error, **self.extra}


@dataclass
class SlackCall(Answered):
    """One request the app made, as the emulator answered it."""

    method: str
    channel: str | None
    params: dict[str, Any]
    error: str | None = None
    """Slack's error string; None when the call succeeded."""
    result: dict[str, Any] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class Task:
    """One task of a plan display, as last updated."""

    id: str
    title: str
    status: str
    details: str | None = None
    output: str | None = None


@dataclass
class SlackMessage:
    """A message as the channel shows it now."""

    ts: str
    channel: str
    user: str
    """The author: the bot user, or a person."""
    text: str = ""
    """The `text` parameter as sent (mrkdwn)."""
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    bot_id: str | None = None
    edits: int = 0
    editable: bool = True
    streaming: bool = False
    """A stream started with chat.startStream and not yet stopped."""
    stream: bool = False
    """Made by chat.startStream (a plan display or streamed text)."""
    task_display_mode: str | None = None
    plan_title: str | None = None
    tasks: dict[str, Task] = field(default_factory=dict)
    markdown: str = ""
    """Markdown text appended to a stream."""
    recipient_user_id: str | None = None
    recipient_team_id: str | None = None
    reply_broadcast: bool = False
    """A thread reply also shown in the channel (`reply_broadcast`)."""

    @property
    def from_bot(self) -> bool:
        return self.bot_id is not None

    def shown(self) -> Shown:
        """What a person reads: the blocks if there are any, else the text; a stream
        shows its plan (``[status] title — details``) and its markdown."""
        if self.stream:
            out = Shown()
            if self.plan_title:
                out.extend(Shown(self.plan_title))
            for task in self.tasks.values():
                line = f"[{task.status}] {task.title}"
                if task.details:
                    line += f" — {task.details}"
                if task.output:
                    line += f" ({task.output})"
                out.extend(Shown(line))
            if self.markdown:
                out.extend(Shown(self.markdown))
            if self.blocks:
                out.extend(blocks_text(self.blocks))
            return out
        return blocks_text(self.blocks) if self.blocks else read_mrkdwn(self.text)

    @property
    def visible_text(self) -> str:
        return self.shown().text

    def to_api(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "message", "ts": self.ts, "user": self.user, "text": self.text}
        if self.bot_id:
            out["bot_id"] = self.bot_id
            out["app_id"] = "A0PROGRESS"
        if self.blocks:
            out["blocks"] = self.blocks
        if self.thread_ts:
            out["thread_ts"] = self.thread_ts
        if self.reply_broadcast:
            out["subtype"] = "thread_broadcast"
        if self.edits:
            out["edited"] = {"user": self.user, "ts": self.ts}
        return out


@dataclass
class SlackChannel(ShownMessages[str, SlackMessage]):
    """A channel; its ``messages`` are by ts, replies included."""

    id: str
    name: str
    archived: bool = False
    """Archived: every call in it answers `is_archived`."""
    app_member: bool = True
    """False once the app was removed from it: every call answers `not_in_channel`."""

    def visible(self, *, include_people: bool = False, thread_ts: str | None = None) -> list[SlackMessage]:
        """The app's messages still present, oldest first (people's too on request);
        with ``thread_ts``, only that thread's replies."""
        out = self.present(others=include_people)
        if thread_ts is not None:
            out = [m for m in out if m.thread_ts == thread_ts and m.ts != thread_ts]
        return out

    def texts(self, *, thread_ts: str | None = None) -> list[str]:
        """Visible text of each app message still present, oldest first."""
        return [m.visible_text for m in self.visible(thread_ts=thread_ts)]


_counter = itertools.count(1)


def new_ts() -> str:
    """A message timestamp like Slack's (`seconds.micro`), unique and increasing."""
    return f"{int(time.time())}.{next(_counter):06d}"
