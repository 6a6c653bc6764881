"""The Discord adapter (I/O only): `client` turns payloads into REST calls (`rest`, httpx;
no gateway WebSocket) and answers into outcomes, `breaker` keeps the bot far
from Discord's invalid-request ban, `channel` plugs Discord's settings, renderer and
budgets into the shared channel worker, `interactions` serves the signed
`/progresscast` slash command on the gateway (`commands` hands it to the handler every
platform shares, `channels/chat/commands.py`), `register` puts
the command definition, `adapter` runs it all. How a Discord message looks is decided
in `render/discord.py` and `render/discord_payload.py`."""
