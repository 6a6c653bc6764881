"""What one decision about a draft reads, and what of it the decision depends on: the
inputs a lane compares to know whether a draft needs deciding again at all."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from ...model.asks import Ask, StopMark
from ...model.needs import Need
from ...model.view import EndedRun, RunState, View
from ...render.payload import Payload
from ..draft.decide import Renderers
from ..draft.outcome import MessageId
from ..draft.state import DraftState
from ..state.ids import DraftKey


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
    """The newest message someone else posted in the draft's thread (`MessageIds.heard`)."""
    mark: int = 0
    """The destination's newest message id when this was read (`MessageIds.last`):
    a first send's mark, above which a probe looks for it."""


@dataclass(frozen=True, slots=True)
class ActivityInputs:
    """The activity a draft shows, and the minute a live run's times are shown at: the
    one change that is not urgent (`urgent_change`)."""

    headline: str | None
    tools: tuple[str, ...]
    answer: str | None
    attention: str | None
    minute: float | None
    """`View.now`: a live run's times move with it."""


@dataclass(frozen=True, slots=True)
class DraftInputs:
    """What a decision about a draft depends on besides its stored state, compared by
    value: the same inputs and state decide the same."""

    following: bool
    card_revision: int | None
    """The card by revision and write time (None: no card)."""
    card_updated_at: str | None
    run: RunState
    run_id: str | None
    paused: bool
    after_end: bool
    previous: EndedRun | None
    settings: object
    """The renderers' settings (the renderers themselves when they have none)."""
    recipient: object
    """Whom the renderers stream to (Slack's plan display; None: nobody)."""
    asks: tuple[Ask, ...]
    stop: StopMark | None
    stoppable: bool
    stop_armed: bool
    activity: ActivityInputs

    def same_but_activity(self, other: DraftInputs) -> bool:
        """Equal in everything but `activity`."""
        return replace(self, activity=other.activity) == other


@dataclass(frozen=True, slots=True)
class SettledWith:
    """What a draft was last settled with: its stored state and its inputs."""

    state: DraftState
    inputs: DraftInputs


Settled = dict[DraftKey, SettledWith]
"""Per draft: what it was last settled with."""


def inputs_of(read: DraftRead) -> DraftInputs:
    """What a decision about a draft depends on besides its stored state (`DraftInputs`)."""
    view, renderers = read.view, read.renderers.inner
    activity = view.activity
    return DraftInputs(
        following=read.following,
        card_revision=view.card.revision if view.card is not None else None,
        card_updated_at=view.card.updatedAt if view.card is not None else None,
        run=view.run, run_id=view.run_id, paused=view.paused, after_end=view.after_end, previous=view.previous,
        settings=getattr(renderers, "settings", renderers), recipient=getattr(renderers, "recipient", None),
        asks=view.asks, stop=view.stop, stoppable=view.stoppable, stop_armed=view.stop_armed,
        activity=ActivityInputs(
            headline=activity.headline, tools=activity.tools, answer=activity.answer, attention=activity.attention,
            minute=view.now,
        ),
    )


def urgent_change(read: DraftRead, before: DraftInputs, now: DraftInputs) -> bool:
    """Does a change from inputs `before` to `now` go first when the bot-wide budget
    binds? All but one that touches only the activity of a draft already showing this
    card revision (tool lines, a headline), as `DraftProcessor.urgent` decides it."""
    card = read.view.card
    same_card = read.state.message_id is not None and card is not None and card.revision == read.state.revision
    return not (same_card and before.same_but_activity(now))


def urgent_event(known: SettledWith, activity_only: bool) -> bool:
    """`urgent_change` as the change events tell it, before anything is read: `known`
    is what the draft was last settled with, `activity_only` whether only the owner's
    activity changed since (the card, the run and the follow did not)."""
    revision = known.inputs.card_revision
    same_card = known.state.message_id is not None and revision is not None and revision == known.state.revision
    return not (same_card and activity_only)


__all__ = [
    "ActivityInputs", "DraftInputs", "DraftRead", "RenderedOnce", "Settled", "SettledWith", "inputs_of",
    "urgent_change", "urgent_event",
]
