"""`progresscast serve` with `[channels.matrix]` against the session's Synapse: it runs
the Matrix adapter (behind the account's lease), and a refused access token is one line."""

from __future__ import annotations

import re

from synapse_server import Synapse
from test_serve import GATEWAY, TOKEN, one_line, running, start  # noqa: F401 (start: the fixture)


def matrix_table(synapse: Synapse, user_id: str) -> str:
    return (
        f'[channels.matrix]\nhomeserver = "{synapse.url}"\nuserId = "{user_id}"\n'
        'accessToken = "env:MATRIX_ACCESS_TOKEN"\n'
    )


async def test_serve_runs_the_matrix_adapter(start, synapse: Synapse) -> None:  # noqa: F811
    bot = synapse.register("bot")
    text = GATEWAY.format(listen="127.0.0.1:0") + matrix_table(synapse, bot.user_id)
    serve = await running(start, text, MATRIX_ACCESS_TOKEN=bot.access_token)
    await serve.line_matching(rf"matrix {re.escape(bot.user_id)}: took its lease")
    await serve.line_matching(rf"Matrix adapter running as {re.escape(bot.user_id)}")


async def test_a_refused_matrix_token_is_one_line(start, synapse: Synapse) -> None:  # noqa: F811
    bot = synapse.register("bot")
    text = GATEWAY.format(listen="127.0.0.1:0") + matrix_table(synapse, bot.user_id)
    serve = await start(text, PROGRESSCAST_TOKEN=TOKEN, MATRIX_ACCESS_TOKEN="syt_wrong")
    assert await serve.finished() == 2
    assert one_line(serve).startswith("progresscast: channels.matrix.accessToken: the homeserver says M_UNKNOWN_TOKEN")
