"""The session's task list kept by Claude Code's Task tools, rebuilt from hook events.

`TaskCreate` and `TaskUpdate` each touch one task, but a card is the whole plan, so the
hook keeps the list in Redis (one hash per owner, a field per task attribute, so an
update is a single HSET and parallel hook calls do not lose each other's changes) and
writes the whole rebuilt list as the card after every call.
"""

from __future__ import annotations

import json
import re
from typing import Any, cast

from redis.asyncio import Redis

from ...model.owners import Owner
from ...store import keys
from ..harness_plan import TODO_STATES

DELETED = "deleted"
_ATTRIBUTES = ("subject", "status", "activeForm")
_NUMBER = re.compile(r"#(\d+)")


class TaskError(ValueError):
    """A Task tool call that cannot be applied: said on stderr, nothing changed."""


def created_task_id(response: Any) -> str | None:
    """The new task's id from `TaskCreate`'s tool_response: `{"task": {"id": "1"}}`, or
    the number in its text ("Task #1 created successfully: …")."""
    if isinstance(response, dict) and isinstance(response.get("task"), dict):
        task_id = response["task"].get("id")
        if isinstance(task_id, (str, int)) and not isinstance(task_id, bool) and str(task_id):
            return str(task_id)
    text = response if isinstance(response, str) else json.dumps(response, ensure_ascii=False)
    found = _NUMBER.search(text)
    return found.group(1) if found else None


class TaskList:
    def __init__(self, redis: Redis, owner: Owner) -> None:
        self.redis = redis
        self.key = keys.hook_tasks(owner)

    async def create(self, task_id: str | None, tool_input: Any) -> None:
        if not isinstance(tool_input, dict) or not isinstance(tool_input.get("subject"), str):
            raise TaskError("TaskCreate: tool_input.subject must be a string")
        if task_id is None:
            # No id in the answer: Claude Code numbers a session's tasks 1, 2, 3, …
            task_id = str(max((int(t) for t in await self._ids() if t.isdigit()), default=0) + 1)
        fields = {f"{task_id}:subject": tool_input["subject"], f"{task_id}:status": "pending"}
        if isinstance(tool_input.get("activeForm"), str):
            fields[f"{task_id}:activeForm"] = tool_input["activeForm"]
        await self._write(fields)

    async def update(self, tool_input: Any, tool_response: Any) -> bool:
        """Apply one TaskUpdate; False when there was nothing to apply."""
        if isinstance(tool_response, dict) and tool_response.get("success") is False:
            return False  # the tool itself refused the update
        if not isinstance(tool_input, dict):
            raise TaskError("TaskUpdate: tool_input must be an object")
        task_id = tool_input.get("taskId")
        if not isinstance(task_id, (str, int)) or isinstance(task_id, bool) or not str(task_id):
            raise TaskError("TaskUpdate: tool_input.taskId must be a string")
        task_id = str(task_id)
        status = tool_input.get("status")
        if status == DELETED:
            await self.redis.hdel(self.key, *(f"{task_id}:{a}" for a in _ATTRIBUTES))
            return True
        if status is not None and status not in TODO_STATES:
            raise TaskError(f"TaskUpdate: tool_input.status must be one of {', '.join([*TODO_STATES, DELETED])}")
        fields = {f"{task_id}:{a}": tool_input[a] for a in _ATTRIBUTES if isinstance(tool_input.get(a), str)}
        if not fields:
            return False
        known = await self.redis.hexists(self.key, f"{task_id}:subject")
        if not known and f"{task_id}:subject" not in fields:
            return False  # a task created before the hook was installed: nothing to show it by
        if not known:
            fields.setdefault(f"{task_id}:status", "pending")
        await self._write(fields)
        return True

    async def items(self) -> list[dict[str, str]]:
        """The tasks in creation order (by number), as `{subject, status, activeForm?}`."""
        raw = cast("dict[str, str]", await self.redis.hgetall(self.key))
        tasks: dict[str, dict[str, str]] = {}
        for field, value in raw.items():
            task_id, _, attribute = field.rpartition(":")
            tasks.setdefault(task_id, {})[attribute] = value
        order = sorted(tasks, key=lambda t: (0, int(t), "") if t.isdigit() else (1, 0, t))
        return [tasks[t] for t in order if "subject" in tasks[t]]

    async def _ids(self) -> set[str]:
        fields = cast("list[str]", await self.redis.hkeys(self.key))
        return {field.rpartition(":")[0] for field in fields}

    async def _write(self, fields: dict[str, str]) -> None:
        async with self.redis.pipeline(transaction=True) as pipe:
            pipe.hset(self.key, items=[part for pair in fields.items() for part in pair])
            pipe.expire(self.key, keys.HOOK_TASKS_TTL)
            await pipe.execute()
