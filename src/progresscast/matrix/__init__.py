"""The Matrix adapter (I/O only): `client` turns payloads into client-server API calls
and replies into outcomes, `channel` plugs Matrix's settings, renderer, budgets and
access into the shared channel worker, `sync` reads `/sync` for invites and `!pc`
commands and hands each to the shared command handler (`channels.commands`), `adapter`
runs it all behind the account's lease. How a Matrix message looks is decided in
`render/matrix.py` and `render/matrix_payload.py`."""
