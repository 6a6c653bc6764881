"""What one decision about a draft reads, and what of it the decision depends on: the
inputs a lane compares to know whether a draft needs deciding again at all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...model.needs import Need
from ...model.view import View
from ...render.payload import Payload
from ..draft.decide import Renderers
from ..draft.outcome import MessageId
from ..draft.state import DraftState
from ..state import DraftKey

Settled = dict[DraftKey, tuple[DraftState, tuple[object, ...]]]
"""Per draft: the stored state and the inputs (`inputs_of`) it was last settled with."""


class RenderedOnce:
    """A destination's renderers, rendering each view (and answer) once: the decision
    after a call looks at the same view again."""

    def __init__(self, renderers: Renderers) -> None:
        self.inner = renderers
        self.mode = renderers.mode
        self._drafts: list[tuple[View, Payload | None]] = []
        self._answers: dict[tuple[str, str | None], list[Payload]] = {}

    def draft(self, view: View) -> Payload | None:
        for seen, payload in self._drafts:
            if seen is view:
                return payload
        payload = self.inner.draft(view)
        self._drafts.append((view, payload))
        return payload

    def snapshot(self, view: View) -> Payload | None:
        return self.inner.snapshot(view)

    def answer(self, markdown: str, head: str | None = None) -> list[Payload]:
        if (markdown, head) not in self._answers:
            self._answers[markdown, head] = self.inner.answer(markdown, head)
        return self._answers[markdown, head]

    def end_line(self, view: View) -> str | None:
        return self.inner.end_line(view)

    def ping(self, view: View, needs: Sequence[Need]) -> Payload | None:
        return self.inner.ping(view, needs)


@dataclass(frozen=True)
class DraftRead:
    """Everything one decision about a draft reads."""

    key: DraftKey
    state: DraftState
    following: bool
    view: View
    renderers: RenderedOnce
    below: MessageId | None = None
    """The newest message someone else posted in the draft's thread (`ChannelState.heard`)."""
    mark: int = 0
    """The destination's newest message id when this was read (`ChannelState.last_message`):
    a first send's mark, above which a probe looks for it."""


_CARD = 1
"""Where `inputs_of` puts the card's (revision, write time)."""


def inputs_of(read: DraftRead) -> tuple[object, ...]:
    """What a decision about a draft depends on besides its stored state, compared by
    value: the same inputs and state decide the same. The card by revision and write
    time; the activity last, as tool lines, a headline and a live run's minute are the
    one change that is not urgent (`urgent_change`)."""
    view, renderers = read.view, read.renderers.inner
    card = (view.card.revision, view.card.updatedAt) if view.card is not None else None
    settings = (getattr(renderers, "settings", renderers), getattr(renderers, "recipient", None))
    activity = view.activity
    return (
        read.following, card, view.run, view.run_id, view.paused, view.after_end, view.previous, settings,
        view.asks, view.stop, view.stoppable, view.stop_armed,
        # the minute a live run's times are shown at: with the activity, never urgent
        (activity.headline, activity.tools, activity.answer, activity.attention, view.now),
    )


def urgent_change(read: DraftRead, before: tuple[object, ...], now: tuple[object, ...]) -> bool:
    """Does a change from inputs `before` to `now` go first when the bot-wide budget
    binds? All but one that touches only the activity of a draft already showing this
    card revision (tool lines, a headline), as `DraftProcessor.urgent` decides it."""
    card = read.view.card
    same_card = read.state.message_id is not None and card is not None and card.revision == read.state.revision
    return not (same_card and before[:-1] == now[:-1])


def urgent_event(known: tuple[DraftState, tuple[object, ...]], activity_only: bool) -> bool:
    """`urgent_change` as the change events tell it, before anything is read: `known`
    is what the draft was last settled with, `activity_only` whether only the owner's
    activity changed since (the card, the run and the follow did not)."""
    state, inputs = known
    card = inputs[_CARD]
    same_card = state.message_id is not None and isinstance(card, tuple) and card[0] == state.revision
    return not (same_card and activity_only)


__all__ = ["DraftRead", "RenderedOnce", "Settled", "inputs_of", "urgent_change", "urgent_event"]
