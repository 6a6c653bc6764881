"""The settings every chat platform shares: the draft's look (`streaming`, `richMessages`),
who may follow what (`access`, per-destination `sessions`), and the destination tables
(`[[channels.telegram.chats]]`, `[[channels.slack.channels]]`, …) — resolved for one
destination in `channels.destinations`, written once for every platform.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from enum import StrEnum
from functools import cached_property
from typing import Annotated, Any, ClassVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from ..model.needs import DEFAULT_NOTIFY, Notify


class Mode(StrEnum):
    off = "off"
    partial = "partial"
    block = "block"
    progress = "progress"


def _from_env(value: str | None) -> str | None:
    if value and value.startswith("env:"):
        return os.environ.get(value[4:]) or None
    return value


EnvSecret = Annotated[str | None, AfterValidator(_from_env)]
"""A secret setting that may be written `"env:NAME"`: read from the environment at
load (None when the variable is unset; `Settings.unset_env` names it)."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


MAX_LINES = 8
"""Default `streaming.progress.maxLines`: the whole progress draft, every line counted."""
MAX_LINE_CHARS = 120
"""Default `streaming.progress.maxLineChars`: longer lines are cut with a middle `…`."""


def _max_lines() -> Any:
    return Field(MAX_LINES, ge=1, le=50)


def _max_line_chars() -> Any:
    return Field(MAX_LINE_CHARS, ge=20, le=4096)


class ProgressSettings(_Model):
    maxLines: int = _max_lines()
    maxLineChars: int = _max_line_chars()


class PreviewSettings(_Model):
    """`streaming.partial` / `streaming.block`: the card's lines under the answer text."""

    checklistLines: int | None = Field(None, ge=1, le=50)
    """At most this many lines of checklist and status; unset: `progress.maxLines`."""


class StreamingSettings(_Model):
    mode: Mode = Mode.progress
    progress: ProgressSettings = Field(default_factory=ProgressSettings)
    partial: PreviewSettings = Field(default_factory=PreviewSettings)
    block: PreviewSettings = Field(default_factory=PreviewSettings)
    blockChars: int = Field(3000, ge=200, le=4000)
    """In `block` mode, a preview past this many characters rotates to a new message."""
    startDelay: float = Field(1.5, ge=0, le=600)
    """Seconds from a run's start before its first draft is sent: a quicker run shows
    only its answer."""
    repostInterval: float = Field(10.0, ge=0, le=86_400)
    """At most one repost of a draft (to the bottom of the chat) per this many seconds."""
    stayAtBottom: bool = True
    """When someone else's message lands below the draft, the next update reposts the
    draft under it (the new one first, then the old one deleted)."""

    def checklist_lines(self, mode: Mode) -> int:
        """The line limit of the card's lines in a draft of `mode`."""
        preview = {Mode.partial: self.partial, Mode.block: self.block}.get(mode)
        if preview is not None and preview.checklistLines is not None:
            return preview.checklistLines
        return self.progress.maxLines


class RenderSettings(_Model):
    """What a renderer needs from the channel settings, for one chat."""

    mode: Mode = Mode.progress
    maxLines: int = _max_lines()
    maxLineChars: int = _max_line_chars()
    checklistLines: int | None = Field(None, ge=1, le=50)
    """`partial`/`block`: the card's lines under the answer; None: `maxLines`."""
    rich: bool = False
    label: str | None = None


class Access(StrEnum):
    """`channels.<platform>.access`: what a destination without a grant gets."""

    pairing = "pairing"
    """Its first command gets a pairing code; nothing else until an operator approves it."""
    allowlist = "allowlist"
    """Only configured destinations; others get one short refusal an hour."""
    open = "open"
    """Any destination may follow any session."""


class DestinationSettings(_Model):
    """One destination's table: its overrides, the sessions it follows from start-up, and
    the sessions it is granted (`sessions`, globs as gateway tokens use them; unset: only
    its own `follow` list)."""

    id: int | str
    richMessages: bool | None = None
    mode: Mode | None = None
    follow: list[str] = Field(default_factory=list)
    sessions: list[str] | None = None
    notify: list[Notify] | None = None
    """What pings this destination (None: the platform's `notify`)."""
    answerers: list[int | str] | None = None
    """User ids who may answer the agents' asks and press Stop here, besides those who
    may change the destination's settings (a group's administrators)."""


class PlatformSettings(_Model):
    """What every `[channels.<platform>]` table has. A platform's settings add its
    connection (token, URLs), its destination tables and its allow list."""

    ALLOW_LIST: ClassVar[str] = "allowed"
    """The allow list's setting (`allowedChats`, `allowedChannels`): named in messages,
    and read for `allow_list`."""
    TABLES: ClassVar[str] = ""
    """The destination tables' setting (`chats`, `channels`, `rooms`); "": none."""

    access: Access | None = None
    """Unset: `allowlist` when the allow list is non-empty, else `pairing`."""
    richMessages: bool = False
    keepOnComplete: bool = False
    notify: list[Notify] = Field(default_factory=lambda: list(DEFAULT_NOTIFY))
    """What a separate, notifying message (a ping) is sent for; per destination: its
    table's `notify`."""
    streaming: StreamingSettings = Field(default_factory=StreamingSettings)

    @property
    def destination_tables(self) -> Sequence[DestinationSettings]:
        """The destination tables (`chats`, `channels`, `rooms`)."""
        tables: Sequence[DestinationSettings] = getattr(self, self.TABLES) if self.TABLES else ()
        return tables

    @cached_property
    def allow_list(self) -> frozenset[Any]:
        """`allowedChats` / `allowedChannels`: each listed destination is granted every session."""
        return frozenset(getattr(self, self.ALLOW_LIST, ()))

    @property
    def access_mode(self) -> Access:
        if self.access is not None:
            return self.access
        return Access.allowlist if self.allow_list else Access.pairing

    # Looked up for every draft: a scan of the tables would make 10,000 configured
    # chats cost 10,000 comparisons per draft.
    @cached_property
    def tables_by_id(self) -> dict[Any, DestinationSettings]:
        """The destination tables by id (the first table of an id wins)."""
        out: dict[Any, DestinationSettings] = {}
        for table in self.destination_tables:
            out.setdefault(table.id, table)
        return out

    def table_of(self, destination: int | str) -> DestinationSettings | None:
        return self.tables_by_id.get(destination)
