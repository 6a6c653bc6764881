"""What in a view needs a person — the facts a ping announces and a run's end names.

Each need has a `key` that stays the same for as long as the need lasts: a blocked
step by its text, the wait for input as one key, a failed (or completed) run by its
id. A channel pings once per key and forgets the key when the need passes, so the same
step blocked again later pings again.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from .card import Status
from .view import RunState, View


class Notify(StrEnum):
    """What a separate, notifying message (a ping) is sent for (`notify`)."""

    blocked = "blocked"
    """A step becomes blocked."""
    input = "input"
    """The run waits for a person's input or authorization."""
    failed = "failed"
    """The run fails."""
    done = "done"
    """The run completes — only where its answer is not a message of its own (`partial`,
    `block`): elsewhere the answer (or the line that ends the run) already notifies."""


DEFAULT_NOTIFY = (Notify.blocked, Notify.input, Notify.failed)


@dataclass(frozen=True)
class Need:
    kind: Notify
    key: str
    text: str = ""
    """The blocked step's text, or what the agent waits for; "" for a run's end."""


def needs(view: View) -> list[Need]:
    """What needs a person now, in the order a ping names it: the blocked steps in plan
    order, what the agent waits for, then the run's end (failed, or completed)."""
    out: list[Need] = []
    card = view.card
    seen: set[str] = set()
    for step in (card.plan or ()) if card is not None else ():
        if step.status is Status.blocked and step.step not in seen:
            seen.add(step.step)
            out.append(Need(Notify.blocked, f"blocked:{step.step}", step.step))
    if view.activity.attention:
        out.append(Need(Notify.input, "input", view.activity.attention))
    if view.run_id is not None and view.run is RunState.failed:
        out.append(Need(Notify.failed, f"failed:{view.run_id}"))
    elif view.run_id is not None and view.run is RunState.completed:
        out.append(Need(Notify.done, f"done:{view.run_id}"))
    return out


__all__ = ["DEFAULT_NOTIFY", "Need", "Notify", "needs"]
