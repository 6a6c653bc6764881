"""`progresscast serve` with `[channels.matrix]` against the session's Synapse: it runs
the Matrix adapter (behind the account's lease), and a refused access token is one line."""

from __future__ import annotations

import asyncio
import re
import signal
import time

from progresscast.testing.synapse import CLIENT
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
    # A room's events reach the adapter (the stranger room's invite is answered with a
    # pairing code); matrix-nio's own line for each event it handles is not logged.
    person = synapse.register("person")
    room = synapse.create_room(person, invite=[bot.user_id])
    synapse.request(person, "PUT", f"{CLIENT}/rooms/{room}/send/m.room.message/t1", {"msgtype": "m.text", "body": "hi"})

    def bot_said() -> bool:
        events = synapse.request(person, "GET", f"{CLIENT}/rooms/{room}/messages?dir=b&limit=50")["chunk"]
        return any(e["sender"] == bot.user_id and e["type"] == "m.room.message" for e in events)

    deadline = time.monotonic() + 30
    while not bot_said():
        assert time.monotonic() < deadline, "the bot never answered in the room"
        await asyncio.sleep(0.2)
    serve.proc.send_signal(signal.SIGTERM)
    assert await serve.finished() == 0
    assert [line for line in serve.lines if "Matrix adapter running" in line]
    assert not [line for line in serve.lines if " nio." in line], serve.lines


async def test_a_refused_matrix_token_is_one_line(start, synapse: Synapse) -> None:  # noqa: F811
    bot = synapse.register("bot")
    text = GATEWAY.format(listen="127.0.0.1:0") + matrix_table(synapse, bot.user_id)
    serve = await start(text, PROGRESSCAST_TOKEN=TOKEN, MATRIX_ACCESS_TOKEN="syt_wrong")
    assert await serve.finished() == 2
    assert one_line(serve).startswith("progresscast: channels.matrix.accessToken: the homeserver says M_UNKNOWN_TOKEN")
