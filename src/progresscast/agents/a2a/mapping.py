"""A2A updates as card changes: pure, nothing here touches Redis.

One `StreamResponse` (`{"task"|"statusUpdate"|"artifactUpdate"|"message": …}`, A2A
v1.0 camelCase JSON) — or a bare `Task`, `TaskStatusUpdateEvent` or
`TaskArtifactUpdateEvent` — becomes a `StatusChange` (what a status update or task
snapshot does to the card, the run and the activity), an `AnswerChunk` (artifact
text for the streamed answer), or `None` (a plain message: nothing to show).

The plan comes from `metadata["https://docs.nylorun.com/a2a/progress/v1"]` and is
mapped by `harness_plan.map_plan`. A plan of the wrong shape is not applied, but the
rest of its update is: the change carries `plan_problem` instead of a plan. Anything
else of the wrong shape (no task id, an unreadable timestamp, an unknown state) is an
`UpdateError` naming the field and the rule.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from ...model.card import MAX_NOTE_CHARS, SURROGATE_RULE, CardError, Step, clean_text, cut, has_lone_surrogate
from ...model.view import RunState
from ..harness_plan import PROGRESS_V1, PlanShapeError, map_plan

EXTENSION_URI = "https://docs.nylorun.com/a2a/progress/v1"

WAITING_PREFIX = "Waiting for input: "
WAITING_DEFAULT = "the agent asks for input"
AUTH_DEFAULT = "the agent asks for authorization"


class UpdateError(CardError):
    """An A2A update that cannot be read at all (field and rule)."""


class TaskState(StrEnum):
    submitted = "TASK_STATE_SUBMITTED"
    working = "TASK_STATE_WORKING"
    input_required = "TASK_STATE_INPUT_REQUIRED"
    auth_required = "TASK_STATE_AUTH_REQUIRED"
    completed = "TASK_STATE_COMPLETED"
    failed = "TASK_STATE_FAILED"
    canceled = "TASK_STATE_CANCELED"
    rejected = "TASK_STATE_REJECTED"


RUN_END: dict[TaskState, RunState] = {
    TaskState.completed: RunState.completed,
    TaskState.failed: RunState.failed,
    TaskState.rejected: RunState.failed,
    TaskState.canceled: RunState.canceled,
}
"""Terminal states and how the run ends."""

_V03_STATES = {
    "submitted": TaskState.submitted,
    "working": TaskState.working,
    "input-required": TaskState.input_required,
    "auth-required": TaskState.auth_required,
    "completed": TaskState.completed,
    "failed": TaskState.failed,
    "canceled": TaskState.canceled,
    "rejected": TaskState.rejected,
}
"""A2A 0.3 spelled states in lower case; accepted so old logs ingest too."""


class Kind(StrEnum):
    snapshot = "task"
    status = "statusUpdate"


@dataclass(frozen=True)
class StatusChange:
    """A status update or task snapshot, as what it does to the card."""

    kind: Kind
    task_id: str
    context_id: str | None
    state: TaskState
    timestamp_us: int | None
    """`status.timestamp` in microseconds since the epoch (None: the update has none)."""
    plan: tuple[Step, ...] | None
    """The whole new plan; None keeps the card's plan (no metadata, or a bad plan)."""
    plan_problem: str | None = None
    """Why the update's plan was not applied (field: rule)."""
    demoted: int = 0
    """`active` steps after the first, shown as pending."""
    dropped: int = 0
    """Steps past the 20th, left out."""
    headline: str | None = None
    """`status.message` text; None keeps the current headline."""
    message: str | None = None
    """`status.message` text in full, its lines kept (what an ask in chat shows)."""

    @property
    def session_key(self) -> str:
        return self.context_id or self.task_id

    @property
    def run_end(self) -> RunState | None:
        return RUN_END.get(self.state)

    @property
    def attention(self) -> str | None:
        """The attention line a waiting task shows; None for every other state."""
        if self.state is TaskState.input_required:
            return WAITING_PREFIX + (self.headline or WAITING_DEFAULT)
        if self.state is TaskState.auth_required:
            return WAITING_PREFIX + (self.headline or AUTH_DEFAULT)
        return None


@dataclass(frozen=True)
class AnswerChunk:
    """Artifact text: the answer streamed so far grows or restarts with it."""

    task_id: str
    context_id: str | None
    artifact_id: str
    text: str
    append: bool
    last_chunk: bool

    @property
    def session_key(self) -> str:
        return self.context_id or self.task_id


Update = StatusChange | AnswerChunk


def parse_update(data: Any) -> Update | None:
    """Read one update (see the module doc); None for a message, which shows nothing."""
    if not isinstance(data, dict):
        raise UpdateError("update", "must be a JSON object")
    wrapped = [k for k in ("task", "statusUpdate", "artifactUpdate", "message") if k in data]
    if len(wrapped) > 1:
        raise UpdateError("update", "must hold exactly one of task, statusUpdate, artifactUpdate, message")
    if wrapped:
        key = wrapped[0]
        body = data[key]
        if not isinstance(body, dict):
            raise UpdateError(key, "must be an object")
        if key == "task":
            return _status(body, Kind.snapshot, key, id_field="id")
        if key == "statusUpdate":
            return _status(body, Kind.status, key, id_field="taskId")
        if key == "artifactUpdate":
            return _artifact(body, key)
        return None
    # A bare object: tell the three apart by their own fields.
    if "artifact" in data and "taskId" in data:
        return _artifact(data, "artifactUpdate")
    if "status" in data and "taskId" in data:
        return _status(data, Kind.status, "statusUpdate", id_field="taskId")
    if "status" in data and "id" in data:
        return _status(data, Kind.snapshot, "task", id_field="id")
    if "messageId" in data or "parts" in data:
        return None
    raise UpdateError("update", "must be a StreamResponse, Task, TaskStatusUpdateEvent or TaskArtifactUpdateEvent")


def _id(body: dict[str, Any], field: str, where: str, *, required: bool) -> str | None:
    value = body.get(field)
    if value is None or value == "":
        if required:
            raise UpdateError(f"{where}.{field}", "is required")
        return None
    if not isinstance(value, str):
        raise UpdateError(f"{where}.{field}", "must be a string")
    return _unicode(value, f"{where}.{field}")


def _status(body: dict[str, Any], kind: Kind, where: str, *, id_field: str) -> StatusChange:
    task_id = _id(body, id_field, where, required=True)
    assert task_id is not None
    context_id = _id(body, "contextId", where, required=False)
    status = body.get("status")
    if not isinstance(status, dict):
        raise UpdateError(f"{where}.status", "must be an object")
    state = _state(status.get("state"), f"{where}.status.state")
    timestamp = parse_timestamp(status.get("timestamp"), f"{where}.status.timestamp")
    headline = message_text(status.get("message"), f"{where}.status.message")
    message = None
    if headline is not None:  # message_text read the parts: they have the right shape
        message = parts_text(status["message"].get("parts"), f"{where}.status.message.parts", joiner="\n").strip()
    plan: tuple[Step, ...] | None = None
    problem: str | None = None
    demoted = dropped = 0
    metadata = body.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        problem = f"{where}.metadata: must be an object"
    elif metadata and EXTENSION_URI in metadata:
        field = f"{where}.metadata[{EXTENSION_URI}]"
        try:
            progress = metadata[EXTENSION_URI]
            if not isinstance(progress, dict):
                raise PlanShapeError(field, "must be an object")
            mapped = map_plan(progress.get("steps"), PROGRESS_V1, field=f"{field}.steps")
        except PlanShapeError as exc:
            problem = str(exc)
        else:
            plan, demoted, dropped = mapped.steps, mapped.demoted, mapped.dropped
    return StatusChange(
        kind=kind,
        task_id=task_id,
        context_id=context_id,
        state=state,
        timestamp_us=timestamp,
        plan=plan,
        plan_problem=problem,
        demoted=demoted,
        dropped=dropped,
        headline=headline,
        message=message or None,
    )


def _state(value: Any, field: str) -> TaskState:
    if isinstance(value, str):
        if value in TaskState._value2member_map_:
            return TaskState(value)
        if value in _V03_STATES:
            return _V03_STATES[value]
    names = ", ".join(s.value for s in TaskState)
    raise UpdateError(field, f"must be one of {names}")


_RFC3339 = re.compile(
    r"(\d{4}-\d\d-\d\d)[Tt ](\d\d:\d\d:\d\d)(?:\.(\d+))?([Zz]|[+-]\d\d:\d\d)"
)


def parse_timestamp(value: Any, field: str = "status.timestamp") -> int | None:
    """An RFC 3339 instant as microseconds since the epoch (finer digits are dropped:
    two instants equal to the microsecond are the same update)."""
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise UpdateError(field, "must be an RFC 3339 timestamp string")
    match = _RFC3339.fullmatch(value.strip())
    if not match:
        raise UpdateError(field, "must be an RFC 3339 timestamp like 2026-01-02T03:04:05.123456Z")
    day, clock, fraction, zone = match.groups()
    zone = "+00:00" if zone in ("Z", "z") else zone
    try:
        instant = datetime.fromisoformat(f"{day}T{clock}{zone}")
    except ValueError:
        raise UpdateError(field, "is not a real date and time") from None
    micros = int(((fraction or "") + "000000")[:6])
    seconds = int((instant - datetime(1970, 1, 1, tzinfo=UTC)).total_seconds())
    return seconds * 1_000_000 + micros


def message_text(message: Any, field: str) -> str | None:
    """The text parts of an A2A message, joined (None when there are none)."""
    if message is None:
        return None
    if not isinstance(message, dict):
        raise UpdateError(field, "must be an object")
    text = " ".join(parts_text(message.get("parts"), f"{field}.parts").split())
    return cut(text, MAX_NOTE_CHARS) or None


def parts_text(parts: Any, field: str, *, joiner: str = " ") -> str:
    if parts is None:
        return ""
    if not isinstance(parts, list):
        raise UpdateError(field, "must be an array")
    texts = []
    for index, part in enumerate(parts):
        if not isinstance(part, dict):
            raise UpdateError(f"{field}[{index}]", "must be an object")
        text = part.get("text")
        if text is None:
            continue  # files and data parts have nothing to show as text
        if not isinstance(text, str):
            raise UpdateError(f"{field}[{index}].text", "must be a string")
        texts.append(_unicode(text, f"{field}[{index}].text"))
    return clean_text(joiner.join(texts))


def _unicode(text: str, field: str) -> str:
    if has_lone_surrogate(text):
        raise UpdateError(field, SURROGATE_RULE)
    return text


def _artifact(body: dict[str, Any], where: str) -> AnswerChunk:
    task_id = _id(body, "taskId", where, required=True)
    assert task_id is not None
    context_id = _id(body, "contextId", where, required=False)
    artifact = body.get("artifact")
    if not isinstance(artifact, dict):
        raise UpdateError(f"{where}.artifact", "must be an object")
    artifact_id = _id(artifact, "artifactId", f"{where}.artifact", required=False) or ""
    text = parts_text(artifact.get("parts"), f"{where}.artifact.parts", joiner="")
    flags = {}
    for name in ("append", "lastChunk"):
        value = body.get(name, False)
        if not isinstance(value, bool):
            raise UpdateError(f"{where}.{name}", "must be true or false")
        flags[name] = value
    return AnswerChunk(
        task_id=task_id,
        context_id=context_id,
        artifact_id=artifact_id,
        text=text,
        append=flags["append"],
        last_chunk=flags["lastChunk"],
    )
