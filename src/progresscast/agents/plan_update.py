"""Replacing the plan of a card while keeping its Markdown note.

A harness (`update_plan`, the hooks) hands over only a plan; the note on the card was
written by someone else (`progress_card`, the CLI) and must survive. So the write is a
read-modify-write: read the note and the revision, write plan + note with
`expectedRevision`, and start over when another write came in between — a concurrent
write is never overwritten with a stale note.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..model.card import CardInput, Step, WriteResult
from .sinks import CardSink, Conflict, SinkError

MAX_ATTEMPTS = 10


async def replace_plan(sink: CardSink, steps: Sequence[Step]) -> WriteResult:
    """Write `steps` as the card's plan, keeping its note (see the module doc)."""
    known: int | None = None
    for _ in range(MAX_ATTEMPTS):
        snapshot = await sink.snapshot()
        # A gateway read of an empty card does not say its revision; the last conflict did.
        expected = snapshot.revision if snapshot.revision is not None else (known or 0)
        card = CardInput(plan=list(steps), markdown=snapshot.markdown)
        try:
            return await sink.put(card, expected_revision=expected)
        except Conflict as exc:
            known = exc.revision
    raise SinkError(f"the card kept changing during {MAX_ATTEMPTS} attempts to update its plan; try again")
