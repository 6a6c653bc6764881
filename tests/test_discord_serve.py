"""`progresscast serve` with `[channels.discord]`: it runs the Discord adapter, its
interactions route is on the gateway, and a refused token is one line."""

from __future__ import annotations

from progresscast.testing import DiscordAPIEmulator
from test_serve import GATEWAY, TOKEN, one_line, running, start  # noqa: F401 (start: the fixture)

CHANNEL = "200000000000000001"


def discord_table(discord: DiscordAPIEmulator, token: str) -> str:
    return (
        f'[channels.discord]\ntoken = "{token}"\napplicationId = "{discord.application_id}"\n'
        f'publicKey = "{discord.public_key}"\napiBaseUrl = "{discord.base_url}"\n'
        f'[[channels.discord.channels]]\nid = "{CHANNEL}"\nsessions = ["*"]\n'
    )


async def test_serve_runs_the_discord_adapter_and_its_interactions_route(start) -> None:  # noqa: F811
    async with DiscordAPIEmulator(channels=[CHANNEL]) as discord:
        serve = await running(start, GATEWAY.format(listen="127.0.0.1:0") + discord_table(discord, discord.token))
        await serve.line_matching(r"Discord adapter running as user")
        pong = await discord.ping(f"{serve.base}/discord/interactions")
        assert pong.status_code == 200 and pong.json() == {"type": 1}
        assert [c.route for c in discord.calls][:1] == ["me"]


async def test_a_refused_discord_token_is_one_line(start) -> None:  # noqa: F811
    async with DiscordAPIEmulator(channels=[CHANNEL]) as discord:
        text = GATEWAY.format(listen="127.0.0.1:0") + discord_table(discord, "wrong-token")
        serve = await start(text, PROGRESSCAST_TOKEN=TOKEN)
        assert await serve.finished() == 2
    assert one_line(serve).startswith("progresscast: channels.discord.token: Discord refused it (401 Unauthorized)")
