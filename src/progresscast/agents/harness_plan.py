"""Plans in a harness's own shape, mapped onto the card's plan.

A2A agents (the `progress/v1` extension), the `update_plan` tool and the agent hooks
all hand over a plan in their own words: a list of items with a label, a state and
maybe a note. They are cut to fit, never refused for length — labels to 120
characters and notes to 280, both ending in `…`, at most 20 steps (later ones
dropped), a second in-progress step demoted to pending — because the harness wrote
them for itself, not for us. A list of the wrong *shape* (not a list, an unknown
state, a non-string, a label empty after cleaning) is refused with a `PlanShapeError`
naming the field and the rule. Pure: nothing here touches Redis.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model.card import (
    MAX_NOTE_CHARS,
    SURROGATE_RULE,
    CardError,
    Status,
    Step,
    clean_text,
    cut,
    has_lone_surrogate,
    shows_nothing,
)

MAX_HARNESS_STEPS = 20
MAX_LABEL_CHARS = 120

PROGRESS_V1_STATES: Mapping[str, Status] = {
    "pending": Status.pending,
    "active": Status.in_progress,
    "done": Status.completed,
    "blocked": Status.blocked,
    "skipped": Status.skipped,
}
"""The `progress/v1` states (A2A metadata and the `update_plan` tool's own shape)."""

TODO_STATES: Mapping[str, Status] = {
    "pending": Status.pending,
    "in_progress": Status.in_progress,
    "completed": Status.completed,
}
"""Codex `update_plan` and Claude Code `TodoWrite` / Task tools statuses."""

GEMINI_TODO_STATES: Mapping[str, Status] = {
    **TODO_STATES,
    "cancelled": Status.skipped,
    "blocked": Status.blocked,
}
"""Gemini CLI `write_todos` statuses: a cancelled item is shown as skipped."""


class PlanShapeError(CardError):
    """A harness plan whose shape is wrong: nothing of it may be applied."""


@dataclass(frozen=True)
class HarnessPlan:
    steps: tuple[Step, ...]
    dropped: int = 0
    """Steps past the 20th, left out."""
    demoted: int = 0
    """In-progress steps after the first, shown as pending."""


@dataclass(frozen=True)
class ItemShape:
    """Where one harness keeps an item's label, state and note, and what its states mean."""

    label: str
    state: str
    states: Mapping[str, Status]
    note: str | None = None


PROGRESS_V1 = ItemShape(label="label", state="state", note="note", states=PROGRESS_V1_STATES)
CODEX_PLAN = ItemShape(label="step", state="status", states=TODO_STATES)
CLAUDE_TODO = ItemShape(label="content", state="status", states=TODO_STATES)
"""Claude Code `TodoWrite`: `{todos: [{content, status, activeForm}]}`."""
CLAUDE_TASK = ItemShape(label="subject", state="status", states=TODO_STATES)
"""Claude Code Task tools (`TaskCreate` / `TaskUpdate`): one task per call, `subject` + `status`."""
GEMINI_TODO = ItemShape(label="description", state="status", states=GEMINI_TODO_STATES)
"""Gemini CLI `write_todos`: `{todos: [{description, status}]}`."""


def map_plan(items: Any, shape: ItemShape, *, field: str) -> HarnessPlan:
    """Map a harness's list of items onto plan steps, cut to fit (see the module doc)."""
    if not isinstance(items, list):
        raise PlanShapeError(field, "must be an array")
    steps: list[Step] = []
    demoted = 0
    active_seen = False
    for index, item in enumerate(items):
        where = f"{field}[{index}]"
        label, status, note = _item(item, shape, where)
        if index >= MAX_HARNESS_STEPS:
            continue  # checked for shape like the rest, then dropped
        if status is Status.in_progress:
            if active_seen:
                status = Status.pending
                demoted += 1
            active_seen = True
        steps.append(Step(step=label, status=status, note=note))
    return HarnessPlan(
        steps=tuple(steps), dropped=max(0, len(items) - MAX_HARNESS_STEPS), demoted=demoted
    )


def map_checklist(items: Any, *, field: str) -> HarnessPlan:
    """A checklist of `{text, completed}` items (Codex's `todo_list`), where the first
    item not completed is the one in progress, mapped like any other plan."""
    if not isinstance(items, list):
        raise PlanShapeError(field, "must be an array")
    as_plan: list[Any] = []
    active_seen = False
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise PlanShapeError(f"{field}[{index}]", "must be an object")
        completed = item.get("completed")
        if not isinstance(completed, bool):
            raise PlanShapeError(f"{field}[{index}].completed", "must be true or false")
        status = "completed" if completed else ("pending" if active_seen else "in_progress")
        active_seen = active_seen or not completed
        as_plan.append({"step": item.get("text"), "status": status})
    try:
        return map_plan(as_plan, CODEX_PLAN, field=field)
    except PlanShapeError as exc:
        # Name the checklist's own field (`text`), not the one it was mapped to.
        raise PlanShapeError(exc.field.replace(".step", ".text"), exc.rule) from None


def _item(item: Any, shape: ItemShape, where: str) -> tuple[str, Status, str | None]:
    if not isinstance(item, dict):
        raise PlanShapeError(where, "must be an object")
    label = _text(item.get(shape.label), f"{where}.{shape.label}")
    label = clean_label(label)
    if shows_nothing(label):
        raise PlanShapeError(f"{where}.{shape.label}", "must not be empty")
    state = item.get(shape.state)
    if not isinstance(state, str) or state not in shape.states:
        names = ", ".join(shape.states)
        raise PlanShapeError(f"{where}.{shape.state}", f"must be one of {names}")
    note: str | None = None
    if shape.note is not None and item.get(shape.note) is not None:
        raw_note = _text(item[shape.note], f"{where}.{shape.note}")
        note = cut(" ".join(clean_text(raw_note).split()), MAX_NOTE_CHARS) or None
    return label, shape.states[state], note


def _text(value: Any, field: str) -> str:
    if not isinstance(value, str):
        raise PlanShapeError(field, "must be a string")
    if has_lone_surrogate(value):
        raise PlanShapeError(field, SURROGATE_RULE)
    return value


def clean_label(text: str) -> str:
    """A harness label as a step: cleaned, one line, at most 120 characters."""
    return cut(" ".join(clean_text(text).split()), MAX_LABEL_CHARS)
