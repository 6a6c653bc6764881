"""What a platform's command transport hands the shared handler (`channels.commands`)
and gets back: one `Invocation` per command, a `Reply`, the platform's `Surface` (how
it writes commands), and optionally `Places` (where it makes follows). `ChatAct` is
what a command shares with a press (`channels.asks.Press`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from ...model.owners import Owner
from ...model.view import View
from ..state.ids import DraftKey, Id

MayChange = Callable[[], Awaitable[bool]]


async def _yes() -> bool:
    return True


@dataclass(frozen=True)
class ChatAct:
    """A person acting in a destination, as a platform's transport received it: what a
    command (`Invocation`) and a press or typed answer (`channels.asks.Press`) share."""

    platform: str
    destination: Id
    thread: Id
    user: str
    group: bool = field(default=False, kw_only=True)
    """Several people can read the destination: whether they may act is then asked."""
    may_change: MayChange = field(default=_yes, compare=False, kw_only=True)


@dataclass(frozen=True)
class Invocation(ChatAct):
    """One command, as a platform's transport received it."""

    word: str
    args: tuple[str, ...] = ()


@dataclass(frozen=True)
class Reply:
    text: str
    urgent: bool = True
    """False for answers to destinations without a grant: they queue behind the drafts
    when the bot-wide budget binds."""


@dataclass(frozen=True)
class Surface:
    """How a platform writes its commands and names its things, for the replies."""

    prefix: str = "/"
    """What comes before a command word: "/" (`/follow`), "/progresscast " (Slack)."""
    noun: str = "chat"
    """What a destination is called: chat, channel, room."""
    rich_name: str = "rich messages"
    rich_help: str = "rich messages with checkboxes"
    rich_on_note: str = ""
    """Said after `rich on` (Slack: follows open a thread of their own)."""
    rich_refused_note: str = " This server does not support them, so drafts stay classic."


class Places(Protocol):
    """Where a platform makes a follow other than where it was asked (Slack's plan
    display streams in a thread of its own). Optional."""

    async def follow_elsewhere(self, inv: Invocation, owner: Owner, view: View) -> bool:
        """Take the follow (True), or leave it to be made where it was asked (False)."""
        ...

    def opening(self, destination: Id, owner: Owner) -> bool:
        """Is a follow of `owner` still being made there (it counts as followed)?"""
        ...

    async def unfollowed(self, key: DraftKey) -> None:
        """A follow ended: forget what the platform kept for it."""
        ...


def cached_check(check: MayChange, cache: dict[object, tuple[float, bool]], key: object, *, ttl: float,
                 clock: Callable[[], float]) -> MayChange:
    """`check`, answered from `cache` for `ttl` seconds (an administrator check that
    costs an API call, asked for every changing command in a group)."""

    async def cached() -> bool:
        now = clock()
        hit = cache.get(key)
        if hit is not None and now - hit[0] < ttl:
            return hit[1]
        result = await check()
        if len(cache) >= 10_000:
            cache.clear()  # a bound, not a policy: the next checks ask again
        cache[key] = (now, result)
        return result

    return cached


__all__ = ["ChatAct", "Invocation", "MayChange", "Places", "Reply", "Surface", "cached_check"]
