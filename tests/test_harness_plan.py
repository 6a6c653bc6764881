"""Harness plans (progress/v1, Codex, todo lists) mapped onto card steps: cut, never refused for length."""

from __future__ import annotations

import pytest

from progresscast.agents.harness_plan import (
    CODEX_PLAN,
    MAX_HARNESS_STEPS,
    MAX_LABEL_CHARS,
    PROGRESS_V1,
    PlanShapeError,
    map_plan,
)
from progresscast.model.card import CardInput, Status


@pytest.mark.parametrize(
    ("state", "status"),
    [
        ("pending", Status.pending),
        ("active", Status.in_progress),
        ("done", Status.completed),
        ("blocked", Status.blocked),
        ("skipped", Status.skipped),
    ],
)
def test_each_progress_v1_state(state: str, status: Status) -> None:
    plan = map_plan([{"label": "Build", "state": state}], PROGRESS_V1, field="steps")
    assert [(s.step, s.status) for s in plan.steps] == [("Build", status)]


def test_labels_cut_at_120_characters_with_multibyte_text() -> None:
    label = "ü" * 119 + "🙂" * 31
    (step,) = map_plan([{"label": label, "state": "pending"}], PROGRESS_V1, field="steps").steps
    assert len(step.step) == MAX_LABEL_CHARS
    assert step.step == "ü" * 119 + "…"
    exact = "🙂" * 120
    (kept,) = map_plan([{"label": exact, "state": "pending"}], PROGRESS_V1, field="steps").steps
    assert kept.step == exact


def test_notes_cut_at_280_characters() -> None:
    (step,) = map_plan(
        [{"label": "A", "state": "done", "note": "é" * 400}], PROGRESS_V1, field="steps"
    ).steps
    assert step.note == "é" * 279 + "…"


def test_steps_past_the_twentieth_are_dropped() -> None:
    items = [{"label": f"Step {i}", "state": "pending"} for i in range(1, 23)]
    plan = map_plan(items, PROGRESS_V1, field="steps")
    assert len(plan.steps) == MAX_HARNESS_STEPS
    assert plan.steps[-1].step == "Step 20"
    assert plan.dropped == 2


def test_a_second_active_step_is_pending() -> None:
    items = [{"label": n, "state": "active"} for n in ("A", "B", "C")]
    plan = map_plan(items, PROGRESS_V1, field="steps")
    assert [s.status for s in plan.steps] == [Status.in_progress, Status.pending, Status.pending]
    assert plan.demoted == 2
    CardInput(plan=list(plan.steps))  # the card's own rules accept it


def test_codex_shape() -> None:
    plan = map_plan(
        [{"step": "Read", "status": "completed"}, {"step": "Write", "status": "in_progress"}],
        CODEX_PLAN,
        field="plan",
    )
    assert [(s.step, s.status) for s in plan.steps] == [
        ("Read", Status.completed),
        ("Write", Status.in_progress),
    ]


def test_cleaning_applies_and_whitespace_folds() -> None:
    (step,) = map_plan(
        [{"label": "\u202eRun\u200b\n tests ", "state": "pending"}], PROGRESS_V1, field="steps"
    ).steps
    assert step.step == "Run tests"


@pytest.mark.parametrize(
    ("items", "field", "rule"),
    [
        ({"label": "A"}, "steps", "must be an array"),
        ("A", "steps", "must be an array"),
        (["A"], "steps[0]", "must be an object"),
        ([{"label": "A", "state": "running"}], "steps[0].state", "must be one of"),
        ([{"label": "A"}], "steps[0].state", "must be one of"),
        ([{"label": 3, "state": "done"}], "steps[0].label", "must be a string"),
        ([{"state": "done"}], "steps[0].label", "must be a string"),
        ([{"label": "\u200b \u200f ", "state": "done"}], "steps[0].label", "must not be empty"),
        ([{"label": "\x00\x1b", "state": "done"}], "steps[0].label", "must not be empty"),
        ([{"label": "A", "state": "done", "note": 5}], "steps[0].note", "must be a string"),
        ([{"label": "\ud800", "state": "done"}], "steps[0].label", "lone surrogates"),
        (
            [{"label": f"S{i}", "state": "done"} for i in range(25)] + [{"label": "", "state": "x"}],
            "steps[25].label",
            "must not be empty",
        ),
    ],
)
def test_wrong_shapes_are_refused_naming_the_field(items: object, field: str, rule: str) -> None:
    with pytest.raises(PlanShapeError) as caught:
        map_plan(items, PROGRESS_V1, field="steps")
    assert caught.value.field == field
    assert rule in caught.value.rule


def test_a_checklist_has_its_first_unfinished_item_in_progress() -> None:
    from progresscast.agents.harness_plan import map_checklist

    items = [{"text": "A", "completed": True}, {"text": "B", "completed": False}, {"text": "C", "completed": False}]
    plan = map_checklist(items, field="items")
    assert [(s.step, s.status) for s in plan.steps] == [
        ("A", Status.completed), ("B", Status.in_progress), ("C", Status.pending)
    ]
    done = map_checklist([{"text": "A", "completed": True}], field="items")
    assert [s.status for s in done.steps] == [Status.completed]


@pytest.mark.parametrize(
    ("items", "field", "rule"),
    [
        ("A", "items", "must be an array"),
        ([{"text": "A", "completed": "yes"}], "items[0].completed", "must be true or false"),
        ([{"text": 3, "completed": False}], "items[0].text", "must be a string"),
        ([{"text": " ", "completed": False}], "items[0].text", "must not be empty"),
    ],
)
def test_a_checklist_of_the_wrong_shape_names_the_field(items: object, field: str, rule: str) -> None:
    from progresscast.agents.harness_plan import map_checklist

    with pytest.raises(PlanShapeError) as raised:
        map_checklist(items, field="items")
    assert (raised.value.field, raised.value.rule) == (field, rule)


def test_gemini_and_claude_shapes() -> None:
    from progresscast.agents.harness_plan import CLAUDE_TASK, CLAUDE_TODO, GEMINI_TODO

    gemini = map_plan(
        [{"description": "A", "status": "cancelled"}, {"description": "B", "status": "blocked"}], GEMINI_TODO, field="todos"
    )
    assert [s.status for s in gemini.steps] == [Status.skipped, Status.blocked]
    todo = map_plan([{"content": "A", "status": "in_progress", "activeForm": "Doing A"}], CLAUDE_TODO, field="todos")
    assert [(s.step, s.status) for s in todo.steps] == [("A", Status.in_progress)]
    task = map_plan([{"subject": "T", "status": "completed"}], CLAUDE_TASK, field="tasks")
    assert [(s.step, s.status) for s in task.steps] == [("T", Status.completed)]
