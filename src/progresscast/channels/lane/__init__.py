"""One destination's lane: `lane` (the entry) is the one task that calls the
destination, one-off messages first, then the drafts touched there in turn;
`processing` performs for one draft what the pure decision says and stores the result,
`draft_read` is what a decision reads and depends on, `reply_effects` records what a
reply meant, `one_off` sends the messages that are not the draft; `context` is what
the worker hands every part (pace, pause, the calls in flight, the clock)."""
