"""`progresscast render`: what a channel would show for a card."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from ..arguments import UsageError, read_input
from .card import TERMINAL_CONTROLS, print_json, read_json

if TYPE_CHECKING:
    from ..config.settings import Settings


def _given(value: int | None, default: int) -> int:
    return default if value is None else value


def render_command(args: argparse.Namespace, settings: Settings) -> None:
    from pydantic import ValidationError

    from ..config.base import Mode, RenderSettings, StreamingSettings
    from ..model.validation import field_and_rule
    from ..render import payload_for

    data = read_json(read_input(args.card_file), args.card_file)
    channels = settings.channels
    channel = {"slack": channels.slack, "discord": channels.discord, "matrix": channels.matrix}.get(
        args.channel, channels.telegram
    )
    streaming = channel.streaming if channel else StreamingSettings()
    try:
        mode = Mode(args.mode) if args.mode else streaming.mode
        render_settings = RenderSettings(
            mode=mode,
            maxLines=_given(args.max_lines, streaming.progress.maxLines),
            maxLineChars=_given(args.max_line_chars, streaming.progress.maxLineChars),
            # the card's lines under a partial/block answer: the config's, else --max-lines
            checklistLines=streaming.checklist_lines(mode) if args.max_lines is None else None,
            rich=args.rich,
        )
    except ValidationError as exc:
        name, rule = field_and_rule(exc)
        flag = {"maxLines": "--max-lines", "maxLineChars": "--max-line-chars"}.get(name, name)
        raise UsageError(f"{flag}: {rule}") from None
    payload = payload_for(data, args.channel, render_settings, paused=args.paused, templates_dir=settings.templates.dir)
    if (args.format or ("text" if sys.stdout.isatty() else "json")) == "json":
        print_json(payload)
    else:
        print(TERMINAL_CONTROLS.sub(lambda m: f"\\u{ord(m.group()):04x}", _as_shown(payload)))


def _as_shown(payload: dict[str, Any]) -> str:
    """A payload as a person reads it: Telegram's visible text, the text card, the web HTML."""
    from ..testing.telegram_html import parse
    from ..testing.telegram_rich import rich_text

    if "html" in payload:
        return str(payload["html"])
    if "text" in payload:
        return str(payload["text"] or "(nothing to show)")
    params = payload.get("params", {})
    if payload.get("method") == "deleteMessage":
        return "(no draft: the chat's draft would be deleted)"
    if payload.get("method") == "m.room.redaction":
        return "(no draft: the room's draft would be redacted)"
    if payload.get("method") == "m.room.message":  # Matrix: its plain body
        return str(params.get("body") or "")
    if payload.get("method") == "createMessage":  # Discord: each Text Display as a person reads it
        from ..testing.discord_markdown import components_text, read_markdown

        texts = components_text(params.get("components", [])) or [str(params.get("content", ""))]
        return "\n".join(read_markdown(text).text for text in texts)
    if str(payload.get("method", "")).startswith("chat."):  # Slack: its plain text
        fallback = payload.get("fallback")
        fallback_text = fallback.get("params", {}).get("text") if isinstance(fallback, dict) else None
        return str(fallback_text or params.get("text") or "")
    rich = params.get("rich_message")
    if rich is not None:
        return "\n".join(rich_text(block.get("text", "")) or _list_text(block) for block in rich.get("blocks", []))
    return parse(str(params.get("text", ""))).text


def _list_text(block: dict[str, Any]) -> str:
    from ..testing.telegram_rich import rich_text

    lines = []
    for item in block.get("items", []):
        box = ("☑ " if item.get("is_checked") else "☐ ") if item.get("has_checkbox") else "• "
        lines.append(box + "".join(rich_text(b.get("text", "")) for b in item.get("blocks", [])))
    return "\n".join(lines)
