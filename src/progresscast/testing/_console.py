"""A console of an emulator: what one chat or channel shows, printed as it happens —
each change the app makes, in the order its calls arrived, with the text a person
reads after it. `console.ChatConsole` (Telegram), `slack_console.ChannelConsole`
(Slack) and `discord_console.DiscordConsole` (Discord) say what a call changed; the
order and the printing are kept here.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TextIO, TypeVar

from ..model.asks import parse_control

C = TypeVar("C")
C_co = TypeVar("C_co", covariant=True)


class Recording(Protocol[C_co]):
    """An emulator as a console sees it: its calls, and a wait for the next change."""

    @property
    def calls(self) -> Sequence[C_co]:
        """Every call made to it, in the order they arrived."""
        ...

    async def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0) -> Any: ...


S = TypeVar("S", bound=Recording[Any])
M = TypeVar("M")
W = TypeVar("W")


def asks(text: str) -> bool:
    """Whether a message is a question still open, as a person reads it: its first line
    says who `asks:` (an answered one says how it ended). What `reply` answers."""
    return "asks:" in text.split("\n", 1)[0]


def press_words(rest: str) -> tuple[int, str | None] | None:
    """What follows `press` on a console: `N` (the newest open question, else the newest
    message with buttons) or `N on MESSAGE` (that message, by the id the console
    printed); None: neither."""
    words = rest.split()
    if len(words) == 1 and words[0].isdigit():
        return int(words[0]), None
    if len(words) == 3 and words[0].isdigit() and words[1] == "on":
        return int(words[0]), words[2]
    return None


def pressed_button(
    rest: str, with_buttons: Sequence[M], id_of: Callable[[M], object], controls: Callable[[M], Sequence[str]]
) -> tuple[M, int] | str:
    """`press N [on MESSAGE]` among the messages that have buttons (oldest first), each
    with its buttons' control ids: the message and its button's index, or what to tell
    the person instead. A plain `press N` takes the newest open question (a message with
    an ask's option), else the newest message with buttons: a draft's Stop, newer than
    the question it waits on, is pressed only when named."""
    if not with_buttons:
        return "(no message here has buttons)"
    asked = press_words(rest)
    questions = [m for m in with_buttons if any(_answers(c) for c in controls(m))]
    target = (questions or with_buttons)[-1]
    if asked is not None and asked[1] is not None:
        found = [m for m in with_buttons if str(id_of(m)) == asked[1]]
        if not found:
            return f"(message {asked[1]} has no buttons to press; the newest that has is {id_of(with_buttons[-1])})"
        target = found[0]
    n = len(controls(target))
    if asked is None or not 1 <= asked[0] <= n:
        return f"(press 1 to {n}: the buttons of message {id_of(target)}; press N on MESSAGE for another message)"
    return target, asked[0] - 1


def _answers(control: str) -> bool:
    parsed = parse_control(control)
    return parsed is not None and parsed[0] in ("a", "t")


class CallConsole(Generic[C, S, W]):
    """Prints each change of the watched chat or channel (`watched`, its id on the
    emulator `server`), as its call is answered."""

    def __init__(self, server: S, watched: W, out: TextIO) -> None:
        self.server = server
        self.watched = watched
        self.out = out
        self._seen = 0
        self.printed = 0

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
        calls: Sequence[C] = self.server.calls
        while self._seen < len(calls):
            call = calls[self._seen]
            if self.pending(call):
                return  # still being answered (a call is listed when it arrives): keep the order
            self.show(call)
            self._seen += 1

    def shown_all(self) -> bool:
        """Print what was answered since the last look; whether every call made so far
        is printed (one still being answered is not)."""
        self.catch_up()
        return self._seen >= len(self.server.calls)

    async def run(self) -> None:
        """Print calls as they are answered, until cancelled."""
        while True:
            self.catch_up()
            try:
                await self.server.wait_for(self._unseen, timeout=3600)
            except TimeoutError:
                continue

    def _unseen(self) -> bool:
        calls: Sequence[C] = self.server.calls
        return self._seen < len(calls) and not self.pending(calls[self._seen])


__all__ = ["CallConsole", "asks", "press_words", "pressed_button"]
