"""How a draft behaves towards the people in its destination — the settings, and the
pure checks `drafts.decide` makes with them:

- **pings**: a separate, notifying message when the card starts to need a person (a
  step becomes blocked, the run waits for input, the run fails; `done` where the
  answer is not a message of its own), once per need for as long as it lasts, every
  need that is new at once in one ping (`fresh_needs`);
- **at the bottom**: when someone else's message landed below the draft, the next
  update reposts the draft under it, at most once per `repost_interval` (`buried`).
  Which message came later is told by their ids where a platform's ids grow
  (Telegram, Slack, Discord); where they say nothing of order (Matrix's event ids),
  the mark heard of someone else's message is when it was posted, in milliseconds
  since the epoch, and it is below the draft when it was posted after the draft's
  message was sent (`DraftState.sent_at`);
- **no flash**: a run's first draft waits `start_delay` from the run's start.

Durations are seconds of real time: the configured ones times the time scale.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from ...config.base import Mode, StreamingSettings
from ...model.needs import DEFAULT_NOTIFY, Need, Notify, needs
from ...model.view import View
from .outcome import MessageId
from .state import DraftState


@dataclass(frozen=True)
class Conduct:
    """One destination's settings of it."""

    notify: frozenset[Notify] = frozenset(DEFAULT_NOTIFY)
    start_delay: float = 1.5
    repost_interval: float = 10.0
    stay_at_bottom: bool = True


def conduct_of(streaming: StreamingSettings, notify: Sequence[Notify], scale: float = 1.0) -> Conduct:
    """The conduct a channel's settings ask for (`notify`: the destination's own list,
    else the channel's), on the time scale `scale`."""
    return Conduct(
        notify=frozenset(notify),
        start_delay=streaming.startDelay * scale,
        repost_interval=streaming.repostInterval * scale,
        stay_at_bottom=streaming.stayAtBottom,
    )


def fresh_needs(state: DraftState, view: View, conduct: Conduct, mode: Mode) -> tuple[tuple[str, ...], list[Need]]:
    """What was pinged and still needs a person (what passed is forgotten, so it pings
    again when it comes back), and what newly needs a person and is to be pinged here."""
    current = needs(view)
    keys = {n.key for n in current}
    kept = tuple(k for k in state.pinged if k in keys)
    fresh = [
        n for n in current
        if n.key not in kept
        and n.kind in conduct.notify
        # A completed run's answer is a message of its own in progress/off mode.
        and (n.kind is not Notify.done or mode in (Mode.partial, Mode.block))
    ]
    return kept, fresh


def all_needs(view: View) -> tuple[str, ...]:
    """Every need of the view, as announced (the line that ends a run names them)."""
    return tuple(n.key for n in needs(view))


def newer(message: MessageId, than: MessageId) -> bool:
    """Does `message` come after `than` in its destination? Telegram's ids grow; Slack's
    `ts` are decimal seconds."""
    if isinstance(message, int) and isinstance(than, int):
        return message > than
    try:
        return Decimal(str(message)) > Decimal(str(than))
    except InvalidOperation:
        return False


def under(state: DraftState, below: MessageId, ordered_ids: bool = True) -> bool:
    """Did someone else's message, heard as `below`, land under the draft's message?
    `ordered_ids`: `below` is the message's id, compared with the draft's; otherwise
    it is when the message was posted (ms since the epoch), compared with when the
    draft's message was sent. The send's time is taken as the request leaves: a
    message posted while it was on its way counts as below (one needless move,
    never two: the move is sent after the message was heard)."""
    if state.message_id is None:
        return False
    if ordered_ids:
        return newer(below, state.message_id)
    return isinstance(below, int) and below / 1000 > state.sent_at


def buried(
    state: DraftState, below: MessageId | None, conduct: Conduct, now: float, ordered_ids: bool = True
) -> bool:
    """Did someone else's message land below the draft, and may it move to the bottom now?"""
    return (
        conduct.stay_at_bottom
        and below is not None
        and under(state, below, ordered_ids)
        and now >= state.reposted_at + conduct.repost_interval
    )


__all__ = ["Conduct", "all_needs", "buried", "conduct_of", "fresh_needs", "newer", "under"]
