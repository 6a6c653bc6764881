"""What the emulated Discord holds: channels and their messages, the calls made, its
errors, and the checks it makes of a message's body (Components V2 included)."""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._answered import Answered
from .discord_markdown import Read, components_text, read_markdown

DISCORD_EPOCH_MS = 1_420_070_400_000

IS_COMPONENTS_V2 = 1 << 15
SUPPRESS_EMBEDS = 1 << 2
SUPPRESS_NOTIFICATIONS = 1 << 12
CREATE_FLAGS = IS_COMPONENTS_V2 | SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS
EDIT_FLAGS = IS_COMPONENTS_V2 | SUPPRESS_EMBEDS

MAX_CONTENT = 2000
MAX_COMPONENTS = 40
MAX_TEXT = 4000
CONTAINER, TEXT_DISPLAY, SEPARATOR = 17, 10, 14
ACTION_ROW, BUTTON = 1, 2
LINK_STYLE = 5
MAX_ROWS = 5
"""Action rows in a message without Components V2."""
MAX_ROW_BUTTONS = 5
MAX_CUSTOM_ID = 100
MAX_LABEL = 80
V2_TYPES = frozenset({9, 10, 11, 12, 13, 14, 17})
CONTAINER_CHILDREN = frozenset({1, 9, 10, 12, 13, 14})

_counter = itertools.count(1)


def snowflake(at: float | None = None) -> str:
    """A new id, ordered by time like Discord's (ms since 2015 shifted by 22 bits)."""
    ms = int((time.time() if at is None else at) * 1000)
    return str(((ms - DISCORD_EPOCH_MS) << 22) | (next(_counter) & 0x3FFFFF))


def snowflake_time(value: str) -> float:
    return ((int(value) >> 22) + DISCORD_EPOCH_MS) / 1000


class DiscordError(Exception):
    """An error answer: HTTP status, Discord's JSON error code and message."""

    def __init__(
        self,
        status: int,
        code: int,
        message: str,
        errors: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.errors = errors
        self.headers = headers or {}
        self.body = body

    def envelope(self) -> dict[str, Any]:
        if self.body is not None:
            return self.body
        out: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors:
            out["errors"] = self.errors
        return out


UNKNOWN_CHANNEL = (404, 10003, "Unknown Channel")
UNKNOWN_MESSAGE = (404, 10008, "Unknown Message")
MISSING_ACCESS = (403, 50001, "Missing Access")
MISSING_PERMISSIONS = (403, 50013, "Missing Permissions")
OLD_MESSAGE_EDITS = (400, 30046, "Maximum number of edits to messages older than 1 hour reached. Try again later")
NOT_AUTHOR = (403, 50005, "Cannot edit a message authored by another user")
EMPTY_MESSAGE = (400, 50006, "Cannot send an empty message")
UNAUTHORIZED = (401, 0, "401: Unauthorized")


def error(kind: tuple[int, int, str]) -> DiscordError:
    return DiscordError(*kind)


def invalid_form(path: str, code: str, message: str) -> DiscordError:
    """50035 Invalid Form Body, with the field path Discord names (`components.0.…`)."""
    errors: dict[str, Any] = {}
    node = errors
    for part in path.split("."):
        node = node.setdefault(part, {})
    node["_errors"] = [{"code": code, "message": message}]
    return DiscordError(400, 50035, "Invalid Form Body", errors)


@dataclass
class DiscordCall(Answered):
    """One request the emulator answered."""

    route: str
    """`create_message`, `edit_message`, `delete_message`, `get_messages`, `me`, `commands`…"""
    channel: str | None
    body: dict[str, Any] | list[Any]
    """The JSON sent: an object, or a list (the commands an app registers)."""
    code: int | None = None
    pings: list[str] = field(default_factory=list)
    """Mentions in what was sent that `allowed_mentions` would let notify someone."""
    mentions: list[str] = field(default_factory=list)
    """Every mention the sent text makes, allowed or not."""
    headers: dict[str, str] = field(default_factory=dict)
    answered: bool = False
    """The emulator has answered it (or applied it and holds its answer): a call is
    recorded as it arrives, before its body is read."""


@dataclass
class DiscordMessage:
    id: str
    channel_id: str
    author_id: str
    content: str = ""
    components: list[dict[str, Any]] = field(default_factory=list)
    flags: int = 0
    edits: int = 0
    bot: bool = True
    old: bool = False
    """Past an hour old with many edits: edits answer 30046."""
    edited_at: float | None = None
    reply_to: str | None = None
    """The message it references (`message_reference`), when that was there."""

    @property
    def components_v2(self) -> bool:
        return bool(self.flags & IS_COMPONENTS_V2)

    def texts(self) -> list[str]:
        """The Markdown it shows: its content, or each Text Display's."""
        return components_text(self.components) if self.components_v2 else [self.content]

    def read(self) -> Read:
        """What a reader sees (all of it as one text), its mentions and links."""
        out = Read()
        parts = []
        for source in self.texts():
            part = read_markdown(source)
            parts.append(part.text)
            out.mentions += part.mentions
            out.links += part.links
        out.text = "\n".join(parts)
        return out

    def buttons(self) -> list[dict[str, Any]]:
        """Its buttons in order (action rows at the top or in a container)."""
        return _buttons(self.components)

    def button(self, wanted: str) -> dict[str, Any] | None:
        """The button whose `custom_id` or label is `wanted`."""
        return next((b for b in self.buttons() if wanted in (b.get("custom_id"), b.get("label"))), None)

    def apply_edit(self, body: dict[str, Any], flags: int, content: str, components: list[Any]) -> None:
        """An edit (or an interaction's `UPDATE_MESSAGE`) that `check_body` passed: what it
        names changes; `components: []` takes the buttons away; the V2 flag stays."""
        if self.components_v2:
            if "components" in body:
                self.components = components
        else:
            if "content" in body:
                self.content = content
            if "components" in body:
                self.components = components
        if "flags" in body:
            self.flags = (self.flags & ~SUPPRESS_EMBEDS) | (flags & SUPPRESS_EMBEDS) | (self.flags & IS_COMPONENTS_V2)
        self.edits += 1
        self.edited_at = time.time()

    @property
    def accent(self) -> int | None:
        for component in self.components:
            if component.get("type") == CONTAINER:
                value = component.get("accent_color")
                return int(value) if isinstance(value, int) else None
        return None

    def to_api(self, author: dict[str, Any], guild_id: str | None) -> dict[str, Any]:
        def iso(at: float) -> str:
            return datetime.fromtimestamp(at, UTC).isoformat()

        out: dict[str, Any] = {
            "id": self.id,
            "channel_id": self.channel_id,
            "author": author,
            "content": self.content,
            "timestamp": iso(snowflake_time(self.id)),
            "edited_timestamp": iso(self.edited_at) if self.edited_at else None,
            "tts": False,
            "mention_everyone": False,
            "mentions": [],
            "mention_roles": [],
            "attachments": [],
            "embeds": [],
            "pinned": False,
            "type": 0,
            "flags": self.flags,
            "components": self.components,
        }
        if guild_id is not None:
            out["guild_id"] = guild_id
        return out


@dataclass
class DiscordChannel:
    id: str
    guild_id: str | None = "100000000000000001"
    parent_id: str | None = None
    """Set for a thread: the channel it is in."""
    messages: dict[str, DiscordMessage] = field(default_factory=dict)
    deleted: dict[str, DiscordMessage] = field(default_factory=dict)
    access: bool = True
    """False: the bot cannot see it (50001 Missing Access)."""
    can_send: bool = True
    """False: the bot may not post (50013 Missing Permissions)."""

    def visible(self) -> list[DiscordMessage]:
        """Messages in order (snowflakes grow with time)."""
        return sorted(self.messages.values(), key=lambda m: int(m.id))

    def texts(self) -> list[str]:
        """What each message shows a reader, in order."""
        return [m.read().text for m in self.visible()]


# --- a message body ------------------------------------------------------------------------


def _buttons(components: list[Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in components:
        if isinstance(c, dict):
            if c.get("type") == BUTTON:
                out.append(c)
            out += _buttons(c.get("components") or [])
    return out


def _check_row(c: dict[str, Any], path: str, ids: set[str]) -> None:
    """An action row of buttons, as Discord checks it: 1-5 buttons, a label of at most
    80 characters, a `custom_id` of 1-100 unique in the message (a link button a URL)."""
    inner = c.get("components")
    if not isinstance(inner, list) or not 1 <= len(inner) <= MAX_ROW_BUTTONS:
        raise invalid_form(f"{path}.components", "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 5 in length.")
    for i, b in enumerate(inner):
        at = f"{path}.components.{i}"
        if not isinstance(b, dict) or b.get("type") != BUTTON:
            raise invalid_form(f"{at}.type", "UI_TYPE_INVALID", "Invalid component type")
        style = b.get("style")
        if not isinstance(style, int) or isinstance(style, bool) or not 1 <= style <= LINK_STYLE:
            raise invalid_form(f"{at}.style", "BASE_TYPE_CHOICES", "Value must be one of {1, 2, 3, 4, 5}.")
        label = b.get("label")
        if label is None and b.get("emoji") is None:
            raise invalid_form(f"{at}.label", "BASE_TYPE_REQUIRED", "This field is required")
        if label is not None and (not isinstance(label, str) or _units(label) > MAX_LABEL):
            raise invalid_form(f"{at}.label", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_LABEL} or fewer in length.")
        if style == LINK_STYLE:
            if not isinstance(b.get("url"), str) or "custom_id" in b:
                raise invalid_form(f"{at}.url", "BUTTON_COMPONENT_URL_REQUIRED", "A link button needs a url only")
            continue
        custom_id = b.get("custom_id")
        if not isinstance(custom_id, str) or not custom_id:
            raise invalid_form(f"{at}.custom_id", "BASE_TYPE_REQUIRED", "This field is required")
        if len(custom_id) > MAX_CUSTOM_ID:
            raise invalid_form(
                f"{at}.custom_id", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CUSTOM_ID} or fewer in length."
            )
        if custom_id in ids:
            raise invalid_form(
                f"{at}.custom_id", "COMPONENT_CUSTOM_ID_DUPLICATED", "Component custom id cannot be duplicated"
            )
        ids.add(custom_id)


def _text_size(components: list[Any]) -> int:
    total = 0
    for c in components:
        if isinstance(c, dict):
            if c.get("type") == TEXT_DISPLAY:
                total += _units(str(c.get("content", "")))
            if isinstance(c.get("components"), list):
                total += _text_size(c["components"])
    return total


def _count(components: list[Any]) -> int:
    total = 0
    for c in components:
        total += 1
        if isinstance(c, dict) and isinstance(c.get("components"), list):
            total += _count(c["components"])
        if isinstance(c, dict) and isinstance(c.get("accessory"), dict):
            total += 1
    return total


def _units(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


def _check_component(c: Any, path: str, top: bool, ids: set[str]) -> None:
    if not isinstance(c, dict) or not isinstance(c.get("type"), int):
        raise invalid_form(f"{path}.type", "BASE_TYPE_REQUIRED", "This field is required")
    kind = c["type"]
    if kind == ACTION_ROW:
        _check_row(c, path, ids)
    elif kind == TEXT_DISPLAY:
        content = c.get("content")
        if not isinstance(content, str) or not content:
            raise invalid_form(f"{path}.content", "BASE_TYPE_REQUIRED", "This field is required")
        if _units(content) > MAX_TEXT:
            raise invalid_form(f"{path}.content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_TEXT} or fewer in length.")
    elif kind == CONTAINER:
        if not top:
            raise invalid_form(f"{path}.type", "UI_TYPE_INVALID", "Containers cannot be nested")
        accent = c.get("accent_color")
        if accent is not None and (
            not isinstance(accent, int) or isinstance(accent, bool) or not 0 <= accent <= 0xFFFFFF
        ):
            raise invalid_form(f"{path}.accent_color", "NUMBER_TYPE_MAX", "int value should be <= 16777215.")
        inner = c.get("components")
        if not isinstance(inner, list) or not inner:
            raise invalid_form(f"{path}.components", "BASE_TYPE_MIN_LENGTH", "Must be 1 or more in length.")
        for i, child in enumerate(inner):
            if not isinstance(child, dict) or child.get("type") not in CONTAINER_CHILDREN:
                raise invalid_form(f"{path}.components.{i}.type", "UI_TYPE_INVALID", "Invalid component type")
            _check_component(child, f"{path}.components.{i}", False, ids)
    elif kind == SEPARATOR:
        pass
    else:
        raise invalid_form(f"{path}.type", "UI_TYPE_INVALID", "Invalid component type")


def _with_ids(components: list[Any]) -> list[Any]:
    """A copy with every component's `id` filled in, in order, as Discord answers them."""
    counter = itertools.count(1)
    taken = set()

    def walk(items: list[Any]) -> list[Any]:
        out = []
        for c in items:
            c = dict(c)
            if isinstance(c.get("components"), list):
                c["components"] = walk(c["components"])
            out.append(c)
        return out

    def number(items: list[Any]) -> None:
        for c in items:
            if "id" not in c:
                ident = next(counter)
                while ident in taken:
                    ident = next(counter)
                c["id"] = ident
            if isinstance(c.get("components"), list):
                number(c["components"])

    copied = walk(components)
    stack = list(copied)
    while stack:
        c = stack.pop()
        if isinstance(c.get("id"), int):
            taken.add(c["id"])
        stack.extend(c.get("components") or [])
    number(copied)
    return copied


def check_body(
    body: dict[str, Any], *, edit: bool, v2_allowed: bool, was_v2: bool = False
) -> tuple[int, str, list[Any]]:
    """A create or edit body as Discord checks it: (flags, content, components)."""
    flags = body.get("flags", 0) or 0
    if not isinstance(flags, int) or isinstance(flags, bool):
        raise invalid_form("flags", "NUMBER_TYPE_COERCE", "Value is not int.")
    allowed = EDIT_FLAGS if edit else CREATE_FLAGS
    if flags & ~allowed:
        raise invalid_form("flags", "MESSAGE_FLAGS_INVALID", "Invalid flags")
    v2 = bool(flags & IS_COMPONENTS_V2) or (edit and was_v2)
    if edit and was_v2 and "flags" in body and not flags & IS_COMPONENTS_V2:
        raise invalid_form(
            "flags", "MESSAGE_CANNOT_REMOVE_COMPONENTS_V2_FLAG", "The IS_COMPONENTS_V2 flag cannot be removed"
        )
    if v2 and not v2_allowed:
        raise invalid_form("flags", "MESSAGE_FLAGS_INVALID", "Invalid flags")
    content = body.get("content")
    components = body.get("components")
    if content is not None and not isinstance(content, str):
        raise invalid_form("content", "BASE_TYPE_STRING", "Must be a string.")
    if components is not None and not isinstance(components, list):
        raise invalid_form("components", "BASE_TYPE_ARRAY", "Must be an array.")
    if body.get("embeds"):
        raise invalid_form("embeds", "UNSUPPORTED", "This bot does not send embeds")
    mentions = body.get("allowed_mentions")
    if mentions is not None and not isinstance(mentions, dict):
        raise invalid_form("allowed_mentions", "MODEL_TYPE_CONVERT", "Must be an object.")
    if v2:
        if content:
            raise invalid_form(
                "content",
                "MESSAGE_CANNOT_USE_LEGACY_FIELDS_WITH_COMPONENTS_V2",
                "The 'content' field cannot be used when using MessageFlags.IS_COMPONENTS_V2",
            )
        if not edit and not components:
            raise error(EMPTY_MESSAGE)
        comps = components or []
        ids: set[str] = set()
        for i, c in enumerate(comps):
            if not isinstance(c, dict) or c.get("type") not in (CONTAINER, TEXT_DISPLAY, SEPARATOR, ACTION_ROW):
                raise invalid_form(f"components.{i}.type", "UI_TYPE_INVALID", "Invalid component type")
            _check_component(c, f"components.{i}", True, ids)
        if _count(comps) > MAX_COMPONENTS:
            raise invalid_form("components", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_COMPONENTS} or fewer in length.")
        if _text_size(comps) > MAX_TEXT:
            raise invalid_form(
                "components", "MESSAGE_TEXT_TOO_LONG", f"Total text must be {MAX_TEXT} or fewer in length."
            )
        return flags, "", _with_ids(comps)
    rows = components or []
    if any(isinstance(c, dict) and c.get("type") in V2_TYPES for c in rows):
        raise invalid_form(
            "components.0.type", "UI_TYPE_INVALID", "Components V2 types require the IS_COMPONENTS_V2 flag"
        )
    if len(rows) > MAX_ROWS:
        raise invalid_form("components", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_ROWS} or fewer in length.")
    ids = set()
    for i, c in enumerate(rows):
        if not isinstance(c, dict) or c.get("type") != ACTION_ROW:
            raise invalid_form(f"components.{i}.type", "UI_TYPE_INVALID", "Invalid component type")
        _check_row(c, f"components.{i}", ids)
    text = content or ""
    if _units(text) > MAX_CONTENT:
        raise invalid_form("content", "BASE_TYPE_MAX_LENGTH", f"Must be {MAX_CONTENT} or fewer in length.")
    if not edit and not text.strip() and not rows:
        raise error(EMPTY_MESSAGE)
    return flags, text, list(rows)


def pings(body: dict[str, Any], read: Read) -> list[str]:
    """The mentions of `read` that `allowed_mentions` (absent: all of them) lets notify."""
    allowed = body.get("allowed_mentions")
    if not isinstance(allowed, dict):
        return read.pings
    parse = allowed.get("parse") or []
    users = {str(u) for u in allowed.get("users") or []}
    roles = {str(r) for r in allowed.get("roles") or []}
    out = []
    for m in read.pings:
        kind, _, ident = m.partition(":")
        if (
            (kind == "everyone" and "everyone" in parse)
            or (kind == "user" and ("users" in parse or ident in users))
            or (kind == "role" and ("roles" in parse or ident in roles))
        ):
            out.append(m)
    return out


__all__ = [
    "DiscordCall",
    "DiscordChannel",
    "DiscordError",
    "DiscordMessage",
    "check_body",
    "error",
    "invalid_form",
    "pings",
    "snowflake",
    "snowflake_time",
]
