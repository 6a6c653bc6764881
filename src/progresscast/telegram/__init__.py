"""The Telegram adapter: chat commands, one live draft per chat
topic and owner, paced Bot API calls.

    bot.py      the python-telegram-bot Application, commands, `run_adapter`
    worker.py   change stream → coalesce → one lane per chat → paced calls
    pacing.py   per-chat and per-bot pacing
    sender.py   Bot API calls and what their errors mean
    follows.py  followers, chat overrides and draft states in Redis
    options.py  what can be tuned besides the config
The decisions themselves (send / edit / delete / nothing) are `progresscast.drafts`.
"""
