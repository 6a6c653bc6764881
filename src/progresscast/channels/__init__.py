"""What every chat channel shares (docs/architecture.md, "The draft path").

Three rooms, each read through one entry module:

- `draft/`  — pure: `draft.decide` turns (draft state, view, situation) into the next
  call, and folds the reply to it back into the state. No I/O, no clock.
- `lane/`   — one destination's lane: `lane.lane` is the one task calling it, in turn
  for each draft touched there (read, decide, call, store) and for one-off messages.
- `chat/`   — people talking to the bot: `chat.commands` (the commands, written once),
  who may (access, pairing), pause, destinations and invocations.

Beside them: `worker` (change stream → lanes → paced calls; the entry of `serve`),
`channel` (what a platform plugs in: renderer, client, budgets), `pacing` (budgets per
destination and bot), `state/` (follows, prefs, drafts and message ids in Redis, a
module each; `state.holder.ChannelState` holds them), `asks` (ask messages and presses),
`intake` (the change stream), `standby` (the lease).
"""
