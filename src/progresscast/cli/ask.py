"""`progresscast ask`: put a question to the people following a session, and wait.

Prints the chosen label(s), one per line, or the typed answer. Exit status: 0 answered,
3 no answer in time (the ask expired), 4 withdrawn or the run was stopped; stopped while
it waits, it withdraws the ask and exits 130 (Ctrl-C) or 143 (SIGTERM).
"""

from __future__ import annotations

import argparse
import signal
import sys
from typing import TYPE_CHECKING

from ..stopping import Terminated, run_stoppable
from .card import owner_of, with_store

if TYPE_CHECKING:
    from collections.abc import Sequence

    from ..config.settings import Settings
    from ..model.asks import Ask, AskInput
    from ..model.owners import Owner
    from ..store.cards import CardStore

ANSWERED, NO_ANSWER, WITHDRAWN = 0, 3, 4
EXPIRY_SEEN_WITHIN = 5.0
"""Seconds past the ask's expiry the wait lasts, to end on the expiry itself."""


def ask_command(args: argparse.Namespace, settings: Settings) -> int:
    from ..model.asks import AskInput

    owner = owner_of(args, settings)
    kind = "approval" if args.approval else ("text" if args.text and not args.option else "choice")
    body: dict[str, object] = {
        "kind": kind, "prompt": args.prompt, "source": "cli", "multi": args.multi,
        "allowText": bool(args.text), "timeoutSeconds": args.timeout,
    }
    if args.option:
        body["options"] = args.option
    if args.detail is not None:
        body["detail"] = args.detail
    from ..model.card import CardError

    try:
        ask = AskInput.parse(body)
    except CardError as exc:  # named as the command line names them
        flag = {"options": "--option", "prompt": "PROMPT", "detail": "--detail", "multi": "--multi"}
        field, _, item = exc.field.partition("[")
        name = flag.get(field, exc.field)
        if field == "options" and item[:-1].isdigit():  # `options[1]`: the second --option
            name = f"--option #{int(item[:-1]) + 1}"
        raise CardError(name, exc.rule) from None
    try:  # SIGTERM (a script's `timeout`, an agent giving up): the ask is withdrawn, as on Ctrl-C
        status, lines = run_stoppable(with_store(args, settings, lambda store: _ask_and_wait(store, owner, ask)))
    except Terminated:
        raise SystemExit(128 + signal.SIGTERM) from None
    for line in lines:
        print(line)
    return int(status)


async def _ask_and_wait(store: CardStore, owner: Owner, body: AskInput) -> tuple[int, list[str]]:
    from ..agents.asking import ask_and_wait

    if not await store.asks.followed(owner):  # else it would wait its whole timeout unseen in chat
        print(
            f"progresscast: no chat follows {owner.display_key} yet: the ask shows on its web card, "
            "and in a chat once one follows the session", file=sys.stderr,
        )

    def opened(asks: Sequence[Ask]) -> None:
        print(f"progresscast: asked {owner.display_key} ({asks[0].ask_id}); waiting for an answer", file=sys.stderr)

    # The ask's own expiry ends the wait (exit 3); the margin only lets it be seen as such.
    waited = await ask_and_wait(store, owner, [body], body.timeoutSeconds + EXPIRY_SEEN_WITHIN, opened_all=opened)
    if waited.stop is not None:  # before the ask was opened, or while it waited: withdrawn
        print("progresscast: the run was stopped from chat", file=sys.stderr)
        return WITHDRAWN, []
    ended = waited.answered[0] if waited.answered else waited.ended
    if ended is None:
        print("progresscast: no answer in time", file=sys.stderr)
        return NO_ANSWER, []
    return _outcome(ended)


def _outcome(ask: Ask) -> tuple[int, list[str]]:
    from ..model.asks import AskState

    if ask.state is AskState.answered and ask.answer is not None:
        by = ask.answer.by
        print(f"progresscast: answered by {by.shown} ({by.platform})", file=sys.stderr)
        lines = list(ask.answer.options)
        if ask.answer.text is not None:
            lines.append(ask.answer.text)
        return ANSWERED, lines
    if ask.state is AskState.expired:
        print("progresscast: no answer in time", file=sys.stderr)
        return NO_ANSWER, []
    print("progresscast: the ask was withdrawn", file=sys.stderr)
    return WITHDRAWN, []
