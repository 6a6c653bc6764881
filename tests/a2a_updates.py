"""Builders of A2A v1.0 JSON updates (camelCase, as a2a-sdk serialises them) for tests."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from progresscast.agents.a2a.mapping import EXTENSION_URI

BASE = datetime(2026, 12, 1, 9, 0, 0, tzinfo=UTC)


def ts(step: int, micros: int = 0) -> str:
    """An RFC 3339 timestamp `step` seconds (plus µs) after a fixed base."""
    return (BASE + timedelta(seconds=step, microseconds=micros)).isoformat().replace("+00:00", "Z")


def steps(n: int, active: int | None = None, *, label: str = "Step {i}") -> list[dict[str, Any]]:
    out = []
    for i in range(n):
        state = "done" if active is not None and i < active else "pending"
        if i == active:
            state = "active"
        out.append({"label": label.format(i=i), "state": state})
    return out


def status(
    task: str,
    state: str = "TASK_STATE_WORKING",
    *,
    at: str | None = None,
    plan: list[dict[str, Any]] | None = None,
    text: str | None = None,
    context: str | None = "ctx-1",
    metadata: dict[str, Any] | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"taskId": task, "status": {"state": state}}
    if context:
        body["contextId"] = context
    if at:
        body["status"]["timestamp"] = at
    if text is not None:
        body["status"]["message"] = {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": text}]}
    if plan is not None:
        body["metadata"] = {EXTENSION_URI: {"steps": plan}}
    if metadata is not None:
        body["metadata"] = metadata
    return {"statusUpdate": body}


def snapshot(task: str, state: str = "TASK_STATE_WORKING", **kw: Any) -> dict[str, Any]:
    body = status(task, state, **kw)["statusUpdate"]
    body["id"] = body.pop("taskId")
    return {"task": body}


def artifact(task: str, text: str, *, append: bool = False, last: bool = False, artifact_id: str = "a1",
             context: str | None = "ctx-1") -> dict[str, Any]:
    body: dict[str, Any] = {
        "taskId": task,
        "artifact": {"artifactId": artifact_id, "parts": [{"text": text}]},
        "append": append,
        "lastChunk": last,
    }
    if context:
        body["contextId"] = context
    return {"artifactUpdate": body}
