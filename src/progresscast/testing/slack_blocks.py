"""Slack's message formats as a reader sees them: mrkdwn, Block Kit, the plan display.

- :func:`read_mrkdwn` — what a mrkdwn string shows, and the mentions and links Slack
  would make of it (`<@U…>`, `<!channel>`, `<#C…>`, `<url|text>`), entities decoded.
- :func:`check_blocks` — Block Kit's rules for the block types progresscast sends
  (section, context, header, divider, rich_text, markdown, actions): at most 50 blocks,
  text objects at most 3,000 characters, a header at most 150, known element types, an
  actions block's 1–25 buttons (text plain, 1–75 characters; `action_id` at most 255 and
  unique in the message; `value` at most 2,000); a violation raises
  :class:`InvalidBlocks` with Slack's error lines.
- :func:`buttons` — the buttons the blocks show, as (text, action_id).
- :func:`blocks_text` — what the blocks show, as plain text, with every mention and link.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

MAX_BLOCKS = 50
MAX_TEXT_OBJECT = 3000
MAX_HEADER = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_BLOCK_ID = 255
MAX_MESSAGE_TEXT = 40_000
MAX_MARKDOWN_BLOCKS = 12_000
MAX_ACTIONS = 25
MAX_BUTTON_TEXT = 75
MAX_ACTION_ID = 255
MAX_BUTTON_VALUE = 2000

_CONTROL = re.compile(r"<([^<>]*)>")
_ENTITY = re.compile(r"&(amp|lt|gt);")
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">"}
_FORMAT = [
    re.compile(r"(?<![\w*])\*(?=\S)([^*\n]*?\S)\*(?![\w*])"),
    re.compile(r"(?<![\w_])_(?=\S)([^_\n]*?\S)_(?![\w_])"),
    re.compile(r"(?<![\w~])~(?=\S)([^~\n]*?\S)~(?![\w~])"),
    re.compile(r"`([^`\n]+)`"),
]
_BROADCASTS = {"channel": "@channel", "here": "@here", "everyone": "@everyone"}


class InvalidBlocks(ValueError):
    """Blocks Slack refuses: `invalid_blocks` with these error lines."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("; ".join(errors))
        self.errors = errors


@dataclass
class Shown:
    """What a piece of a message shows: its text, and what Slack made of it."""

    text: str = ""
    mentions: list[str] = field(default_factory=list)
    """`@channel`, `@here`, `@everyone`, `<@U…>` users, `<!subteam^…>` groups, `#C…` channels."""
    links: list[tuple[str, str]] = field(default_factory=list)
    """(url, text) of every link."""

    def extend(self, other: Shown, sep: str = "\n") -> None:
        if other.text:
            self.text = f"{self.text}{sep}{other.text}" if self.text else other.text
        self.mentions += other.mentions
        self.links += other.links


def _unescape(text: str) -> str:
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(1)], text)


def _strip_format(text: str) -> str:
    lines = []
    for line in text.split("\n"):
        if line.strip() == "```":
            continue
        line = line.replace("```", "")
        if line.startswith("&gt; ") or line.startswith("> "):
            line = line.split(" ", 1)[1]
        for pattern in _FORMAT:
            line = pattern.sub(r"\1", line)
        lines.append(line)
    return "\n".join(lines)


def read_mrkdwn(text: str) -> Shown:
    """A mrkdwn string as Slack shows it: formatting removed, controls resolved,
    `&amp; &lt; &gt;` decoded — and every mention and link it makes."""
    shown = Shown()
    out: list[str] = []
    pos = 0
    for m in _CONTROL.finditer(text):
        out.append(text[pos : m.start()])
        pos = m.end()
        body = m.group(1)
        target, _, label = body.partition("|")
        if target.startswith("@"):
            shown.mentions.append(target)
            out.append("@" + (label or target[1:]))
        elif target.startswith("#"):
            shown.mentions.append(target)
            out.append("#" + (label or target[1:]))
        elif target.startswith("!"):
            word = target[1:]
            if word in _BROADCASTS:
                shown.mentions.append(_BROADCASTS[word])
                out.append(_BROADCASTS[word])
            elif word.startswith("subteam^"):
                shown.mentions.append(target)
                out.append(label or "@group")
            else:  # <!date^…|fallback> and friends show their fallback
                out.append(label or "")
        elif re.match(r"(?i)[a-z][a-z0-9+.-]*:", target):
            shown_text = _unescape(_strip_format(label)) if label else _unescape(target)
            shown.links.append((_unescape(target), shown_text))
            out.append(label or target)
        else:  # not a control sequence Slack knows: shown as typed
            out.append(m.group(0))
    out.append(text[pos:])
    shown.text = _unescape(_strip_format("".join(out)))
    return shown


# --- Block Kit ---------------------------------------------------------------------------


def _text_object(
    obj: Any, where: str, errors: list[str], limit: int = MAX_TEXT_OBJECT, plain_only: bool = False
) -> None:
    if not isinstance(obj, dict) or obj.get("type") not in ("mrkdwn", "plain_text"):
        errors.append(f"[ERROR] must be a text object of type mrkdwn or plain_text [json-pointer:{where}/type]")
        return
    if plain_only and obj["type"] != "plain_text":
        errors.append(f"[ERROR] must be plain_text [json-pointer:{where}/type]")
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        errors.append(f"[ERROR] must be more than 0 characters [json-pointer:{where}/text]")
    elif len(text) > limit:
        errors.append(f"[ERROR] must be less than {limit + 1} characters [json-pointer:{where}/text]")


_RICH_INLINE = {"text", "link", "emoji", "user", "usergroup", "channel", "broadcast", "date", "color"}
_RICH_CONTAINERS = {"rich_text_section", "rich_text_list", "rich_text_preformatted", "rich_text_quote"}


def _rich_inline(el: Any, where: str, errors: list[str]) -> int:
    if not isinstance(el, dict) or el.get("type") not in _RICH_INLINE:
        errors.append(f"[ERROR] unsupported type [json-pointer:{where}/type]")
        return 0
    kind = el["type"]
    if kind == "text":
        text = el.get("text")
        if not isinstance(text, str) or not text:
            errors.append(f"[ERROR] must be more than 0 characters [json-pointer:{where}/text]")
            return 0
        return len(text)
    if kind == "link":
        if not isinstance(el.get("url"), str) or not el["url"]:
            errors.append(f"[ERROR] missing required field: url [json-pointer:{where}]")
        return len(str(el.get("text", "")))
    return 0


def _rich_container(el: Any, where: str, errors: list[str], depth: int = 0) -> int:
    if not isinstance(el, dict) or el.get("type") not in _RICH_CONTAINERS:
        errors.append(f"[ERROR] unsupported type [json-pointer:{where}/type]")
        return 0
    children = el.get("elements")
    if not isinstance(children, list):
        errors.append(f"[ERROR] missing required field: elements [json-pointer:{where}]")
        return 0
    if el["type"] == "rich_text_list":
        if el.get("style") not in ("bullet", "ordered"):
            errors.append(f"[ERROR] must be one of bullet, ordered [json-pointer:{where}/style]")
        if not children:
            errors.append(f"[ERROR] must have at least 1 element [json-pointer:{where}/elements]")
        units = 0
        for i, child in enumerate(children):
            if isinstance(child, dict) and child.get("type") == "rich_text_section":
                units += _rich_container(child, f"{where}/elements/{i}", errors, depth + 1)
            else:
                errors.append(f"[ERROR] must be rich_text_section [json-pointer:{where}/elements/{i}/type]")
        return units
    return sum(_rich_inline(c, f"{where}/elements/{i}", errors) for i, c in enumerate(children))


def check_blocks(blocks: Any) -> None:
    """Raise InvalidBlocks unless `blocks` is a list Slack would accept."""
    errors: list[str] = []
    if not isinstance(blocks, list):
        raise InvalidBlocks(["[ERROR] must be an array [json-pointer:/blocks]"])
    if len(blocks) > MAX_BLOCKS:
        raise InvalidBlocks([f"[ERROR] no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]"])
    ids: set[str] = set()
    action_ids: set[str] = set()
    markdown = 0
    for i, block in enumerate(blocks):
        where = f"/blocks/{i}"
        if not isinstance(block, dict):
            errors.append(f"[ERROR] must be an object [json-pointer:{where}]")
            continue
        block_id = block.get("block_id")
        if block_id is not None:
            if not isinstance(block_id, str) or len(block_id) > MAX_BLOCK_ID or block_id in ids:
                errors.append(
                    f"[ERROR] block_id must be unique and at most 255 characters [json-pointer:{where}/block_id]"
                )
            ids.add(str(block_id))
        kind = block.get("type")
        if kind == "section":
            if "text" not in block and "fields" not in block:
                errors.append(f"[ERROR] must provide text or fields [json-pointer:{where}]")
            if "text" in block:
                _text_object(block["text"], f"{where}/text", errors)
        elif kind == "context":
            for k, el in enumerate(_elements(block.get("elements"), where, errors, MAX_CONTEXT_ELEMENTS)):
                _text_object(el, f"{where}/elements/{k}", errors)
        elif kind == "header":
            _text_object(block.get("text"), f"{where}/text", errors, MAX_HEADER, plain_only=True)
        elif kind == "divider":
            pass
        elif kind == "actions":
            _actions(block.get("elements"), where, errors, action_ids)
        elif kind == "markdown":
            text = block.get("text")
            if not isinstance(text, str) or not text:
                errors.append(f"[ERROR] must be more than 0 characters [json-pointer:{where}/text]")
            else:
                markdown += len(text)
        elif kind == "rich_text":
            for k, el in enumerate(_elements(block.get("elements"), where, errors)):
                _rich_container(el, f"{where}/elements/{k}", errors)
        else:
            errors.append(f"[ERROR] unsupported type: {kind} [json-pointer:{where}/type]")
    if markdown > MAX_MARKDOWN_BLOCKS:
        errors.append("[ERROR] markdown blocks may hold at most 12000 characters in all [json-pointer:/blocks]")
    if errors:
        raise InvalidBlocks(errors)


def _elements(elements: Any, where: str, errors: list[str], most: int | None = None) -> list[Any]:
    """A block's `elements`, checked to be a list of 1 to `most` items ([] when not a
    list or empty: nothing in it to check further)."""
    if not isinstance(elements, list) or not elements:
        errors.append(f"[ERROR] must have at least 1 element [json-pointer:{where}/elements]")
        return []
    if most is not None and len(elements) > most:
        errors.append(f"[ERROR] no more than {most} items allowed [json-pointer:{where}/elements]")
    return elements


def _actions(elements: Any, where: str, errors: list[str], action_ids: set[str]) -> None:
    for k, el in enumerate(_elements(elements, where, errors, MAX_ACTIONS)):
        at = f"{where}/elements/{k}"
        if not isinstance(el, dict) or el.get("type") != "button":
            errors.append(f"[ERROR] unsupported type [json-pointer:{at}/type]")
            continue
        _text_object(el.get("text"), f"{at}/text", errors, MAX_BUTTON_TEXT, plain_only=True)
        action_id = el.get("action_id")
        if action_id is not None:
            if not isinstance(action_id, str) or not 0 < len(action_id) <= MAX_ACTION_ID:
                errors.append(f"[ERROR] must be at most {MAX_ACTION_ID} characters [json-pointer:{at}/action_id]")
            elif action_id in action_ids:
                errors.append(f"[ERROR] action_id already exists in this message [json-pointer:{at}/action_id]")
            action_ids.add(str(action_id))
        value = el.get("value")
        if value is not None and (not isinstance(value, str) or len(value) > MAX_BUTTON_VALUE):
            errors.append(f"[ERROR] must be at most {MAX_BUTTON_VALUE} characters [json-pointer:{at}/value]")
        if el.get("style") not in (None, "primary", "danger"):
            errors.append(f"[ERROR] must be one of primary, danger [json-pointer:{at}/style]")


def buttons(blocks: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The buttons of every actions block: (text, action_id), in order."""
    out = []
    for block in blocks:
        if isinstance(block, dict) and block.get("type") == "actions":
            for el in block.get("elements") or []:
                if isinstance(el, dict) and el.get("type") == "button":
                    out.append((str(_dict_of(el.get("text")).get("text", "")), str(el.get("action_id", ""))))
    return out


def _dict_of(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _rich_inline_shown(el: dict[str, Any]) -> Shown:
    kind = el.get("type")
    if kind == "text":
        return Shown(str(el.get("text", "")))
    if kind == "link":
        text = str(el.get("text") or el.get("url", ""))
        return Shown(text, links=[(str(el.get("url", "")), text)])
    if kind == "user":
        return Shown("@" + str(el.get("user_id", "")), mentions=["@" + str(el.get("user_id", ""))])
    if kind == "broadcast":
        word = "@" + str(el.get("range", ""))
        return Shown(word, mentions=[word])
    if kind == "channel":
        return Shown("#" + str(el.get("channel_id", "")), mentions=["#" + str(el.get("channel_id", ""))])
    if kind == "usergroup":
        return Shown("@group", mentions=["subteam^" + str(el.get("usergroup_id", ""))])
    if kind == "emoji":
        return Shown(
            str((el.get("unicode") and chr(int(str(el["unicode"]).split("-")[0], 16))) or f":{el.get('name', '')}:")
        )
    return Shown()


def _inline_all(elements: list[Any]) -> Shown:
    shown = Shown()
    for el in elements:
        if isinstance(el, dict):
            shown.extend(_rich_inline_shown(el), sep="")
    return shown


def _rich_shown(block: dict[str, Any]) -> Shown:
    shown = Shown()
    for el in block.get("elements", []):
        if not isinstance(el, dict):
            continue
        if el.get("type") == "rich_text_list":
            ordered = el.get("style") == "ordered"
            start = int(el.get("offset", 0) or 0)
            for n, item in enumerate(el.get("elements", [])):
                part = _inline_all(item.get("elements", []))
                part.text = (f"{start + n + 1}. " if ordered else "• ") + part.text
                shown.extend(part)
        else:
            shown.extend(_inline_all(el.get("elements", [])))
    return shown


def blocks_text(blocks: list[dict[str, Any]]) -> Shown:
    """What the blocks show, one block after another, lines joined by newlines."""
    shown = Shown()
    for block in blocks:
        kind = block.get("type")
        if kind == "section" and isinstance(block.get("text"), dict):
            obj = block["text"]
            shown.extend(read_mrkdwn(obj["text"]) if obj.get("type") == "mrkdwn" else Shown(str(obj.get("text", ""))))
        elif kind == "context":
            part = Shown()
            for el in block.get("elements", []):
                if isinstance(el, dict) and "text" in el:
                    piece = read_mrkdwn(el["text"]) if el.get("type") == "mrkdwn" else Shown(str(el["text"]))
                    part.extend(piece, sep="  ")
            shown.extend(part)
        elif kind == "header" and isinstance(block.get("text"), dict):
            shown.extend(Shown(str(block["text"].get("text", ""))))
        elif kind == "markdown":
            shown.extend(Shown(str(block.get("text", ""))))
        elif kind == "rich_text":
            shown.extend(_rich_shown(block))
    return shown


__all__ = [
    "MAX_BLOCKS",
    "MAX_MESSAGE_TEXT",
    "MAX_TEXT_OBJECT",
    "InvalidBlocks",
    "Shown",
    "blocks_text",
    "buttons",
    "check_blocks",
    "read_mrkdwn",
]
