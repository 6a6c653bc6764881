"""Interactions as Discord sends them: signed with the application's Ed25519 key.

The emulator's half of the HTTP interactions endpoint: a `PING` (what the developer
portal sends when the URL is saved), a slash command typed by a member of a
channel, built from the registered command definition, a button pressed on a message
(`MESSAGE_COMPONENT`) and a modal the app opened, filled in and submitted
(`MODAL_SUBMIT`) — each POSTed to the app's interactions URL with `X-Signature-Ed25519`
over `X-Signature-Timestamp` + the body. What the app answered each is kept
(:attr:`InteractionSender.responses`); a modal it answered with (type 9) is shown to
the person who pressed, until they submit it. An `UPDATE_MESSAGE` answer (type 7)
changes the message the component was on as an edit would (the same checks; a modal
submit's message is the one its button was on); Discord takes it only for an
interaction that has such a message — for any other (a command, a crafted modal
submit), or for data an edit could not carry, the message stays as it was and
Discord's error, 50035 Invalid Form Body naming the field, is kept in
:attr:`InteractionSender.refused`.
"""

from __future__ import annotations

import json
import time
from typing import Any, TypedDict, Unpack

import httpx
from nacl.signing import SigningKey

from ..discord.presses import MODAL, UPDATE_MESSAGE
from ._discord_state import (
    SUPPRESS_NOTIFICATIONS,
    UNKNOWN_MESSAGE,
    DiscordChannel,
    DiscordError,
    check_body,
    error,
    invalid_form,
    snowflake,
)

PERSON_ID = "400000000000000001"
ALL_PERMISSIONS = str((1 << 47) - 1)
MANAGE_CHANNELS = 1 << 4
MEMBER_PERMISSIONS = str((1 << 10) | (1 << 11))
"""View Channel and Send Messages: a member who may read and write, nothing more."""
MESSAGE_COMPONENT, MODAL_SUBMIT = 3, 5
BUTTON, TEXT_INPUT = 2, 4


class Member(TypedDict, total=False):
    """Who acts in a channel (`press`, `submit_modal`); a key left out takes its default."""

    user_id: str
    """Default `PERSON_ID`."""
    name: str
    """Their display name (default "Tester")."""
    nick: str | None
    """Their nickname in the guild (default: none)."""
    manage_channels: bool
    """Whether they hold Manage Channels there (default); else a member who may only
    read and write."""
    guild: bool
    """A guild's channel (default), or a DM."""


class InteractionSender:
    """What the emulator needs to send interactions (mixed into `DiscordAPIEmulator`)."""

    signing_key: SigningKey
    interactions_url: str | None
    application_id: str
    guild_id: str
    commands: dict[str | None, list[dict[str, Any]]]
    interactions: list[tuple[dict[str, Any], int]]
    responses: list[tuple[dict[str, Any], Any]]
    """Every interaction sent, with the JSON the app answered (None: no JSON)."""
    modals: dict[tuple[str, str], tuple[dict[str, Any], str | None]]
    """The modal each (channel, user) sees, with the message it was opened from."""
    refused: list[tuple[dict[str, Any], dict[str, Any]]]
    """Every answer Discord did not apply: the interaction, with Discord's error body."""
    components_v2: bool
    _channels: dict[str, DiscordChannel]

    def _notify(self) -> None:
        raise NotImplementedError

    @property
    def public_key(self) -> str:
        """The application's public key, hex (what `channels.discord.publicKey` holds)."""
        return bytes(self.signing_key.verify_key).hex()

    def sign(self, body: bytes, timestamp: str | None = None) -> dict[str, str]:
        stamp = timestamp or str(int(time.time()))
        signature = self.signing_key.sign(stamp.encode() + body).signature.hex()
        return {"X-Signature-Ed25519": signature, "X-Signature-Timestamp": stamp, "Content-Type": "application/json"}

    async def send_interaction(
        self,
        payload: dict[str, Any],
        url: str | None = None,
        *,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
        timeout: float = 3.0,
    ) -> httpx.Response:
        """POST an interaction signed like Discord (``headers`` override, to test refusals);
        the app has Discord's 3 seconds to answer."""
        target = url or self.interactions_url
        if not target:
            raise ValueError("no interactions URL: pass url= or set interactions_url")
        raw = body if body is not None else json.dumps(payload).encode()
        sent = {**self.sign(raw), **(headers or {})}
        async with httpx.AsyncClient(timeout=timeout) as http:
            response = await http.post(target, content=raw, headers=sent)
        self.interactions.append((payload, response.status_code))
        try:
            answered = response.json()
        except ValueError:
            answered = None
        self.responses.append((payload, answered))
        if isinstance(answered, dict) and answered.get("type") == MODAL and payload.get("channel_id"):
            user = (payload.get("member") or payload).get("user") or {}
            message = payload.get("message") or {}
            shown = (answered.get("data") or {}, message.get("id"))
            self.modals[str(payload["channel_id"]), str(user.get("id"))] = shown
        if isinstance(answered, dict) and answered.get("type") == UPDATE_MESSAGE:
            try:
                self._update_message(payload, answered.get("data"))
            except DiscordError as exc:
                self.refused.append((payload, exc.envelope()))
        self._notify()
        return response

    def _update_message(self, payload: dict[str, Any], data: Any) -> None:
        """Type 7: the message the component was on takes `data`, as an edit would."""
        message = payload.get("message")
        if payload.get("type") not in (MESSAGE_COMPONENT, MODAL_SUBMIT) or not isinstance(message, dict):
            raise invalid_form(
                "type", "INTERACTION_RESPONSE_TYPE_INVALID",
                "UPDATE_MESSAGE is only valid for an interaction on a message component",
            )
        if data is None:
            data = {}  # an update with nothing in it changes nothing, and is no error
        if not isinstance(data, dict):
            raise invalid_form("data", "MODEL_TYPE_CONVERT", "Expected an object/dictionary.")
        channel = self._channels.get(str(payload.get("channel_id")))
        msg = channel.messages.get(str(message.get("id"))) if channel is not None else None
        if msg is None:
            raise error(UNKNOWN_MESSAGE)
        # A response's data may say SUPPRESS_NOTIFICATIONS, meaningless for an update.
        said = data.get("flags")
        body = {**data, "flags": said & ~SUPPRESS_NOTIFICATIONS} if isinstance(said, int) else data
        flags, content, components = check_body(body, edit=True, v2_allowed=self.components_v2,
                                                was_v2=msg.components_v2)
        msg.apply_edit(body, flags, content, components)

    async def ping(self, url: str | None = None) -> httpx.Response:
        """What Discord sends when the interactions URL is saved in the developer portal."""
        return await self.send_interaction(self._interaction(1, None, None, {}), url)

    async def slash_command(
        self,
        url: str | None,
        text: str,
        *,
        channel_id: str = "200000000000000001",
        user_id: str = PERSON_ID,
        permissions: int | str = ALL_PERMISSIONS,
        command: str = "progresscast",
        guild: bool = True,
        headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """A person types ``/<command> <text>`` in a channel: the first word picks the
        subcommand, the rest fill its options in order (the registered definition's).
        ``permissions``: the member's permissions in the channel (default: all)."""
        words = text.split()
        data: dict[str, Any] = {"id": snowflake(), "name": command, "type": 1}
        definition = self._definition(command)
        if words:
            sub = next((o for o in definition.get("options", []) if o.get("name") == words[0]), None)
            if sub is None:
                raise ValueError(f"/{command} has no subcommand {words[0]!r}")
            params = sub.get("options", [])
            if len(words) - 1 > len(params):
                raise ValueError(f"/{command} {words[0]} takes at most {len(params)} options")
            options = [
                {"name": p["name"], "type": p["type"], "value": w} for p, w in zip(params, words[1:], strict=False)
            ]
            data["options"] = [{"name": words[0], "type": 1, "options": options}]
        payload = self._interaction(2, data, channel_id, {"user_id": user_id, "guild": guild}, str(permissions))
        return await self.send_interaction(payload, url, headers=headers)

    async def press(
        self, channel_id: str, message_id: str, wanted: str, *, forged: bool = False, url: str | None = None,
        **member: Unpack[Member],
    ) -> httpx.Response:
        """A person (`member`) presses the button whose `custom_id` or label is `wanted`
        on a message. `forged`: send `wanted` as the `custom_id` whatever the message
        holds (a crafted interaction)."""
        channel = self._channels[channel_id]
        msg = channel.messages.get(message_id)
        button = msg.button(wanted) if msg is not None else None
        if button is None and not forged:
            raise ValueError(f"message {message_id} has no button {wanted!r}")
        custom_id = str(button["custom_id"]) if button is not None and not forged else wanted
        data = {"custom_id": custom_id, "component_type": BUTTON}
        payload = self._interaction(MESSAGE_COMPONENT, data, channel_id, member)
        payload["message"] = self._message_api(channel, message_id)
        return await self.send_interaction(payload, url)

    async def submit_modal(
        self, channel_id: str, text: str, *, custom_id: str | None = None, url: str | None = None,
        **member: Unpack[Member],
    ) -> httpx.Response:
        """The person (`member`) fills the modal the app showed them with `text` and
        submits it (`custom_id`: a crafted submit, no modal needed)."""
        user_id = member.get("user_id", PERSON_ID)
        shown, message_id = self.modals.pop((channel_id, user_id), ({}, None))
        if custom_id is None and not shown:
            raise ValueError(f"user {user_id} has no modal open in channel {channel_id}")
        inputs = [c for c in _walk(shown.get("components") or []) if c.get("type") == TEXT_INPUT]
        field_id = str(inputs[0]["custom_id"]) if inputs else "answer"
        data = {
            "custom_id": custom_id if custom_id is not None else str(shown.get("custom_id")),
            "components": [{"type": 1, "components": [{"type": TEXT_INPUT, "custom_id": field_id, "value": text}]}],
        }
        payload = self._interaction(MODAL_SUBMIT, data, channel_id, member)
        if message_id is not None:
            payload["message"] = self._message_api(self._channels[channel_id], message_id)
        return await self.send_interaction(payload, url)

    def _message_api(self, channel: DiscordChannel, message_id: str) -> dict[str, Any]:
        msg = channel.messages.get(message_id)
        if msg is None:
            return {"id": message_id, "channel_id": channel.id}
        return {"id": msg.id, "channel_id": channel.id, "content": msg.content, "components": msg.components,
                "flags": msg.flags, "author": {"id": msg.author_id}}

    def _definition(self, command: str) -> dict[str, Any]:
        for scope in (self.guild_id, None):
            for definition in self.commands.get(scope, []):
                if definition.get("name") == command:
                    return definition
        raise ValueError(f"/{command} is not registered (run `progresscast discord register` against the emulator)")

    def _interaction(
        self, kind: int, data: dict[str, Any] | None, channel_id: str | None, member: Member,
        permissions: str | None = None,
    ) -> dict[str, Any]:
        """An interaction as Discord sends it; `permissions` the member's in the channel
        (None: as `member.manage_channels` says)."""
        if permissions is None:
            permissions = ALL_PERMISSIONS if member.get("manage_channels", True) else MEMBER_PERMISSIONS
        user = {
            "id": member.get("user_id", PERSON_ID), "username": "tester", "discriminator": "0",
            "global_name": member.get("name", "Tester"), "avatar": None,
        }
        payload: dict[str, Any] = {
            "id": snowflake(),
            "application_id": self.application_id,
            "type": kind,
            "token": "interaction-token",
            "version": 1,
            "locale": "en-US",
            "app_permissions": ALL_PERMISSIONS,
        }
        if data is not None:
            payload["data"] = data
        if channel_id is not None:
            known = self._channels.get(channel_id)
            thread = known is not None and known.parent_id is not None
            payload["channel_id"] = channel_id
            payload["channel"] = {"id": channel_id, "type": 11 if thread else 0}
        if member.get("guild", True):
            payload["guild_id"] = self.guild_id
            payload["member"] = {
                "user": user,
                "roles": [],
                "permissions": permissions,
                "nick": member.get("nick"),
                "joined_at": "2026-01-01T00:00:00+00:00",
            }
        else:
            payload["user"] = user
        return payload


def _walk(components: list[Any]) -> list[dict[str, Any]]:
    """Every component, nested ones included (a row's, a label's `component`)."""
    out: list[dict[str, Any]] = []
    for c in components:
        if isinstance(c, dict):
            out.append(c)
            out += _walk(c.get("components") or [])
            if isinstance(c.get("component"), dict):
                out += _walk([c["component"]])
    return out


__all__ = ["ALL_PERMISSIONS", "MANAGE_CHANNELS", "MEMBER_PERMISSIONS", "PERSON_ID", "InteractionSender"]
