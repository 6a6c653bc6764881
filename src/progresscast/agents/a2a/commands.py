"""`progresscast a2a ingest|follow`: the command family's arguments and its runs.

`cli/parser.py` only registers this family (`add_commands`) and dispatches to `run`.
Every command's parser is built from this module, so what only a run needs (the
store, the A2A mapping, the metrics) is imported by the run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import TYPE_CHECKING, Any

from ...arguments import read_input

if TYPE_CHECKING:  # the a2a-sdk client is imported only when following
    from a2a.types import a2a_pb2

    from ...config.settings import Settings
    from .apply import Applied, UpdateApplier
    from .follow import Follower
    from .mapping import Update


class CommandError(Exception):
    """Bad input on the command line or in a file (exit 2)."""


def _example(*lines: str) -> str:
    return "example:\n" + "\n".join(f"  {line}" for line in lines)


def add_commands(commands: Any, common: argparse.ArgumentParser, parser_class: type) -> None:
    a2a = commands.add_parser(
        "a2a", help="follow A2A agents (progress/v1)", parents=[common],
        description="Show A2A agents' plans, status and answers as progress cards (see docs/a2a.md).",
        epilog=_example("progresscast a2a follow http://127.0.0.1:9999 --send 'Fix ticket 4821'"),
    )
    sub = a2a.add_subparsers(dest="a2a_command", required=True, parser_class=parser_class)
    ingest = sub.add_parser(
        "ingest", help="apply JSON lines of A2A updates", parents=[common],
        description="Apply JSON lines of A2A updates in timestamp order; prints what was applied and ignored.",
        epilog=_example("progresscast a2a ingest events.jsonl --agent research"),
    )
    ingest.add_argument("file", metavar="FILE|-", help="JSON lines of StreamResponse / Task / TaskStatusUpdateEvent")
    ingest.add_argument("--agent", metavar="ID", help="the cards' agent id (default: the default agent)")
    follow = sub.add_parser(
        "follow", help="follow an A2A agent's task live", parents=[common],
        description="Follow an A2A agent with the a2a-sdk client until the task ends (--context: until Ctrl-C).",
        epilog=_example("progresscast a2a follow http://127.0.0.1:9999 --task 6f0c1d2e --agent research"),
    )
    follow.add_argument(
        "url", metavar="AGENT_URL", help="the agent's base URL (its card is at /.well-known/agent-card.json)"
    )
    what = follow.add_mutually_exclusive_group(required=True)
    what.add_argument("--task", metavar="ID", help="subscribe to a running task")
    what.add_argument("--context", metavar="ID", help="follow every task of a context (until interrupted)")
    what.add_argument("--send", metavar="TEXT", help="start a task with this message and follow it")
    follow.add_argument("--agent", metavar="ID", help="the cards' agent id (default: the default agent)")
    follow.add_argument(
        "--push", metavar="URL", help="have the agent push updates to this URL (the gateway's /v1/a2a/push)"
    )
    follow.add_argument("--push-token", metavar="T", help="the token the agent sends with each push")
    follow.add_argument("--quiet", action="store_true", help="no progress line per applied update")


def run(args: argparse.Namespace, settings: Settings) -> None:
    if getattr(args, "push", None) and not args.push_token:
        raise CommandError("--push needs --push-token (a gateway token with operator.write)")
    if getattr(args, "push_token", None) and not args.push:
        raise CommandError("--push-token needs --push URL")
    if getattr(args, "push", None) and args.context:
        raise CommandError("--push works with --task or --send, not --context")
    agent = args.agent
    if agent is not None and agent not in settings.agents.known_set:
        raise CommandError(f"--agent: '{agent}' is not a configured agent")
    if args.a2a_command == "ingest":
        from .ingest import ingest_lines

        text = read_input(args.file, MAX_INGESTED_BYTES)
        tally = asyncio.run(_with_applier(args, settings, lambda a: ingest_lines(text.splitlines(), a)))
        print(tally.summary())
        return
    from .follow import AgentUnavailable

    try:
        asyncio.run(_with_applier(args, settings, lambda a: _follow(args, settings, a)))
    except AgentUnavailable as exc:
        print(f"progresscast: {exc}", file=sys.stderr)
        raise SystemExit(1) from None


MAX_INGESTED_BYTES = 64 << 20
"""What `a2a ingest` reads of a file or stdin: a long task's whole log of updates."""


async def _with_applier(args: argparse.Namespace, settings: Settings, work: Any) -> Any:
    from ...store.connections import connect, redis_url
    from .apply import UpdateApplier

    redis = connect(redis_url(args.redis, settings))
    try:
        applier = UpdateApplier.configured(redis, args.agent, settings)
        return await work(applier)
    finally:
        await redis.aclose()


def progress_line(update: Update, applied: Applied) -> str | None:
    """What `a2a follow` prints on stderr for an applied update (None: nothing)."""
    from .apply import Outcome
    from .mapping import AnswerChunk, StatusChange

    if applied.outcome is not Outcome.applied:
        return None
    where = applied.owner.display_key
    if isinstance(update, AnswerChunk):
        return f"{where}: answer +{len(update.text)} characters"
    assert isinstance(update, StatusChange)
    state = update.state.value.removeprefix("TASK_STATE_").lower().replace("_", "-")
    line = f"{where}: task {update.task_id} {state}"
    if update.plan is not None:
        done = sum(step.done for step in update.plan)
        line += f", plan {done}/{len(update.plan)}"
    if update.headline:
        line += f" — {update.headline}"
    if applied.plan_problem:
        line += f" (plan not applied: {applied.plan_problem})"
    return line


async def _follow(args: argparse.Namespace, settings: Settings, applier: UpdateApplier) -> None:
    from .follow import Follower, agent_client
    from .watch import pacing_of

    def report(update: Update, applied: Applied) -> None:
        line = None if args.quiet else progress_line(update, applied)
        if line:
            print(line, file=sys.stderr, flush=True)

    pacing = pacing_of(settings)
    # The configured agent of this URL, if any, says where its card may point.
    allowed = next((a.allowedHosts for a in settings.a2a.agents if a.url == args.url), [])
    async with agent_client(args.url, idle_timeout=pacing.idle_timeout, allowed_hosts=allowed) as client:
        follower = Follower(client, applier, report=report, pacing=pacing)
        try:
            await _follow_with(follower, args)
        finally:
            await follower.close()


async def _follow_with(follower: Follower, args: argparse.Namespace) -> None:
    if args.context:
        await follower.follow_context(args.context)
        return
    if args.send is not None:
        if args.push:
            push = _push_config(args)
            task_id, _ = await follower.send(args.send, push=push)
            await follower.watch_with_push(task_id)
        else:
            await follower.send(args.send)
        return
    if args.push:
        await follower.register_push(args.task, args.push, args.push_token)
        await follower.watch_with_push(args.task)
    else:
        await follower.follow_task(args.task)


def _push_config(args: argparse.Namespace) -> a2a_pb2.TaskPushNotificationConfig:
    from a2a.types import a2a_pb2 as pb

    return pb.TaskPushNotificationConfig(url=args.push, token=args.push_token)
