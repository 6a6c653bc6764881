"""What a channel renderer returns: one API call's content, with its own fallbacks.

A `Payload` is `{"method", "params"}` without destination or message id (the channel's
client adds them and turns a send into an edit for an existing message), the `kind` of
message it makes (a message of one kind cannot be edited into another: Telegram's
classic HTML and rich messages, say), and a *fallback*: what to show instead when the
channel refuses this content (HTML it cannot parse, blocks it does not accept). The
renderer decides the fallback — the channel only reports that it refused — so a
refusal of the same content always ends in the same text, whether it was a draft or a
final answer. A fallback may have a fallback of its own (rich → classic → plain).

The digest says what we *meant* to show: equal digests show the same message. The
fallback takes no part in it, and is computed only when asked for.

A payload may have an *opening*: what a new message is made with when it cannot be
made showing the payload at once (Slack's finished plan display: a stream is started,
and stopped only by a second call). The message is sent as the opening and then
edited to the payload, each call in a slot of its own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


def digest(method: str, params: Mapping[str, Any]) -> str:
    """A stable digest of a rendered payload: equal digests show the same message."""
    blob = json.dumps([method, params], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


@dataclass(frozen=True, eq=False)
class Payload:
    method: str
    params: Mapping[str, Any]
    kind: str = "classic"
    """What kind of message this makes; a message is never edited into another kind."""
    make_fallback: Callable[[], Payload | None] | None = field(default=None, repr=False)
    """What to show when the channel refuses this content (computed only then)."""
    digest: str = field(default="", repr=False)
    opening: Payload | None = field(default=None, repr=False)
    """What a new message is sent as when it cannot show this payload at once (then
    edited to it); None: sent as itself."""

    def __post_init__(self) -> None:
        if not self.digest:
            object.__setattr__(self, "digest", digest(self.method, self.params))

    def fallback(self) -> Payload | None:
        return self.make_fallback() if self.make_fallback is not None else None

    def degraded(self, level: int) -> Payload | None:
        """The payload after `level` refusals: itself at 0, then its fallbacks in turn;
        None when it has no fallback that deep. The digest stays the one meant."""
        shown: Payload | None = self
        for _ in range(level):
            shown = shown.fallback() if shown is not None else None
        return shown

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Payload) and other.digest == self.digest

    def __hash__(self) -> int:
        return hash(self.digest)


def present(payloads: Iterable[Payload | None]) -> list[Payload]:
    """The payloads there are, in order (a rendered call list as messages)."""
    return [p for p in payloads if p is not None]


__all__ = ["Payload", "digest", "present"]
