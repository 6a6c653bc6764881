"""`progresscast render CARD.json` (docs/cli.md): the payload a channel would get."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from ..config.base import RenderSettings
from ..model.activity import Activity
from ..model.card import Card, CardError, CardInput
from ..model.owners import Owner
from ..model.view import View
from .discord import render_discord
from .matrix import render_matrix
from .slack import render_slack
from .telegram import render_telegram
from .text import render_text
from .web import render_web

CHANNELS = ("telegram", "slack", "discord", "matrix", "text", "web")


class _DraftRenderer(Protocol):
    def __call__(
        self, view: View, settings: RenderSettings, *, templates_dir: str | Path | None = None
    ) -> dict[str, Any] | None: ...


_DRAFTS: dict[str, tuple[_DraftRenderer, str]] = {
    "telegram": (render_telegram, "deleteMessage"),
    "slack": (render_slack, "chat.delete"),
    "matrix": (render_matrix, "m.room.redaction"),
    "discord": (render_discord, "deleteMessage"),
}
"""A chat channel's draft renderer, and the call that removes an empty draft."""

PREVIEW_SESSION = "preview"
PREVIEW_AGENT = "main"
_PLACEHOLDER_TIME = "1970-01-01T00:00:00Z"


def _string(data: dict[str, Any], name: str, default: str) -> str:
    value = data.get(name, default)
    if value is None:
        return default
    if not isinstance(value, str) or not value.strip():
        raise CardError(name, "must be a non-empty string")
    return value.strip()


def view_from_data(data: Any, paused: bool = False) -> View:
    """A View from what `card get` prints or from a write's input.

    A write's input (`{plan?, markdown?}`) is validated with `CardInput.parse` and
    shown as session "preview" of agent "main", revision 1. What `card get` prints
    (it has `sessionKey`/`revision`/…) keeps its owner and revision; its plan and
    markdown are validated the same way. Either may carry an `activity` object
    (`{headline?, tools?, answer?}`) to preview partial/block drafts. `null` (no
    card) and a clearing write give a view with no card. Raises CardError naming the
    bad field."""
    if data is None:
        return View(owner=Owner(PREVIEW_AGENT, PREVIEW_SESSION), paused=paused)
    if not isinstance(data, dict):
        raise CardError("card", "must be a JSON object with optional 'plan' and 'markdown'")
    data = dict(data)
    activity = Activity.parse(data.pop("activity")) if data.get("activity") is not None else Activity()
    data.pop("activity", None)
    stored = any(k in data for k in ("sessionKey", "agentId", "displayKey", "revision", "updatedAt"))
    if stored:
        card_input = CardInput.parse({k: data[k] for k in ("plan", "markdown") if data.get(k) is not None})
        session = _string(data, "sessionKey", PREVIEW_SESSION)
        agent = _string(data, "agentId", PREVIEW_AGENT)
        revision = data.get("revision", 1)
        if isinstance(revision, bool) or not isinstance(revision, int) or revision < 1:
            raise CardError("revision", "must be a positive integer")
        updated = data.get("updatedAt") if isinstance(data.get("updatedAt"), str) else _PLACEHOLDER_TIME
    else:
        card_input = CardInput.parse(data)
        session, agent, revision, updated = PREVIEW_SESSION, PREVIEW_AGENT, 1, _PLACEHOLDER_TIME
    owner = Owner(agent, session)
    card = None
    if not card_input.clears and (card_input.plan or card_input.markdown is not None):
        card = Card(
            sessionKey=session,
            agentId=agent,
            displayKey=owner.display_key,
            revision=revision,
            plan=card_input.plan,
            markdown=card_input.markdown,
            updatedAt=str(updated),
        )
    return View(owner=owner, card=card, activity=activity, paused=paused)


def payload_for(
    data: Any,
    channel: str,
    settings: RenderSettings,
    paused: bool = False,
    *,
    templates_dir: str | Path | None = None,
) -> dict[str, Any]:
    """What `progresscast render` prints: `{"method", "params"}` for Telegram (the
    call that would send the draft; `deleteMessage` with no params when the draft
    would be empty or the mode is off), the same for Slack (`chat.postMessage` or,
    rich, `chat.startStream`, each with its `fallback`; `chat.delete` when empty),
    for Discord `createMessage` with Components V2 and its plain `fallback`
    (`deleteMessage` when empty),
    for Matrix `{"method": "m.room.message", "params": content, "fallback"}`
    (`m.room.redaction` with no params when the draft would be redacted),
    `{"text": str | None}` for text, `{"html": str}` for web. Raises CardError for
    bad input, ValueError for an unknown channel."""
    if channel not in CHANNELS:
        raise ValueError(f"channel must be one of {', '.join(CHANNELS)}")
    view = view_from_data(data, paused)
    if channel in _DRAFTS:
        render, removal = _DRAFTS[channel]
        payload = render(view, settings, templates_dir=templates_dir)
        return payload if payload is not None else {"method": removal, "params": {}}
    if channel == "text":
        return {"text": render_text(view, settings, templates_dir=templates_dir)}
    return {"html": render_web(view, settings, templates_dir=templates_dir)}
