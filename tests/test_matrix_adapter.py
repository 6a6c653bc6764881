"""The Matrix adapter against a real Synapse homeserver (tests/synapse_server.py)."""

from __future__ import annotations

from synapse_server import Synapse


def test_synapse_registers_users(synapse: Synapse) -> None:
    bot = synapse.register("bot")
    assert synapse.request(bot, "GET", "/_matrix/client/v3/account/whoami")["user_id"] == bot.user_id
