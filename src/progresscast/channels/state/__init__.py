"""A chat channel's state in Redis, one concept a module; key names live in `store/keys.py`
(its chat-channel section), under the channel's short name.

- `holder`   — `ChannelState`: every part below for one channel, made once per adapter,
  and the one read that crosses them (`DraftFollowing`: what a draft's decision reads).
- `ids`      — `Id` (a destination or thread) and `DraftKey` (one draft).
- `scope`    — what every part shares: the Redis, the key prefix, how ids parse, the
  bot's lease, and which keys were lately kept alive (the store's retention).
- `follows`  — who follows what, from both sides, and the set of destinations.
- `prefs`    — a destination's overrides (`ChatPrefs`: its mode and rich commands).
- `drafts`   — each draft's stored state, written under the lease's fence.
- `messages` — message ids: the newest seen, the ones we sent, the newest heard below.
- `bot`      — the bot's own facts: the server refused rich messages.

What a destination makes lives the store's retention (retention.py) past its last use:
a follow when it is made and whenever its draft changes, overrides when set, message ids
when seen, drafts when stored. A destination that stopped following (its follows
expired) leaves the set of destinations when the worker prunes it
(`Follows.prune_destinations`).
"""
