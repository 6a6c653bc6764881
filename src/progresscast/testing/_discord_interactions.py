"""Interactions as Discord sends them: signed with the application's Ed25519 key.

The emulator's half of the HTTP interactions endpoint: a `PING` (what the developer
portal sends when the URL is saved) and a slash command typed by a member of a
channel, built from the registered command definition, POSTed to the app's
interactions URL with `X-Signature-Ed25519` over `X-Signature-Timestamp` + the body.
"""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
from nacl.signing import SigningKey

from ._discord_state import DiscordChannel, snowflake

PERSON_ID = "400000000000000001"
ALL_PERMISSIONS = str((1 << 47) - 1)
MANAGE_CHANNELS = 1 << 4


class InteractionSender:
    """What the emulator needs to send interactions (mixed into `DiscordAPIEmulator`)."""

    signing_key: SigningKey
    interactions_url: str | None
    application_id: str
    guild_id: str
    commands: dict[str | None, list[dict[str, Any]]]
    interactions: list[tuple[dict[str, Any], int]]
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
        self._notify()
        return response

    async def ping(self, url: str | None = None) -> httpx.Response:
        """What Discord sends when the interactions URL is saved in the developer portal."""
        return await self.send_interaction(self._interaction(1, None, None, PERSON_ID, ALL_PERMISSIONS), url)

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
        payload = self._interaction(2, data, channel_id, user_id, str(permissions), guild=guild)
        return await self.send_interaction(payload, url, headers=headers)

    def _definition(self, command: str) -> dict[str, Any]:
        for scope in (self.guild_id, None):
            for definition in self.commands.get(scope, []):
                if definition.get("name") == command:
                    return definition
        raise ValueError(f"/{command} is not registered (run `progresscast discord register` against the emulator)")

    def _interaction(
        self,
        kind: int,
        data: dict[str, Any] | None,
        channel_id: str | None,
        user_id: str,
        permissions: str,
        *,
        guild: bool = True,
    ) -> dict[str, Any]:
        user = {"id": user_id, "username": "tester", "discriminator": "0", "global_name": "Tester", "avatar": None}
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
        if guild:
            payload["guild_id"] = self.guild_id
            payload["member"] = {
                "user": user,
                "roles": [],
                "permissions": permissions,
                "joined_at": "2026-01-01T00:00:00+00:00",
            }
        else:
            payload["user"] = user
        return payload


__all__ = ["ALL_PERMISSIONS", "MANAGE_CHANNELS", "PERSON_ID", "InteractionSender"]
