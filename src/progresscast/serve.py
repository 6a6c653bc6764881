"""`progresscast serve`: the gateway and web page, plus the Telegram and Slack adapters
when their tokens are configured, in one process on one event loop. Slack's slash
commands are routes of the gateway (`/slack/commands`, `/slack/events`)."""

from __future__ import annotations

import asyncio
import logging

from .config import Settings
from .connections import connect

log = logging.getLogger("progresscast")


def run_serve(settings: Settings, url: str) -> None:
    """`serve` until Ctrl-C, on uvloop when it is installed (it comes with
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

    redis = connect(url)
    jobs = []
    routes = []
    slack = settings.channels.slack
    if slack and slack.token:
        from .slack.adapter import SlackAdapter

        adapter = SlackAdapter(settings, redis)
        routes = adapter.routes()  # the slash commands arrive at the gateway
        jobs.append(adapter.run())
    else:
        log.info("no channels.slack.token: the Slack adapter is off")
    jobs.append(run_gateway(settings, redis, routes=routes))
    telegram = settings.channels.telegram
    if telegram and telegram.token:
        from .telegram.bot import run_adapter

        jobs.append(run_adapter(settings, redis))
    else:
        log.info("no channels.telegram.token: the Telegram adapter is off")
    try:
        # A TaskGroup waits for every job to finish cancelling before Redis is closed.
        async with asyncio.TaskGroup() as group:
            for job in jobs:
                group.create_task(job)
    finally:
        await redis.aclose()
