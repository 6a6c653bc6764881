"""`progresscast serve`: the gateway and web page, plus the Telegram, Slack, Discord and
Matrix adapters when their tokens are configured (for each bot, in the one process holding its lease;
the others stand by) and the A2A followers of `[[a2a.agents]]`, in one
process on one event loop. Slack's slash commands are routes of the gateway
(`/slack/commands`, `/slack/events`), and so are Discord's interactions
(`/discord/interactions`) and a Telegram webhook (`/telegram/…`).

With `serve.processes = "split"` the Telegram and Matrix adapters run in a child process
of their own (children.py), which this `serve` starts, restarts and stops with itself:
the gateway's writes then use one core and the adapters another.

Start-up mistakes (an unset `env:` secret, a port in use, a refused bot token) are a
ConfigError: one line, exit status 2. Every other failure of a part is its own: each
part runs supervised (supervise.py) and starts again after a backoff while the others
keep going — nothing stops `serve` but a signal. SIGTERM (systemd, `docker stop`) shuts down the
same way Ctrl-C does. On the embedded Redis, `serve` owns the server it depends on: if
its process is gone, it is started again from its append-only file (one that lives
but does not answer is waited for: never two servers on one home).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import pickle
import resource
import signal
import socket
import sys
from enum import StrEnum
from functools import partial
from pathlib import Path

from redis.asyncio import Redis

from . import collector
from .children import MISTAKE_STATUS, die_with_parent, run_child, watch_parent
from .config.errors import ConfigError
from .config.settings import Settings
from .failure_log import FailureLog
from .stopping import still_wanted, stop_on_sigterm
from .store.connections import Role, connect
from .store.embedded import (
    DescriptorShortage,
    EmbeddedRedisError,
    Health,
    embedded_health,
    embedded_home,
    ensure_embedded,
)
from .supervise import Job, supervise

log = logging.getLogger("progresscast")

EMBEDDED_CHECK_SECONDS = 1.0
"""How often `serve` checks that the embedded Redis answers."""
ADAPTERS_PROCESS = "the adapters' process"
CHILD_COMMAND = "from progresscast.serve import run_adapters_process; run_adapters_process()"
"""What the adapters' process runs (`python -c`): it reads (settings, url) from stdin."""


class Part(StrEnum):
    """What one `serve` process runs."""

    every = "every"
    """All of it: `serve.processes = "one"`, or the parent of a split one, which runs
    the gateway's parts itself and the adapters' process as one of its jobs."""
    adapters = "adapters"
    """The Telegram and Matrix adapters: the child of a split `serve`."""


def run_serve(settings: Settings, url: str, part: Part = Part.every, *, parent: int | None = None) -> None:
    """`serve` until Ctrl-C or SIGTERM, on uvloop when it is installed (it comes with
    `uvicorn[standard]`): its C event loop costs less per request and per socket call."""
    from .store.serving import announced

    main = serve(settings, url, part, parent=parent)
    # The whole `serve` (not its adapters' child) says which store it serves: see store/serving.py.
    with announced(url, settings._source) if part is Part.every else contextlib.nullcontext():
        try:
            import uvloop
        except ImportError:
            asyncio.run(main)
            return
        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            runner.run(main)


def run_adapters_process() -> None:
    """The adapters' process of a split `serve` (see children.py). Ctrl-C reaches the
    whole process group: the child leaves it to the parent, which stops it with SIGTERM."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = die_with_parent()
    given = sys.stdin.buffer.read()
    if not given:
        return  # the parent died before it handed anything over
    settings, url = pickle.loads(given)
    try:
        run_serve(settings, url, Part.adapters, parent=parent)
    except ConfigError as exc:
        print(f"progresscast: {exc}", file=sys.stderr)
        raise SystemExit(MISTAKE_STATUS) from None


async def serve(settings: Settings, url: str, part: Part = Part.every, *, parent: int | None = None) -> None:
    """`parent`: the pid of the split `serve` that started this adapters' process."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    settings.require_env()
    raise_descriptor_limit()
    if part is Part.adapters:
        redis = connect(url, settings)
        watch: list[tuple[str, Job]] = []
        if parent is not None:
            watch.append(("the watch on the parent process", partial(watch_parent, parent)))
        await _run([*_adapter_jobs(settings, redis), *watch], redis)
        return
    from .gateway import run_gateway
    from .http.auth import check_token_strength
    from .http.server import bind

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
    if settings.serve.processes == "split":
        given = pickle.dumps((settings, url))
        argv = [sys.executable, "-c", CHILD_COMMAND]
        jobs.append((ADAPTERS_PROCESS, partial(run_child, ADAPTERS_PROCESS, argv, given)))
    else:
        jobs += _adapter_jobs(settings, redis)
    if settings.a2a.agents:
        from .agents.a2a.watch import follow_agents

        jobs.append(("the A2A followers", partial(follow_agents, settings, redis)))
    from .store.retention import keep_sweeping

    jobs.append(("the retention sweep", partial(keep_sweeping, redis)))
    home = embedded_home(url)
    if home is not None:
        jobs.append(("the embedded Redis watch", partial(keep_embedded, home)))
    try:
        await _run(jobs, redis)
    finally:
        await readers.aclose()


def _adapter_jobs(settings: Settings, redis: Redis) -> list[tuple[str, Job]]:
    """The Telegram bots and the Matrix adapter, when configured."""
    from .telegram.standby import bots, run_bots

    jobs: list[tuple[str, Job]] = []
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
    return jobs


async def _run(jobs: list[tuple[str, Job]], redis: Redis) -> None:
    """Every job supervised until a signal; then Redis is closed."""
    stopping = stop_on_sigterm(log)
    collector.settle()  # start-up is over: the collector walks less from now on
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
        await redis.aclose()
        log.info("stopped")


def _first(group: BaseExceptionGroup[BaseException], kind: type[ConfigError]) -> ConfigError | None:
    for exc in group.exceptions:
        if isinstance(exc, kind):
            return exc
        if isinstance(exc, BaseExceptionGroup):
            found = _first(exc, kind)
            if found is not None:
                return found
    return None


_shortage = FailureLog(log)


def raise_descriptor_limit() -> None:
    """Raise the soft limit of open descriptors to the hard one: each connection is one,
    and the usual soft default (1,024) is less than a busy gateway's share."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ValueError, OSError) as exc:
            log.warning("could not raise the open-descriptor limit from %d: %s", soft, exc)


async def keep_embedded(home: Path, every: float = EMBEDDED_CHECK_SECONDS) -> None:
    """Start the embedded Redis of `home` again once its process is gone (killed,
    crashed); clients reconnect by themselves, on the same socket. One whose process
    lives but does not answer (stopped, swapped out, loading a long append-only file) is
    waited for, however long: a second server on the same file would number revisions
    on its own and lose what the first acknowledged."""
    waiting = False
    while True:
        await still_wanted()
        await asyncio.sleep(every)
        try:
            health = await asyncio.to_thread(embedded_health, home)
        except DescriptorShortage:
            # The probe could not even open its socket: that says nothing of Redis, and
            # a second server on the same append-only file would be far worse than waiting.
            _shortage.warning("descriptors", "no descriptor left to check the embedded Redis; checking again shortly")
            continue
        if health is not Health.gone:
            if health is Health.waiting and not waiting:
                log.warning("the embedded Redis under %s is not answering, but its process lives (stopped, or "
                            "loading its append-only file); waiting for it", home)
            elif health is Health.answering and waiting:
                log.warning("the embedded Redis is answering again")
            waiting = health is Health.waiting
            continue
        waiting = False
        log.warning("the embedded Redis under %s has stopped (its process is gone); restarting it from its "
                    "append-only file", home)
        try:
            await asyncio.to_thread(ensure_embedded, home)
        except EmbeddedRedisError as exc:
            log.error("restarting the embedded Redis failed: %s", exc)
            continue
        log.warning("the embedded Redis is running again")
