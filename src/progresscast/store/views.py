"""An owner's view as stored: the commands that read it, and the `View` made of their
replies. Shared by `CardStore.view` and reads that add their own commands to the same
round trip (`CardStore.view_with`: a draft's state read with the view it shows)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from ..model.activity import Activity
from ..model.asks import StopMark, asks_of
from ..model.card import Card, Status, Step
from ..model.owners import Owner
from ..model.timing import StepTime, Usage, step_times_of
from ..model.view import TERMINAL, EndedRun, RunState, View
from .keys import Layout

VIEW_REPLIES = 6
"""How many replies `queue_view` adds."""


@lru_cache(maxsize=4096)
def iso(ms: int) -> str:
    """Milliseconds on the store's clock as ISO 8601 (UTC, milliseconds, `Z`)."""
    # Cached: a card is read many times per write (by each draft that follows it).
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def queue_view(pipe: Any, lay: Layout, owner: Owner) -> None:
    """Queue the reads of an owner's view (`Reads`, or a pipeline in a transaction: they agree)."""
    pipe.hgetall(lay.card(owner))
    pipe.hgetall(lay.activity(owner))
    pipe.lrange(lay.tools(owner), 0, -1)
    pipe.hgetall(lay.run(owner))
    pipe.hgetall(lay.asks(owner))
    pipe.exists(lay.stop_armed(owner))


def _step(raw: dict[str, Any]) -> Step:
    # A stored step of the wrong shape still fails here (KeyError, ValueError).
    return _known_step(str(raw["step"]), str(raw["status"]), raw.get("note"))


@lru_cache(maxsize=16_384)
def _known_step(step: str, status: str, note: str | None) -> Step:
    # Validated when it was written: built without validating again, and once for the
    # many reads of a plan whose steps barely change (a read per edit; steps are frozen).
    return Step.model_construct(step=step, status=Status(status), note=note)


@lru_cache(maxsize=4096)
def _plan(raw: str) -> tuple[Step, ...] | None:
    # Parsed once per stored text: a card is read many times per write.
    plan = json.loads(raw)
    return tuple(_step(s) for s in plan) if plan is not None else None


def card_of(owner: Owner, raw: dict[str, str]) -> Card:
    """The stored card's hash as a `Card`."""
    steps: tuple[Step, ...] | None
    if "body" in raw:  # written by an earlier version: both parts in one JSON body
        body = json.loads(raw["body"])
        plan, markdown = body.get("plan"), body.get("markdown")
        steps = tuple(_step(s) for s in plan) if plan is not None else None
    else:
        steps = _plan(raw["plan"]) if "plan" in raw else None
        markdown = raw.get("markdown")
    return Card.model_construct(
        sessionKey=owner.session_key,
        agentId=owner.agent_id,
        displayKey=owner.display_key,
        revision=int(raw["revision"]),
        plan=list(steps) if steps is not None else None,  # a list of its own: the cached steps are shared
        markdown=markdown,
        updatedAt=iso(int(raw["updatedAt"])),
    )


@lru_cache(maxsize=4096)
def _times(raw: str, steps: int) -> tuple[StepTime | None, ...]:
    # Parsed once per stored text: the times change only with a status, read per edit.
    try:
        return step_times_of(json.loads(raw), steps)
    except ValueError:
        return ()


def _usage(raw: str | None) -> Usage | None:
    if not raw:
        return None
    try:
        return Usage.parse(json.loads(raw))
    except ValueError:  # CardError is a ValueError too: a stored shape we do not know
        return None


def _ms(raw: object) -> float | None:
    return int(str(raw)) / 1000 if raw is not None and str(raw).isdigit() else None


def activity_of(fields: dict[str, str], tools: tuple[str, ...]) -> Activity:
    """The stored activity hash and tool lines as an `Activity`."""
    # Validated when it was written, as the card.
    return Activity.model_construct(
        headline=fields.get("headline"), tools=tools, answer=fields.get("answer"), attention=fields.get("attention")
    )


def view_of(owner: Owner, replies: list[Any]) -> View:
    """The view made of `queue_view`'s replies."""
    raw_card, fields, tools, run, asks, armed = replies
    card = card_of(owner, raw_card) if raw_card else None
    state = RunState(run["state"]) if run else RunState.none
    paused = state in TERMINAL or (
        state is RunState.active and card is not None and card.revision <= int(run.get("startRevision", 0))
    )
    after_end = (
        state in TERMINAL and card is not None and "endRevision" in run and card.revision > int(run["endRevision"])
    )
    # The tool lines belong to the finished run, not to a card written after it.
    shown_tools = () if after_end else tuple(tools)
    activity = activity_of(fields, shown_tools)
    previous = None
    if run.get("prevRunId") and run.get("prevState") in RunState.__members__:
        previous = EndedRun(run["prevRunId"], RunState(run["prevState"]), run.get("prevAnswer") or None)
    return View(
        owner=owner,
        card=card,
        activity=activity,
        run=state,
        run_id=run.get("runId"),
        paused=paused,
        after_end=after_end,
        previous=previous,
        started_at=_ms(run.get("startedAt")),
        ended_at=_ms(run.get("endedAt")),
        step_times=_times(raw_card["times"], len(card.plan)) if card and card.plan and "times" in raw_card else (),
        usage=_usage(run.get("usage")),
        asks=asks_of(asks) if asks else (),
        stop=StopMark.from_stored(run.get("stop")),
        stoppable=state is RunState.active and run.get("stoppable") == "1",
        stop_armed=bool(armed) and state is RunState.active,
    )


__all__ = ["VIEW_REPLIES", "activity_of", "card_of", "iso", "queue_view", "view_of"]
