"""Reading a Bot API request's parameters the way the Bot API server does.

The server takes parameters from the query string and from a form-encoded,
multipart or JSON body. In a form every value is a string: python-telegram-bot
JSON-encodes everything that is not one (numbers, booleans, objects). So each
parameter is interpreted by its name, as the Bot API does, whatever body carried it.
"""

from __future__ import annotations

import email.parser
import email.policy
import json
from typing import Any
from urllib.parse import parse_qsl

from starlette.requests import Request

from ._state import ApiError

INT_FIELDS = frozenset(
    {"chat_id", "message_id", "offset", "limit", "timeout", "message_thread_id", "user_id", "max_connections"}
)
JSON_FIELDS = frozenset(
    {
        "rich_message",
        "entities",
        "reply_markup",
        "commands",
        "allowed_updates",
        "link_preview_options",
        "reply_parameters",
        "message_ids",
        "scope",
    }
)
BOOL_FIELDS = frozenset({"drop_pending_updates", "disable_notification", "protect_content"})


async def read_params(request: Request) -> dict[str, Any]:
    """All parameters of a request, each decoded by its name (see module doc)."""
    raw: dict[str, Any] = dict(request.query_params)
    body = await request.body()
    ctype = request.headers.get("content-type", "")
    if body:
        if ctype.startswith("application/json"):
            try:
                decoded = json.loads(body)
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse JSON encoded request body") from None
            if not isinstance(decoded, dict):
                raise ApiError(400, "Bad Request: JSON object expected as request body")
            raw.update(decoded)
        elif ctype.startswith("multipart/form-data"):
            raw.update(_multipart(body, ctype))
        else:  # application/x-www-form-urlencoded, also Telegram's default guess
            raw.update(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))
    return {name: _decode(name, value) for name, value in raw.items()}


def _multipart(body: bytes, ctype: str) -> dict[str, Any]:
    """Fields of a multipart body; the stdlib email parser spares a python-multipart dependency."""
    head = f"Content-Type: {ctype}\r\nMIME-Version: 1.0\r\n\r\n".encode()
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
    fields: dict[str, Any] = {}
    for part in message.iter_parts():
        name = part.get_param("name", header="content-disposition")
        if not isinstance(name, str):
            continue
        payload = part.get_payload(decode=True)
        if not isinstance(payload, bytes):
            continue
        if part.get_filename():  # an uploaded file: keep the bytes, the emulator never reads them
            fields[name] = payload
        else:
            fields[name] = payload.decode("utf-8", "replace")
    return fields


def _decode(name: str, value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if name in INT_FIELDS:
        try:
            return int(value)
        except ValueError:
            return value  # e.g. "@channelname": the handler answers "chat not found"
    if name in JSON_FIELDS:
        try:
            return json.loads(value)
        except ValueError:
            return value  # the handler answers "can't parse ... JSON object"
    if name in BOOL_FIELDS:
        return value.lower() in ("true", "1")
    return value


def chat_id_of(params: dict[str, Any]) -> int | None:
    value = params.get("chat_id")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def require_chat_id(params: dict[str, Any]) -> int:
    if params.get("chat_id") in (None, ""):
        raise ApiError(400, "Bad Request: chat_id is empty")
    chat_id = chat_id_of(params)
    if chat_id is None:
        raise ApiError(400, "Bad Request: chat not found")
    return chat_id


def text_param(params: dict[str, Any], name: str) -> str:
    value = params.get(name)
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value)


def int_param(params: dict[str, Any], name: str, default: int = 0) -> int:
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            return int(str(value))
        except ValueError:
            return default
    return value
