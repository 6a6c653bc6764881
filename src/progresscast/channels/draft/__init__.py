"""The draft, decided purely: `decide` (the entry) picks the next call from the draft's
state (`state`), the view and the destination's situation; `calls` are the calls,
`replies` folds a reply (`outcome`) back into the state, `conduct` says when to ping,
wait or move below. Nothing here does I/O."""
