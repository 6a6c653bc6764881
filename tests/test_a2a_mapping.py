"""The pure A2A mapping: states, truncation, owners, plans of the wrong shape."""

from __future__ import annotations

import pytest

from a2a_updates import artifact, snapshot, status, steps, ts
from progresscast.agents.a2a.mapping import (
    EXTENSION_URI,
    AnswerChunk,
    Kind,
    StatusChange,
    TaskState,
    UpdateError,
    parse_timestamp,
    parse_update,
)
from progresscast.model.card import Status
from progresscast.model.view import RunState


def change(data: object) -> StatusChange:
    got = parse_update(data)
    assert isinstance(got, StatusChange)
    return got


@pytest.mark.parametrize(
    ("state", "status_"),
    [("pending", Status.pending), ("active", Status.in_progress), ("done", Status.completed),
     ("blocked", Status.blocked), ("skipped", Status.skipped)],
)
def test_each_step_state_maps(state: str, status_: Status) -> None:
    got = change(status("t1", plan=[{"label": "x", "state": state}], at=ts(1)))
    assert got.plan is not None and got.plan[0].status is status_


@pytest.mark.parametrize(
    ("state", "end"),
    [("TASK_STATE_COMPLETED", RunState.completed), ("TASK_STATE_FAILED", RunState.failed),
     ("TASK_STATE_REJECTED", RunState.failed), ("TASK_STATE_CANCELED", RunState.canceled),
     ("TASK_STATE_WORKING", None), ("TASK_STATE_SUBMITTED", None), ("TASK_STATE_INPUT_REQUIRED", None)],
)
def test_task_states_end_runs(state: str, end: RunState | None) -> None:
    assert change(status("t1", state, at=ts(1))).run_end is end


def test_cut_at_120_280_and_20_with_multibyte_text() -> None:
    label = "ü" * 100 + "🙂" * 50  # 150 characters, many bytes each
    plan = [{"label": label, "state": "pending", "note": "é" * 300} for _ in range(22)]
    got = change(status("t1", plan=plan, at=ts(1)))
    assert got.plan is not None and len(got.plan) == 20 and got.dropped == 2
    first = got.plan[0]
    assert len(first.step) == 120 and first.step.endswith("…") and first.step.startswith("ü" * 100)
    assert first.note is not None and len(first.note) == 280 and first.note.endswith("…")


def test_second_active_becomes_pending() -> None:
    plan = [{"label": "a", "state": "active"}, {"label": "b", "state": "active"}, {"label": "c", "state": "active"}]
    got = change(status("t1", plan=plan, at=ts(1)))
    assert got.plan is not None
    assert [s.status for s in got.plan] == [Status.in_progress, Status.pending, Status.pending]
    assert got.demoted == 2


@pytest.mark.parametrize(
    ("progress", "field"),
    [
        ({"steps": "nope"}, "steps"),
        ({"steps": [{"label": "a", "state": "finished"}]}, "steps[0].state"),
        ({"steps": [{"label": " \u200b ", "state": "done"}]}, "steps[0].label"),
        ({"steps": [{"label": 7, "state": "done"}]}, "steps[0].label"),
        ({"steps": [{"label": "a", "state": "done", "note": ["x"]}]}, "steps[0].note"),
        ({"steps": ["a"]}, "steps[0]"),
        ("not an object", f"metadata[{EXTENSION_URI}]"),
        ({}, "steps"),
    ],
)
def test_plans_of_the_wrong_shape_are_refused_but_the_rest_applies(progress: object, field: str) -> None:
    got = change(status("t1", "TASK_STATE_INPUT_REQUIRED", at=ts(3), text="Which file?",
                        metadata={EXTENSION_URI: progress}))
    assert got.plan is None and got.plan_problem is not None and field in got.plan_problem
    assert got.timestamp_us == parse_timestamp(ts(3)) and got.headline == "Which file?"
    assert got.attention == "Waiting for input: Which file?"


def test_no_metadata_keeps_the_plan_and_owner_is_context_else_task() -> None:
    got = change(status("t1", at=ts(1), metadata={"other": 1}))
    assert got.plan is None and got.plan_problem is None and got.session_key == "ctx-1"
    assert change(status("t9", at=ts(1), context=None)).session_key == "t9"


def test_snapshot_and_bare_objects() -> None:
    got = change(snapshot("t1", "TASK_STATE_COMPLETED", at=ts(2), plan=steps(2)))
    assert got.kind is Kind.snapshot and got.task_id == "t1" and got.state is TaskState.completed
    bare = change(status("t2", at=ts(1))["statusUpdate"])
    assert bare.kind is Kind.status and bare.task_id == "t2"
    assert change(snapshot("t3")["task"]).kind is Kind.snapshot
    chunk = parse_update(artifact("t1", "Hel", append=True, last=True)["artifactUpdate"])
    assert isinstance(chunk, AnswerChunk) and chunk.text == "Hel" and chunk.append and chunk.last_chunk
    assert parse_update({"message": {"messageId": "m", "parts": [{"text": "hi"}]}}) is None


def test_timestamps_compare_to_the_microsecond() -> None:
    assert parse_timestamp("2026-12-01T09:00:00.123456789Z") == parse_timestamp("2026-12-01T09:00:00.123456Z")
    assert parse_timestamp("2026-12-01T10:00:00+01:00") == parse_timestamp("2026-12-01T09:00:00Z")
    assert parse_timestamp("2026-12-01T09:00:00.000001Z") - parse_timestamp("2026-12-01T09:00:00Z") == 1
    assert parse_timestamp(None) is None


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ([], "update"),
        ({"statusUpdate": {"status": {"state": "TASK_STATE_WORKING"}}}, "statusUpdate.taskId"),
        ({"statusUpdate": {"taskId": "t", "status": {"state": "busy"}}}, "statusUpdate.status.state"),
        ({"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING", "timestamp": "yesterday"}}},
         "statusUpdate.status.timestamp"),
        ({"statusUpdate": {"taskId": "t", "status": "working"}}, "statusUpdate.status"),
        ({"artifactUpdate": {"taskId": "t", "artifact": {"parts": [{"text": 1}]}}}, "artifactUpdate.artifact.parts[0].text"),
        ({"task": {}, "statusUpdate": {}}, "update"),
        ({"hello": 1}, "update"),
    ],
)
def test_unreadable_updates_name_the_field(data: object, field: str) -> None:
    with pytest.raises(UpdateError) as caught:
        parse_update(data)
    assert caught.value.field == field


def test_headline_is_cleaned_and_cut() -> None:
    got = change(status("t1", at=ts(1), text="\u202eWorking\n on  it " + "x" * 400))
    assert got.headline is not None and got.headline.startswith("Working on it x") and len(got.headline) == 280
