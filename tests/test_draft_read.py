"""channels/lane/draft_read.py: what a lane compares to know whether a draft needs
deciding again, and which changes go first when the bot-wide budget binds."""

from __future__ import annotations

from dataclasses import replace

from progresscast.channels.draft.state import DraftState
from progresscast.channels.lane.draft_read import (
    DraftRead,
    RenderedOnce,
    SettledWith,
    inputs_of,
    urgent_change,
    urgent_event,
)
from progresscast.channels.state.ids import DraftKey
from progresscast.model.view import RunState
from test_drafts import OWNER, Fake, card, view

KEY = DraftKey(42, 0, OWNER)
SHOWN = DraftState(message_id=7, revision=3)
"""A draft showing card revision 3."""
RENDERERS = Fake()
"""One destination's renderers: without settings of their own, compared as themselves."""


def read(state: DraftState = SHOWN, revision: int = 3, **activity: object) -> DraftRead:
    v = view(card(revision, ("Build", "in_progress")), RunState.active, **activity)
    return DraftRead(key=KEY, state=state, following=True, view=v, renderers=RenderedOnce(RENDERERS))


def test_the_same_read_gives_equal_inputs_and_the_activity_alone_is_told_apart() -> None:
    before = inputs_of(read(tools=("grep",)))
    assert inputs_of(read(tools=("grep",))) == before
    tools = inputs_of(read(tools=("grep", "make")))
    assert tools != before and tools.same_but_activity(before)
    assert not inputs_of(read(revision=4)).same_but_activity(before)
    assert not replace(before, following=False).same_but_activity(before)


def test_only_a_change_of_activity_on_the_shown_revision_is_not_urgent() -> None:
    before = inputs_of(read(tools=("grep",)))
    now = read(tools=("grep", "make"))
    assert not urgent_change(now, before, inputs_of(now))
    stepped = read(revision=4)
    assert urgent_change(stepped, before, inputs_of(stepped))  # a new revision
    paused = replace(inputs_of(now), paused=True)
    assert urgent_change(now, before, paused)  # more than the activity
    unsent = read(DraftState(), tools=("grep", "make"))
    assert urgent_change(unsent, before, inputs_of(unsent))  # nothing shown yet


def test_a_change_event_is_urgent_unless_only_the_activity_of_the_shown_revision_changed() -> None:
    settled = SettledWith(SHOWN, inputs_of(read()))
    assert not urgent_event(settled, activity_only=True)
    assert urgent_event(settled, activity_only=False)
    assert urgent_event(SettledWith(replace(SHOWN, revision=2), settled.inputs), activity_only=True)
    no_card = replace(settled.inputs, card_revision=None, card_updated_at=None)
    assert urgent_event(SettledWith(SHOWN, no_card), activity_only=True)
