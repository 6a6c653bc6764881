"""The Slack adapter (I/O only): `client` turns payloads into Web API calls and replies
into outcomes, `channel` plugs Slack's settings, renderer and budgets into the shared
channel worker, `commands` serves the signed `/progresscast` slash command on the
gateway, `adapter` runs it all. How a Slack message looks is decided in
`render/slack.py` and `render/slack_payload.py`."""
