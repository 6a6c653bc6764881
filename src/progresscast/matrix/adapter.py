"""The Matrix adapter: the draft worker on the change stream and the /sync reader of
commands, for one bot account, in whichever process holds the account's lease.

    await run_matrix(settings, redis)      # stand by / hold the lease, until cancelled

`whoami` first (retried while the homeserver is unreachable; an access token it
refuses, or one of another user than `userId`, stops `serve` with one line), then the
worker: `[[channels.matrix.rooms]]` follows are subscribed, every follow is looked at
once (a restart or a takeover catches up), and then every change event; meanwhile
`/sync` brings invites and `!pc` commands. State lives in Redis, so a restarted
adapter keeps editing the same drafts.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from nio import AsyncClient, AsyncClientConfig, WhoamiResponse
from redis.asyncio import Redis

from ..backoff import Backoff, retrying
from ..channels.chat.commands import ChatCommands
from ..channels.standby import while_held
from ..channels.worker import ChannelWorker, WorkerOptions
from ..config.errors import ConfigError
from ..config.matrix import MatrixSettings
from ..config.settings import Settings
from ..store import keys
from ..store.lease import Fence, Lease
from .channel import MatrixChannel, MatrixPace
from .client import MatrixClient, unfenced
from .sync import POLL_MS, SURFACE, FailedResponse, MatrixSync

log = logging.getLogger("progresscast.matrix")

STANDBY_POLL = 1.0


@dataclass(frozen=True)
class MatrixOptions:
    worker: WorkerOptions = field(default_factory=lambda: WorkerOptions(group="matrix"))
    request_timeout: float = 45.0
    """Seconds a request may take (a /sync: on top of its wait): past it, a send is unsure."""
    poll_ms: int = POLL_MS
    backoff: Backoff = field(default_factory=Backoff)


def _settings(settings: Settings) -> MatrixSettings:
    matrix = settings.channels.matrix
    if matrix is None or not matrix.accessToken or not matrix.homeserver or not matrix.userId:
        raise ValueError("channels.matrix needs homeserver, userId and accessToken")
    return matrix


class MatrixAdapter:
    def __init__(
        self, settings: Settings, redis: Redis, *, options: MatrixOptions | None = None, fence: Fence | None = None
    ) -> None:
        matrix = _settings(settings)
        assert matrix.homeserver and matrix.userId and matrix.accessToken
        self.options = options or MatrixOptions()
        self.user_id = matrix.userId
        # matrix-nio logs each event of every room it syncs at INFO: a line per message.
        nio_log = logging.getLogger("nio")
        if nio_log.level == logging.NOTSET:
            nio_log.setLevel(logging.WARNING)
        config = AsyncClientConfig(
            max_limit_exceeded=0, max_timeouts=0, request_timeout=self.options.request_timeout,
            encryption_enabled=False, store_sync_tokens=False,
        )
        self.nio = AsyncClient(matrix.homeserver, matrix.userId, config=config)
        self.nio.access_token = matrix.accessToken
        self.nio.user_id = matrix.userId
        check = fence.check if fence is not None else unfenced
        self.fence = fence
        self.client = MatrixClient(self.nio, redis, matrix.userId, check=check)
        pace = MatrixPace(destination_interval=matrix.roomInterval, bot_rate=matrix.callsPerSecond)
        self.channel = MatrixChannel(settings, redis, self.client, pace, fence=fence)
        self.worker = ChannelWorker(self.channel, redis, options=self.options.worker, log=log)
        self.commands = ChatCommands(self.worker, SURFACE)
        self.worker.presses.noun = SURFACE.noun  # "Only this room's administrators …"
        self.sync = MatrixSync(
            self.nio, redis, self.channel, self.worker, self.commands, matrix.userId, check=check,
            poll_ms=self.options.poll_ms, backoff=self.options.backoff,
        )
        self.started = asyncio.Event()

    async def _identify(self) -> None:
        """whoami: the token works and is the configured user's; retried while unreachable."""

        async def attempt() -> None:
            reply = await self.nio.whoami()
            if isinstance(reply, WhoamiResponse):
                if reply.user_id != self.user_id:
                    raise ConfigError(
                        f"channels.matrix.accessToken: the homeserver says it is {reply.user_id}'s, "
                        f"not {self.user_id}'s (channels.matrix.userId)"
                    )
                return
            code = getattr(reply, "status_code", None)
            if code in ("M_UNKNOWN_TOKEN", "M_MISSING_TOKEN", "M_FORBIDDEN"):
                raise ConfigError(f"channels.matrix.accessToken: the homeserver says {code} ({reply.message})")
            raise FailedResponse(reply)

        await retrying(
            attempt, "cannot reach the homeserver", log=log, backoff=self.options.backoff, give_up=(ConfigError,)
        )

    async def run(self) -> None:
        """Run until cancelled."""
        try:
            await self._identify()
            if self.fence is not None:
                # The previous holder may have sent a moment ago.
                self.worker.pacer.as_if_all_called()
            await self.worker.start()
            self.started.set()
            log.info("Matrix adapter running as %s", self.user_id)
            await self.sync.run()
        finally:
            await self.worker.close()
            await self.nio.close()


async def run_matrix(settings: Settings, redis: Redis, *, options: MatrixOptions | None = None) -> None:
    """Act for the bot account whenever this process holds its lease; stand by otherwise."""
    matrix = _settings(settings)
    assert matrix.userId
    lease = Lease(redis, keys.mx_lease(matrix.userId), keys.mx_fence(matrix.userId), matrix.leaseSeconds)

    async def job(fence: Fence) -> None:
        await MatrixAdapter(settings, redis, options=options, fence=fence).run()

    poll = min(STANDBY_POLL, matrix.leaseSeconds / 4)
    await while_held(lease, job, name=f"matrix {matrix.userId}", label=matrix.userId, poll=poll, log=log)


__all__ = ["MatrixAdapter", "MatrixOptions", "run_matrix"]
