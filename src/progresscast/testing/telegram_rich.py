"""Rich messages (Bot API 10.1 ``InputRichMessage``): checking them and showing them as text.

Limits from the Bot API documentation: at most 32,768 characters of text and at
most 500 blocks, list items and table rows together. Error descriptions marked
"invented" below are not documented anywhere we could find; they keep Telegram's
"Bad Request: lower-case sentence" style.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ._state import ApiError
from .telegram_html import utf16_len

MAX_RICH_TEXT = 32_768
MAX_RICH_BLOCKS = 500

BLOCK_TYPES = frozenset(
    "paragraph heading pre footer divider mathematical_expression anchor list blockquote pullquote "
    "collage slideshow table details map animation audio photo video voice_note".split()
)
_NESTED = ("blocks",)  # fields holding child blocks (blockquote, details, collage, slideshow)


@dataclass(frozen=True)
class RichContent:
    rich: dict[str, Any]
    """The InputRichMessage as sent."""
    blocks: list[dict[str, Any]]
    """The blocks a Message shows (html/markdown sources become one paragraph)."""
    text: str
    """A plain rendering for tests: one line per paragraph, ☑/☐/• per list item."""


def check_rich(value: Any) -> RichContent:
    """Validate an InputRichMessage the way the server would, or raise ApiError 400."""
    if value is None:
        raise ApiError(400, "Bad Request: rich message must be non-empty")  # TDLib's wording
    if not isinstance(value, dict):
        raise ApiError(400, "Bad Request: can't parse InputRichMessage JSON object")  # invented
    sources = [k for k in ("html", "markdown", "blocks") if value.get(k) not in (None, "", [])]
    if not sources:
        raise ApiError(400, "Bad Request: rich message must be non-empty")  # TDLib's wording
    if len(sources) > 1:
        raise ApiError(400, "Bad Request: exactly one of html, markdown or blocks must be specified")  # invented
    kind = sources[0]
    if kind == "blocks":
        blocks = value["blocks"]
        if not isinstance(blocks, list):
            raise ApiError(400, "Bad Request: can't parse rich message blocks")  # invented
        count = _check_blocks(blocks)
        text = "\n".join(_block_text(b) for b in blocks)
        shown = [_shown_block(b) for b in blocks]
    else:
        source = value[kind]
        if not isinstance(source, str):
            raise ApiError(400, f"Bad Request: field \"{kind}\" must be of type String")
        count, text = 1, source
        shown = [{"type": "paragraph", "text": source}]
    if count > MAX_RICH_BLOCKS:
        raise ApiError(400, "Bad Request: too many blocks in the rich message")  # invented
    if utf16_len(text) > MAX_RICH_TEXT:
        raise ApiError(400, "Bad Request: message is too long")
    return RichContent(json.loads(json.dumps(value)), shown, text)


def _check_blocks(blocks: list[Any]) -> int:
    """Validate blocks recursively; returns how many blocks, list items and table rows they hold."""
    count = 0
    for block in blocks:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind not in BLOCK_TYPES:
            raise ApiError(400, f'Bad Request: unsupported rich block type "{kind}"')  # invented
        count += 1
        if kind == "list":
            items = block.get("items")
            if not isinstance(items, list) or not items:
                raise ApiError(400, "Bad Request: list block must have items")  # invented
            for item in items:
                if not isinstance(item, dict) or not isinstance(item.get("blocks"), list):
                    raise ApiError(400, "Bad Request: list item must have blocks")  # invented
                count += 1 + _check_blocks(item["blocks"])
        elif kind == "table":
            count += len(block.get("cells") or [])
        for name in _NESTED:
            if isinstance(block.get(name), list):
                count += _check_blocks(block[name])
    return count


def rich_text(value: Any) -> str:
    """Plain text of a RichText: a string, a list of RichText, or a typed object."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "".join(rich_text(v) for v in value)
    if isinstance(value, dict):
        if "text" in value:
            return rich_text(value["text"])
        return str(value.get("alternative_text") or value.get("expression") or "")
    return ""


def _block_text(block: dict[str, Any]) -> str:
    if block["type"] == "list":
        lines = []
        for item in block["items"]:
            mark = ("☑" if item.get("is_checked") else "☐") if item.get("has_checkbox") else "•"
            body = "\n".join(_block_text(b) for b in item["blocks"])
            lines.append(f"{mark} {body}")
        return "\n".join(lines)
    if block["type"] == "divider":
        return "—"
    if isinstance(block.get("blocks"), list):
        return "\n".join(_block_text(b) for b in block["blocks"])
    return rich_text(block.get("text") or block.get("summary") or block.get("expression") or "")


def _shown_block(block: dict[str, Any]) -> dict[str, Any]:
    """A block as a received Message carries it: list items always have a label."""
    out = dict(block)
    if block["type"] == "list":
        out["items"] = [
            {"label": "•", **item, "blocks": [_shown_block(b) for b in item["blocks"]]} for item in block["items"]
        ]
    return out
