"""`[channels.matrix]`: the bot account, its rooms and its pace (docs/matrix.md).

The look, `access` and the room tables' `sessions` / `follow` / `mode` are every
platform's (`config.base`); a room is named by its id, never by an alias.
"""

from __future__ import annotations

import re
from typing import ClassVar

from pydantic import Field, field_validator, model_validator

from .base import DestinationSettings, EnvSecret, PlatformSettings

MATRIX_USER_ID = re.compile(r"@[a-z0-9._=/+-]+:[A-Za-z0-9.:\[\]-]+")
MATRIX_ROOM_ID = re.compile(r"![^:\s]+(?::[A-Za-z0-9.:\[\]-]+)?")
"""`!opaque:server.name`, or (room version 12 on) `!` and the room's hash alone."""

_NO_RICH = "Matrix drafts have one look (an HTML notice): remove the setting"


class MatrixRoomSettings(DestinationSettings):
    """`[[channels.matrix.rooms]]`: one room's overrides, follows and granted sessions."""

    id: str

    @field_validator("id")
    @classmethod
    def _id(cls, value: str) -> str:
        if not MATRIX_ROOM_ID.fullmatch(value):
            raise ValueError(f"room id {value!r} must be a room id like !abcdef:example.org or !abcdef, not an alias")
        return value

    @field_validator("richMessages")
    @classmethod
    def _one_look(cls, value: bool | None) -> bool | None:
        if value is not None:
            raise ValueError(_NO_RICH)
        return value


class MatrixSettings(PlatformSettings):
    ALLOW_LIST: ClassVar[str] = "rooms"
    """Matrix has no allow list of its own: under `allowlist` a room is let in by its
    `[[channels.matrix.rooms]]` table (what the refusal tells the operator to add)."""
    TABLES: ClassVar[str] = "rooms"

    homeserver: str | None = None
    """The homeserver's client-server API base URL, e.g. https://matrix.example.org."""
    userId: str | None = None
    """The bot's user id, e.g. @progresscast:example.org."""
    accessToken: EnvSecret = None
    """The bot account's access token; `env:NAME` reads it from the environment."""
    rooms: list[MatrixRoomSettings] = Field(default_factory=list)
    roomInterval: float = Field(1.0, ge=0.05, le=60)
    """Seconds between two events to one room."""
    callsPerSecond: float = Field(1.0, gt=0, le=1000)
    """Events a second the bot sends in all. A homeserver limits each user (Synapse's
    default: 0.2 a second after a burst of 10) and answers M_LIMIT_EXCEEDED past it, which
    holds every send back for as long as it says; raise this where the bot is exempt."""
    leaseSeconds: float = Field(5.0, ge=0.5, le=600)
    """Time to live of the bot's lease in Redis (one /sync reader and editor per account)."""

    @field_validator("homeserver")
    @classmethod
    def _homeserver(cls, value: str | None) -> str | None:
        if value is not None and not re.fullmatch(r"https?://[^\s/]+(/[^\s]*)?", value):
            raise ValueError("must be an http(s) URL, e.g. https://matrix.example.org")
        return value.rstrip("/") if value else value

    @field_validator("userId")
    @classmethod
    def _user(cls, value: str | None) -> str | None:
        if value is not None and not MATRIX_USER_ID.fullmatch(value):
            raise ValueError(f"{value!r} must be a Matrix user id, e.g. @progresscast:example.org")
        return value

    @field_validator("richMessages")
    @classmethod
    def _one_look(cls, value: bool) -> bool:
        if value:
            raise ValueError(_NO_RICH)
        return value

    @model_validator(mode="after")
    def _complete(self) -> MatrixSettings:
        if self.accessToken and not (self.homeserver and self.userId):
            raise ValueError("homeserver and userId are required when accessToken is set")
        return self

    @property
    def allow_list(self) -> frozenset[str]:
        """None: a room's table lets it in (under `allowlist`), and grants what it says."""
        return frozenset()


__all__ = ["MATRIX_ROOM_ID", "MATRIX_USER_ID", "MatrixRoomSettings", "MatrixSettings"]
