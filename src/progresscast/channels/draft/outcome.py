"""What the reply to one API call means, whatever the channel.

A channel's client turns every reply (or exception) into an `Outcome`; the shared
draft lifecycle (`drafts.apply`) and the worker act on its `kind` only:

| kind | meaning | what follows |
| --- | --- | --- |
| `ok` | done (a send carries the new message id) | remembered as shown |
| `not_modified` | the message already shows this content | as good as `ok` |
| `gone` | no such message (deleted, bad id) | a new draft replaces it |
| `locked` | the message exists but may not be edited (not ours, too old) | a new draft replaces it |
| `refused_content` | the channel refuses this content (markup, blocks, size) | the payload's fallback is shown |
| `unsupported` | the channel lacks what this payload uses (rich messages) | switched off for the bot |
| `rate_limited` | too many calls; nothing was applied | wait `retry_after`, then the newest content |
| `transient` | surely never applied (connection refused, no free connection) | retried with backoff |
| `unsure` | may have been applied (timeout after sending, 5xx) | edits retried; a first send is probed |
| `refused` | refused for good (a bad request) | not tried again until the content changes |
| `forbidden` | the destination refuses the bot (blocked, kicked, archived, not a member) | the destination is paused |

Probing for an unsure send answers `found` (it landed as `message_id`), `absent`
(nothing of ours landed there), or `foreign` (someone else's message: look further).
"""

from __future__ import annotations

from collections.abc import Collection, Hashable, Sequence
from dataclasses import dataclass
from enum import StrEnum


class OutcomeKind(StrEnum):
    ok = "ok"
    not_modified = "not_modified"
    gone = "gone"
    locked = "locked"
    refused_content = "refused_content"
    unsupported = "unsupported"
    rate_limited = "rate_limited"
    transient = "transient"
    unsure = "unsure"
    refused = "refused"
    forbidden = "forbidden"
    found = "found"
    absent = "absent"
    foreign = "foreign"


MessageId = int | str
"""A message's id in its destination: Telegram's integer, Slack's `ts`."""


@dataclass(frozen=True)
class Outcome:
    kind: OutcomeKind
    message_id: MessageId | None = None
    retry_after: float = 0.0
    detail: str = ""

    @property
    def delivered(self) -> bool:
        return self.kind in (OutcomeKind.ok, OutcomeKind.not_modified)

    @property
    def retryable(self) -> bool:
        """Nothing decided: the same call (with the newest content) is made again later."""
        return self.kind in (OutcomeKind.rate_limited, OutcomeKind.transient, OutcomeKind.unsure)


CodeTable = Sequence[tuple[OutcomeKind, Collection[Hashable]]]
"""A platform's error codes for each kind of outcome, looked up in order."""


def kind_of(code: Hashable, table: CodeTable) -> OutcomeKind | None:
    """The first kind whose codes hold `code` (None: no kind names it)."""
    return next((kind for kind, codes in table if code in codes), None)


def looked_for(failed: Outcome) -> Outcome:
    """What a failed look for an unsure send answers: the same call later when nothing
    was decided, else `absent` (a refused look, say for want of a permission to read
    history: the send that follows either lands or is refused in turn)."""
    return failed if failed.retryable else Outcome(OutcomeKind.absent, detail=failed.detail)


__all__ = ["CodeTable", "MessageId", "Outcome", "OutcomeKind", "kind_of", "looked_for"]
