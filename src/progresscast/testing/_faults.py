"""Injected failures of the emulated Bot API: one-off faults a test names, and a random
fault mode that fails a fraction of calls the way Telegram fails. (`take_fault`, using
up the first named fault that matches a call, serves the Slack and Discord emulators too.)

Every fault answers exactly as the real service does — the status, the `description`
Telegram words it with, `parameters.retry_after` for a 429 — so the client under test
cannot tell an injected failure from a real one:

- 5xx: `500 Internal Server Error` or `502 Bad Gateway`; nothing is applied.
- a timeout: the answer is held past the client's read timeout; whether the call was
  applied is drawn at random, since a real timeout can be either (the request reached
  Telegram and the answer was lost, or it never got through).
- 429 `Too Many Requests: retry after N` with `parameters.retry_after` N: nothing is
  applied, and — as on Telegram — the refused call does not count against the chat's
  flood limit.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypedDict, TypeVar

DEFAULT_DESCRIPTIONS = {
    400: "Bad Request: injected failure",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    409: "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


def description_of(status: int, retry_after: int | None = None) -> str:
    """What Telegram says with `status`."""
    if status == 429:
        return f"Too Many Requests: retry after {retry_after}"
    return DEFAULT_DESCRIPTIONS.get(status, f"Error {status}")


class _Counted(Protocol):
    remaining: int
    """How many more calls the fault answers."""


F = TypeVar("F", bound=_Counted)


def take_fault(faults: list[F], matches: Callable[[F], bool]) -> F | None:
    """The first fault that matches a call, with one use taken (gone after its last)."""
    for fault in faults:
        if matches(fault):
            fault.remaining -= 1
            if fault.remaining <= 0:
                faults.remove(fault)
            return fault
    return None


@dataclass
class Fault:
    """One injected answer: an error, or (with `delay`) a timeout."""

    method: str
    chat_id: int | None
    remaining: int
    status: int = 500
    description: str = ""
    parameters: dict[str, Any] | None = None
    delay: float | None = None
    """Set for a timeout: hold the answer this long."""
    apply: bool = True
    """For a timeout: whether the call still takes effect."""
    land_after: float = 0.0
    """For a timeout that applies: seconds after the request arrived when it takes effect."""
    paced: bool = False
    """For a timeout that applies: whether the call counts against the flood limits (and
    is dropped when over them, an answer the client never hears)."""
    kind: str = "error"
    """What the random mode drew: "5xx", "timeout" or "429" ("error" for a named fault)."""

    def matches(self, method: str, chat_id: int | None) -> bool:
        return self.method == method.lower() and (self.chat_id is None or self.chat_id == chat_id)


@dataclass(frozen=True)
class FaultMix:
    """Relative weights of the kinds of failure the random mode draws."""

    server_error: float = 1.0
    """500 Internal Server Error / 502 Bad Gateway, in equal parts."""
    timeout: float = 1.0
    flood: float = 1.0
    """429 with retry_after."""

    def __post_init__(self) -> None:
        weights = (self.server_error, self.timeout, self.flood)
        if min(weights) < 0 or sum(weights) <= 0:
            raise ValueError("fault mix weights must be >= 0 and not all 0")


CHAT_METHODS = frozenset({"sendMessage", "editMessageText", "deleteMessage", "deleteMessages", "sendRichMessage"})
"""What the random mode fails unless told otherwise: the calls that act on a chat."""


@dataclass
class RandomFaults:
    """Fails `rate` of the calls to `methods` (any names, any case; default: those that
    act on a chat) with `mix`, drawn from a generator seeded with `seed`.

    `applied` is the chance that a timed-out call still took effect; a 429's
    `retry_after` is drawn from 1 to `max_retry_after` (Telegram's seconds, on the
    emulator's time scale like its flood limits); `hold` is how long a timeout holds
    the answer (None: the emulator's `timeout_delay`). `drawn` counts what was injected,
    by kind ("5xx", "timeout applied", "timeout dropped", "429").
    """

    rate: float
    seed: int = 0
    methods: Iterable[str] = CHAT_METHODS
    mix: FaultMix = field(default_factory=FaultMix)
    applied: float = 0.5
    max_retry_after: int = 3
    hold: float | None = None
    drawn: Counter[str] = field(default_factory=Counter, init=False)

    def __post_init__(self) -> None:
        self.methods = frozenset(self.methods)
        if not 0 <= self.rate <= 1:
            raise ValueError(f"fault rate must be between 0 and 1, not {self.rate}")
        if not 0 <= self.applied <= 1:
            raise ValueError(f"the chance a timed-out call applies must be between 0 and 1, not {self.applied}")
        if self.max_retry_after < 1:
            raise ValueError("max_retry_after must be at least 1")
        self._random = random.Random(self.seed)
        self._lower = frozenset(m.lower() for m in self.methods)

    def draw(self, method: str, chat_id: int | None, timeout_delay: float) -> Fault | None:
        """The fault to answer this call with, or None to serve it."""
        r = self._random
        if method.lower() not in self._lower or r.random() >= self.rate:
            return None
        mix = self.mix
        pick = r.uniform(0, mix.server_error + mix.timeout + mix.flood)
        if pick < mix.server_error:
            status = r.choice((500, 502))
            self.drawn["5xx"] += 1
            return Fault(method, chat_id, 1, status, description_of(status), kind="5xx")
        if pick < mix.server_error + mix.timeout:
            apply = r.random() < self.applied
            self.drawn["timeout applied" if apply else "timeout dropped"] += 1
            hold = timeout_delay if self.hold is None else self.hold
            return Fault(method, chat_id, 1, delay=hold, apply=apply, paced=True, kind="timeout")
        retry_after = r.randint(1, self.max_retry_after)
        self.drawn["429"] += 1
        return Fault(
            method, chat_id, 1, 429, description_of(429, retry_after), {"retry_after": retry_after}, kind="429"
        )


class FaultSettings(TypedDict, total=False):
    """The settings of `RandomFaults` besides its rate, as keywords for whoever starts one
    (`BotAPIEmulator.fail_randomly`): their defaults and meaning are RandomFaults's."""

    seed: int
    methods: Iterable[str]
    mix: FaultMix
    applied: float
    max_retry_after: int
    hold: float | None


__all__ = [
    "CHAT_METHODS", "DEFAULT_DESCRIPTIONS", "Fault", "FaultMix", "FaultSettings", "RandomFaults", "description_of",
]
