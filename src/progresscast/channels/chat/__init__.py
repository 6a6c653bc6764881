"""People talking to the bot, written once for every platform: `commands` (the entry)
answers follow, unfollow, card, mode, rich and help; `access` says who may (owners, allow lists, pairing),
`invocation` is one command as a platform hands it over, `pause` and `destinations`
are the chat's own settings."""
