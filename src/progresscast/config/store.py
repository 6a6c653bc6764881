"""`[store]`: where the cards live (Redis) and how long they are kept."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator

from .base import _Model

RETENTION_DEFAULT = 30 * 86_400.0
"""`store.retention` unless set: 30 days."""


class StoreSettings(_Model):
    url: str | None = None
    """`redis://…`, `rediss://…`, `unix://…`, or `redis+cluster://host:port` (any node)."""
    shards: int | None = Field(None, ge=1, le=1024)
    """Shards of a new store (default 16); a store keeps the count it was created with."""
    maxConnections: int = Field(64, ge=1, le=10_000)
    """Redis connections a process uses for commands; more concurrent requests wait."""
    retention: float = Field(RETENTION_DEFAULT, ge=0, le=100 * 365 * 86_400)
    """How long an owner nobody writes to is kept (with its runs, activity, and what chats
    made for it), counted from its last write: seconds, or a number with a unit —
    `"30d"`, `"12h"`, `"90m"`, `"45s"`. 0 keeps everything. Recorded in the store, so
    every process (an agent hook without this config too) keeps cards as long."""

    @field_validator("retention", mode="before")
    @classmethod
    def _retention(cls, value: Any) -> Any:
        if isinstance(value, str):
            found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhd]?)\s*", value)
            if not found:
                raise ValueError(f"{value!r} must be seconds, or a number with s, m, h or d (e.g. \"30d\")")
            return float(found.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86_400}[found.group(2)]
        return value
