"""The Matrix adapter (I/O only): `client` turns payloads into client-server API calls
and replies into outcomes, `channel` plugs Matrix's settings, renderer and budgets into
the shared channel worker, `sync` reads `/sync` for invites and `!pc` commands,
`commands` answers them, `adapter` runs it all behind the account's lease. How a
Matrix message looks is decided in `render/matrix.py` and `render/matrix_payload.py`."""
