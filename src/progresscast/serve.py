"""`progresscast serve`: the gateway and web page, plus the Telegram, Slack, Discord and
Matrix adapters when their tokens are configured (for each bot, in the one process holding its lease;
the others stand by) and the A2A followers of `[[a2a.agents]]`, in one
process on one event loop. Slack's slash commands are routes of the gateway
(`/slack/commands`, `/slack/events`), and so are Discord's interactions
(`/discord/interactions`) and a Telegram webhook (`/telegram/…`).

Start-up mistakes (an unset `env:` secret, a port in use, a refused bot token) are a
ConfigError: one line, exit status 2. Every other failure of a part is its own: each
part runs supervised (supervise.py) and starts again after a backoff while the others
keep going — nothing stops `serve` but a signal. SIGTERM (systemd, `docker stop`) shuts down the
same way Ctrl-C does. On the embedded Redis, `serve` owns the server it depends on: if
it stops answering, it is started again from its append-only file.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import socket
from functools import partial
from pathlib import Path

from .config.errors import ConfigError
from .config.settings import Settings
from .stopping import still_wanted
from .store.connections import Role, connect
from .store.embedded import EmbeddedRedisError, embedded_home, ensure_embedded, is_running
from .supervise import Job, supervise

log = logging.getLogger("progresscast")

EMBEDDED_CHECK_SECONDS = 1.0
"""How often `serve` checks that the embedded Redis answers."""


def run_serve(settings: Settings, url: str) -> None:
    """`serve` until Ctrl-C or SIGTERM, on uvloop when it is installed (it comes with
    `uvicorn[standard]`): its C event loop costs less per request and per socket call."""
    try:
        import uvloop
    except ImportError:
        asyncio.run(serve(settings, url))
        return
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(serve(settings, url))


async def serve(settings: Settings, url: str) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    from .gateway import run_gateway
    from .gateway.auth import check_token_strength
    from .gateway.server import bind

    settings.require_env()
    listen = settings.gateway.listen
    for warning in check_token_strength(settings, listen):
        log.warning("%s", warning)
    try:
        sock = bind(listen)
    except OSError as exc:
        raise ConfigError(
            f"gateway.listen: cannot listen on {listen} ({exc.strerror}); "
            "stop what uses that port, or set [gateway] listen to a free host:port"
        ) from None
    redis = connect(url, settings)
    readers = connect(url, settings, role=Role.readers)
    jobs: list[tuple[str, Job]] = []
    routes = []
    slack = settings.channels.slack
    if slack and slack.token:
        from .slack.adapter import SlackAdapter

        adapter = SlackAdapter(settings, redis)
        routes = adapter.routes()  # the slash commands arrive at the gateway
        jobs.append(("the Slack adapter", adapter.run))
    else:
        log.info("no channels.slack.token: the Slack adapter is off")
    discord = settings.channels.discord
    if discord and discord.token:
        from .discord.adapter import DiscordAdapter

        discord_adapter = DiscordAdapter(settings, redis)
        routes = [*routes, *discord_adapter.routes()]  # the interactions arrive at the gateway
        jobs.append(("the Discord adapter", discord_adapter.run))
    else:
        log.info("no channels.discord.token: the Discord adapter is off")
    bound: list[socket.socket] = [sock]

    async def gateway() -> None:
        # Bound above, so that a port in use is a start-up mistake; bound again for a
        # run after a failure (the last one closed its socket).
        listening = bound.pop() if bound else bind(listen)
        await run_gateway(settings, redis, readers=readers, sock=listening, routes=routes)

    jobs.append(("the gateway", gateway))
    from .telegram.standby import bots, run_bots

    telegram = settings.channels.telegram
    if bots(settings):
        # One adapter per bot whose lease this process holds; standing by for the others.
        jobs.append(("the Telegram bots", partial(run_bots, settings, redis)))
    elif telegram and telegram.webhook:
        log.info(
            "no channels.telegram.token: the Telegram adapter is off; webhook updates posted to %s here "
            "are handed to the process that runs it",
            telegram.webhook.path,
        )
    else:
        log.info("no channels.telegram.token: the Telegram adapter is off")
    matrix = settings.channels.matrix
    if matrix and matrix.accessToken:
        from .matrix.adapter import run_matrix

        # One /sync reader and editor per account: the lease holder; others stand by.
        jobs.append(("the Matrix adapter", partial(run_matrix, settings, redis)))
    else:
        log.info("no channels.matrix.accessToken: the Matrix adapter is off")
    if settings.a2a.agents:
        from .agents.a2a.watch import follow_agents

        jobs.append(("the A2A followers", partial(follow_agents, settings, redis)))
    from .store.retention import keep_sweeping

    jobs.append(("the retention sweep", partial(keep_sweeping, redis)))
    home = embedded_home(url)
    if home is not None:
        jobs.append(("the embedded Redis watch", partial(keep_embedded, home)))
    stopping = _stop_on_sigterm()
    try:
        # A TaskGroup waits for every job to finish cancelling before Redis is closed.
        async with asyncio.TaskGroup() as group:
            for what, job in jobs:
                group.create_task(supervise(job, what), name=what)
    except BaseExceptionGroup as failed:
        mistake = _first(failed, ConfigError)
        if mistake is not None:
            raise mistake from None
        raise
    except asyncio.CancelledError:
        if not stopping.is_set():
            raise  # Ctrl-C: asyncio.run turns this into KeyboardInterrupt
    finally:
        await readers.aclose()
        await redis.aclose()
        log.info("stopped")


def _stop_on_sigterm() -> asyncio.Event:
    """SIGTERM cancels `serve` as Ctrl-C does; the event tells the two apart."""
    stopping = asyncio.Event()
    task = asyncio.current_task()
    loop = asyncio.get_running_loop()

    def stop() -> None:
        log.info("SIGTERM: shutting down")
        stopping.set()
        if task is not None:
            task.cancel()

    loop.add_signal_handler(signal.SIGTERM, stop)
    return stopping


def _first(group: BaseExceptionGroup[BaseException], kind: type[ConfigError]) -> ConfigError | None:
    for exc in group.exceptions:
        if isinstance(exc, kind):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first(exc, kind)
            if found is not None:
                return found
    return None


async def keep_embedded(home: Path, every: float = EMBEDDED_CHECK_SECONDS) -> None:
    """Restart the embedded Redis of `home` whenever it stops answering (killed, crashed).
    Clients reconnect by themselves: the server comes back on the same socket."""
    while True:
        still_wanted()
        await asyncio.sleep(every)
        if await asyncio.to_thread(is_running, home):
            continue
        log.warning("the embedded Redis under %s is not answering; restarting it from its append-only file", home)
        try:
            await asyncio.to_thread(ensure_embedded, home)
        except EmbeddedRedisError as exc:
            log.error("restarting the embedded Redis failed: %s", exc)
            continue
        log.warning("the embedded Redis is running again")
