"""A console of an emulator: what one chat or channel shows, printed as it happens —
each change the app makes, in the order its calls arrived, with the text a person
reads after it. `console.ChatConsole` (Telegram), `slack_console.ChannelConsole`
(Slack) and `discord_console.DiscordConsole` (Discord) say what a call changed; the
order and the printing are kept here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from typing import Generic, TextIO, TypeVar

from ._loopback import LoopbackServer

C = TypeVar("C")


class CallConsole(Generic[C]):
    """Prints each change of the watched chat or channel, as its call is answered."""

    def __init__(self, server: LoopbackServer, out: TextIO) -> None:
        self.server = server
        self.out = out
        self._seen = 0
        self.printed = 0

    @property
    def calls(self) -> Sequence[C]:
        """Every call made to the emulator, in the order they arrived."""
        raise NotImplementedError

    def change(self, call: C) -> tuple[str, str | None] | None:
        """What ``call`` did to the watched chat: a line saying so and the text the message
        shows now (None for a deletion) — or None when it changed nothing there."""
        raise NotImplementedError

    def pending(self, call: C) -> bool:
        """Whether ``call`` is still being answered and keeps its place in the order."""
        raise NotImplementedError

    def _print(self, text: str) -> None:
        print(text, file=self.out, flush=True)
        self.printed += 1

    def show(self, call: C) -> None:
        change = self.change(call)
        if change is None:
            return
        line, text = change
        self._print(line)
        if text is not None:
            self._print(textwrap.indent(text or "(empty)", "    │ ", lambda line: True))

    def catch_up(self) -> None:
        """Print every call answered since the last look, in order."""
        calls = self.calls
        while self._seen < len(calls):
            call = calls[self._seen]
            if self.pending(call):
                return  # still being answered (a call is listed when it arrives): keep the order
            self.show(call)
            self._seen += 1

    async def run(self) -> None:
        """Print calls as they are answered, until cancelled."""
        while True:
            self.catch_up()
            try:
                await self.server.wait_for(self._unseen, timeout=3600)
            except TimeoutError:
                continue

    def _unseen(self) -> bool:
        calls = self.calls
        return self._seen < len(calls) and not self.pending(calls[self._seen])


__all__ = ["CallConsole"]
