"""Who may see which session in chat: grants, pairing codes and refusals, for every
platform (docs/security.md, "Access").

A destination (Telegram chat, Slack channel, Discord channel, Matrix room) sees a
session's card only once it is **granted** that session:

- by the config: a non-empty allow list (`allowedChats`, `allowedChannels`) grants each
  listed destination every session; a destination's table grants its `sessions` globs,
  or, without `sessions`, only its own `follow` list;
- by an operator approving the destination's pairing code (`progresscast pairing
  approve`), stored in Redis (every process sees it; a restart keeps it). Approvals
  count under `access = "pairing"` (and `open`); `allowlist` takes only the config's.

What a destination without a grant gets is `channels.<platform>.access`: `pairing` (its
first command is answered with a code, and nothing else happens for the code's hour; a
platform holds at most `MAX_PENDING` codes and issues at most `NEW_PER_HOUR` an hour, so
a flood of strangers costs bounded keys and calls: past the caps they get no answer, and
the log says so once a minute), `allowlist` (a short
refusal, at most once an hour per destination, remembered in memory: strangers add no
keys) or `open` (everything, as if granted every session).
"""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, cast

from redis.asyncio import Redis

from ...config.agents import AgentSettings
from ...config.base import Access, PlatformSettings
from ...failure_log import FailureLog
from ...model.card import CardError
from ...model.owners import Owner, resolve_owner, session_matches
from ...store import keys
from ...timescale import time_scale
from ..state.ids import Id

log = logging.getLogger(__name__)

CODE_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"
"""No 0/O, 1/I/L: a code read aloud or off a phone is typed right."""
CODE_LENGTH = 8
CODE_VALID = 3600.0
"""Seconds a pairing code stays valid (and the least time between two codes for one
destination); scaled by `PROGRESSCAST_TIME_SCALE` like every other wait."""
MAX_PENDING = 100
"""Codes pending at once per platform; a stranger's command past it gets no answer. Large
enough that a handful of throwaway accounts cannot fill it."""
NEW_PER_HOUR = 60
"""New codes a platform issues per hour (a sliding hour, scaled): what a flood of
strangers costs at most, in keys and in replies. A chat holds one code at a time, so
each of them is another chat."""
REFUSAL_EVERY = 3600.0
"""`allowlist`: seconds between two refusals to one destination (scaled)."""

# Issue a code unless the destination has one pending, MAX_PENDING are pending or
# NEW_PER_HOUR were issued in the last hour. Expired codes are dropped first. Returns 1
# (issued), 0 (one pending for it), -1 (pending full), -3 (the hour's codes are issued),
# -2 (the code is taken: draw another).
_ISSUE = """
local pending_key, issued_key = KEYS[1], KEYS[2]
local code, destination, valid_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local max_pending, max_new = tonumber(ARGV[4]), tonumber(ARGV[5])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local all = redis.call('HGETALL', pending_key)
local live = 0
for i = 1, #all, 2 do
  local dest, at = string.match(all[i + 1], '^(.*) (%d+)$')
  if not at or now - tonumber(at) >= valid_ms then
    redis.call('HDEL', pending_key, all[i])
  elseif dest == destination then
    return 0
  else
    live = live + 1
  end
end
if live >= max_pending then return -1 end
redis.call('ZREMRANGEBYSCORE', issued_key, '-inf', now - valid_ms)
if redis.call('ZCARD', issued_key) >= max_new then return -3 end
if redis.call('HSETNX', pending_key, code, destination .. ' ' .. now) == 0 then return -2 end
redis.call('PEXPIRE', pending_key, valid_ms)
redis.call('ZADD', issued_key, now, code)
redis.call('PEXPIRE', issued_key, valid_ms)
return 1
"""

# Approve a pending code: it leaves the pending list, the grant is stored. Returns the
# destination, or false when the code is unknown or expired.
_APPROVE = """
local pending_key, grants_key = KEYS[1], KEYS[2]
local code, grant, valid_ms = ARGV[1], ARGV[2], tonumber(ARGV[3])
local raw = redis.call('HGET', pending_key, code)
if not raw then return false end
redis.call('HDEL', pending_key, code)
local dest, at = string.match(raw, '^(.*) (%d+)$')
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
if not at or now - tonumber(at) >= valid_ms then return false end
redis.call('HSET', grants_key, dest, grant)
return dest
"""


@dataclass(frozen=True)
class Grant:
    """The sessions one destination may see: `patterns` (session globs, `*` every
    session) and `owners` (a destination table's own `follow` list)."""

    patterns: tuple[str, ...] = ()
    owners: frozenset[Owner] = frozenset()

    def covers(self, owner: Owner) -> bool:
        return owner in self.owners or any(session_matches(p, owner) for p in self.patterns)

    def __or__(self, other: Grant) -> Grant:
        return Grant(self.patterns + other.patterns, self.owners | other.owners)

    @property
    def empty(self) -> bool:
        return not self.patterns and not self.owners


EVERYTHING = Grant(("*",))


@dataclass(frozen=True)
class Pending:
    """A pairing code waiting for an operator."""

    code: str
    destination: str
    issued: float
    """Epoch seconds (the Redis clock)."""


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def config_grant(platform: PlatformSettings, destination: Id, agents: AgentSettings) -> Grant:
    """What the config grants a destination (empty: nothing)."""
    if destination in platform.allow_list:
        return EVERYTHING
    table = platform.table_of(destination)
    if table is None:
        return Grant()
    if table.sessions is not None:
        return Grant(tuple(table.sessions))
    owners = set()
    for session in table.follow:
        try:
            owners.add(resolve_owner(session, known_agents=agents.known_set, default_agent=agents.default))
        except CardError:
            continue  # said at start-up, where config follows are subscribed
    return Grant(owners=frozenset(owners))


class AccessStore:
    """Pairing codes and approved grants of one platform, in Redis."""

    def __init__(self, redis: Redis, platform: str) -> None:
        self.redis = redis
        self.platform = platform
        self._pending = keys.access_pending(platform)
        self._issued = keys.access_issued(platform)
        self._full = FailureLog(log)
        self._grants = keys.access_grants(platform)
        self._issue = redis.register_script(_ISSUE)
        self._approve = redis.register_script(_APPROVE)

    @staticmethod
    def valid_ms() -> int:
        return max(1, int(CODE_VALID * time_scale() * 1000))

    async def issue(self, destination: Id) -> str | None:
        """A new pairing code for the destination; None when it has one pending, the
        platform has `MAX_PENDING` pending or issued `NEW_PER_HOUR` in the last hour
        (nothing is stored then)."""
        for _ in range(8):
            code = new_code()
            result = int(
                await self._issue(
                    keys=[self._pending, self._issued],
                    args=[code, str(destination), self.valid_ms(), MAX_PENDING, NEW_PER_HOUR],
                )
            )
            if result == 1:
                return code
            if result in (-1, -3):
                # The operator learns why strangers go unanswered, once a minute at most.
                cap = f"{MAX_PENDING} codes pending" if result == -1 else f"{NEW_PER_HOUR} codes issued this hour"
                self._full.warning(
                    f"pairing full {self.platform}",
                    "%s pairing: %s; unknown chats get no answer until codes expire or "
                    "`progresscast pairing clear %s --all`",
                    self.platform, cap, self.platform,
                )
            if result != -2:
                return None
        return None

    async def pending(self) -> list[Pending]:
        """Codes still valid, oldest first."""
        raw = cast("dict[str, str]", await self.redis.hgetall(self._pending))
        seconds, micro = await self.redis.time()
        now = seconds + micro / 1e6
        out = []
        for code, value in raw.items():
            destination, _, at = value.rpartition(" ")
            if not at.isdigit() or now - int(at) / 1000 >= self.valid_ms() / 1000:
                continue
            out.append(Pending(code, destination, int(at) / 1000))
        return sorted(out, key=lambda p: p.issued)

    async def clear(self, code: str) -> str | None:
        """Drop one pending code (it can no longer be approved); its destination, or None
        when the code was not pending. It still counts toward the hour's new codes."""
        found = next((p for p in await self.pending() if p.code == code.strip().upper()), None)
        if found is None:
            return None
        await self.redis.hdel(self._pending, found.code)
        return found.destination

    async def clear_all(self) -> int:
        """Drop every pending code and the hour's count of new codes (after a flood, the
        next stranger gets a code at once); how many codes were pending."""
        count = len(await self.pending())
        await self.redis.delete(self._pending, self._issued)
        return count

    async def approve(self, code: str, sessions: list[str]) -> str | None:
        """Approve a pending code with these session globs; the destination, or None when
        the code is unknown or expired."""
        seconds, _ = await self.redis.time()
        grant = json.dumps({"sessions": sessions, "at": int(seconds) * 1000, "code": code})
        found = await self._approve(
            keys=[self._pending, self._grants], args=[code.strip().upper(), grant, self.valid_ms()]
        )
        return None if found is None else str(found)

    async def grant(self, destination: Id) -> Grant | None:
        raw = cast("str | None", await self.redis.hget(self._grants, str(destination)))
        return None if raw is None else _grant_of(raw)

    async def grants(self) -> dict[str, Grant]:
        raw = cast("dict[str, str]", await self.redis.hgetall(self._grants))
        return {dest: _grant_of(value) for dest, value in raw.items()}

    async def revoke(self, destination: Id) -> bool:
        """Forget the destination's approved grant; False when it had none."""
        return bool(await self.redis.hdel(self._grants, str(destination)))


def _grant_of(raw: str) -> Grant:
    try:
        data: Any = json.loads(raw)
        sessions = data.get("sessions") if isinstance(data, dict) else None
    except ValueError:
        sessions = None
    if not isinstance(sessions, list):
        return Grant()
    return Grant(tuple(str(s) for s in sessions))


@dataclass
class Verdict:
    """What a destination may do now: its grant (None: it has none), or what to answer."""

    grant: Grant | None
    code: str | None = None
    """`pairing`: the code just issued for it (None: say nothing)."""
    refuse: bool = False
    """`allowlist`: send the short refusal (at most once an hour)."""


@dataclass
class AccessPolicy:
    """The access rules of one platform, for its commands and its drafts."""

    platform: str
    settings: PlatformSettings
    agents: AgentSettings
    store: AccessStore
    setting: str = ""
    """Where the platform is configured, for messages (`channels.telegram.bots[0]`);
    default `channels.<platform>`."""
    clock: Any = time.monotonic
    remember: int = 10_000
    """Destinations whose last refusal is remembered (the oldest are forgotten)."""
    _refused_at: OrderedDict[Id, float] = field(default_factory=OrderedDict)

    def __post_init__(self) -> None:
        if not self.setting:
            self.setting = f"channels.{self.platform}"

    @property
    def mode(self) -> Access:
        return self.settings.access_mode

    async def grant_of(self, destination: Id) -> Grant | None:
        """Everything the destination is granted (None: nothing at all)."""
        if self.mode is Access.open:
            return EVERYTHING
        grant = config_grant(self.settings, destination, self.agents)
        if self.mode is Access.pairing:
            stored = await self.store.grant(destination)
            if stored is not None:
                grant = grant | stored
        return None if grant.empty else grant

    async def verdict(self, destination: Id) -> Verdict:
        """The destination's grant, or what a destination without one is answered: a
        pairing code once, or an `allowlist` refusal at most once an hour."""
        grant = await self.grant_of(destination)
        if grant is not None:
            return Verdict(grant)
        if self.mode is Access.pairing:
            return Verdict(None, code=await self.store.issue(destination))
        return Verdict(None, refuse=self._may_refuse(destination))

    def _may_refuse(self, destination: Id) -> bool:
        # Memory only (strangers add no keys): each process refuses a destination at most
        # once an hour; the set of destinations remembered is bounded.
        now = self.clock()
        last = self._refused_at.get(destination)
        if last is not None and now - last < REFUSAL_EVERY * time_scale():
            return False
        self._refused_at[destination] = now
        self._refused_at.move_to_end(destination)
        while len(self._refused_at) > self.remember:
            self._refused_at.popitem(last=False)
        return True

    def announce(self, log: logging.Logger) -> None:
        """Say at start what strangers get (`open`: a warning, every start)."""
        where = f"{self.setting}.access"
        if self.mode is Access.open:
            log.warning("%s = \"open\": any %s chat may follow any session", where, self.platform)
        elif self.settings.access is None and self.mode is Access.pairing:
            log.info(
                "%s is not set: a chat the config does not grant sessions gets a pairing code, and sees nothing "
                "until `progresscast pairing approve %s CODE` (set %s = \"open\" for the old behaviour)",
                where, self.platform, where,
            )
        else:
            log.info("%s: %s", where, self.mode.value)

    def drafts_allowed(self, destination: Id) -> bool:
        """May the destination get drafts? Under `allowlist` only what the config grants
        (a destination taken out of the allow list gets nothing more); otherwise every
        destination that follows (a follow is made only under a grant; a revoked grant
        ends the follows)."""
        if self.mode is not Access.allowlist:
            return True
        if destination in self.settings.allow_list:
            return True
        table = self.settings.table_of(destination)
        return table is not None and bool(table.follow if table.sessions is None else table.sessions)


__all__ = [
    "CODE_ALPHABET",
    "CODE_LENGTH",
    "CODE_VALID",
    "EVERYTHING",
    "MAX_PENDING",
    "NEW_PER_HOUR",
    "REFUSAL_EVERY",
    "AccessPolicy",
    "AccessStore",
    "Grant",
    "Pending",
    "Verdict",
    "config_grant",
    "new_code",
]
