"""Test helpers shipped with progresscast, like Starlette's TestClient.

- :class:`BotAPIEmulator` — a loopback Telegram Bot API server that behaves like Telegram.
- :func:`parse` / :func:`visible_length` — Telegram's HTML parse mode, with its exact errors.
- :class:`SlackAPIEmulator` — a loopback Slack Web API that behaves like Slack (Block Kit
  limits, error strings, rate limits), and sends slash commands signed like Slack.
- :func:`read_mrkdwn` / :func:`blocks_text` / :func:`check_blocks` — Slack's formats as a reader sees them.
- :class:`DiscordAPIEmulator` — a loopback Discord REST API (Components V2 checks, error codes,
  per-route buckets and the global limit with their headers), which signs interactions with
  an Ed25519 key of its own.
- :func:`read_markdown` — Discord's Markdown as a reader sees it (its mentions and links).
- :func:`press_words` / :func:`pressed_button` / :func:`asks` — an emulator console's
  `press N [on MESSAGE]`, and the open questions its `reply` answers.
"""

from ._console import asks, press_words, pressed_button
from ._discord_state import DiscordCall, DiscordChannel, DiscordMessage
from ._faults import FaultMix, RandomFaults
from ._html_lexer import TelegramHTMLError
from ._pacing import BOT_PACE, GROUP_PACE, PRIVATE_PACE, Pace
from ._slack_state import SlackCall, SlackChannel, SlackMessage
from ._state import Call, ChatState, ShownMessage
from .botapi import DEFAULT_TOKEN, BotAPIEmulator
from .discord_markdown import read_markdown
from .discordapi import DiscordAPIEmulator
from .slack_blocks import InvalidBlocks, Shown, blocks_text, check_blocks, read_mrkdwn
from .slackapi import SlackAPIEmulator
from .telegram_html import (
    MAX_TEXT,
    Entity,
    ParsedText,
    fix_text,
    parse,
    utf16_len,
    visible_length,
)

__all__ = [
    "BOT_PACE",
    "DEFAULT_TOKEN",
    "GROUP_PACE",
    "MAX_TEXT",
    "PRIVATE_PACE",
    "BotAPIEmulator",
    "Call",
    "ChatState",
    "DiscordAPIEmulator",
    "DiscordCall",
    "DiscordChannel",
    "DiscordMessage",
    "Entity",
    "FaultMix",
    "InvalidBlocks",
    "Pace",
    "ParsedText",
    "RandomFaults",
    "Shown",
    "ShownMessage",
    "SlackAPIEmulator",
    "SlackCall",
    "SlackChannel",
    "SlackMessage",
    "TelegramHTMLError",
    "asks",
    "blocks_text",
    "check_blocks",
    "fix_text",
    "parse",
    "press_words",
    "pressed_button",
    "read_markdown",
    "read_mrkdwn",
    "utf16_len",
    "visible_length",
]
