"""`progresscast hook claude-code|codex|gemini`: an agent's own events onto its card.

Each hook reads what its agent already emits (a hook event as JSON on stdin, or the
`codex exec --json` stream), writes the agent's todo list as the card's plan, and
starts and ends runs. A hook never blocks or fails its agent: it exits 0 whatever
happens (a wrapped `codex` passes on codex's own exit status) and says what went
wrong on stderr. Gemini CLI reads the hook's stdout as JSON, so that hook prints
`{}` and nothing else.

A hook call is a new process on every agent event, and most of its time would be Python
importing redis-py and pydantic. So a one-event hook call (claude-code, gemini) first
asks this user's warm hook server (server.py) to run it: the call itself imports only
the standard library (client.py, wire.py). With no server answering it runs here
(runner.py) and starts one for the next calls.
"""
