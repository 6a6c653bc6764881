"""`progresscast acp --session KEY -- AGENT …`: the editor starts this in place of its
ACP agent; it runs the agent and passes every message both ways, bytes unchanged and in
order, while the card follows the session (card.py).

Messages are newline-delimited JSON-RPC on stdio. Each line is forwarded as read; a copy
is parsed to observe it, and nothing observed can hold a line up or stop the next one.
The proxy adds to the agent's side only what the protocol lets a client send: the
answer to a `session/request_permission` the chat answered first, and `session/cancel`
when Stop is pressed in chat. It drops only the editor's later answer to a permission
request the proxy already answered. Everything else the agent and editor say to each
other reaches the other side as it was written.

Permission requests go to the editor as usual and become a chat ask with the request's
own options at once; the first answer wins. The editor has no way to be told a request
was answered elsewhere (ACP v1 has no cancel for an agent's request), so its dialog
stays until someone answers it, and that answer is dropped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...model.asks import MAX_OPTION_CHARS, MAX_PROMPT_CHARS, AskInput, AskState
from ...model.card import CardError, clean_text, cut
from ...model.owners import Owner
from ...model.view import RunState
from ...stdin import stdin_chunks
from ...stopping import still_wanted
from ...store.cards import CardStore
from .card import CardWriter, run_end, warn

if TYPE_CHECKING:
    from ...config.settings import Settings

STOP_POLL = 1.0
"""Seconds between looks at a Stop pressed in chat on the live run."""
ASK_POLL = 1.0
FLUSH = 3.0
"""Seconds the last card writes are given once the agent exited."""
CHUNK = 1 << 16


def _key(request_id: Any) -> str:
    # 1 and "1" are different JSON-RPC ids
    return json.dumps(request_id)


def _message(line: bytes) -> dict[str, Any] | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def _line(message: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **message}, ensure_ascii=False).encode() + b"\n"


async def _chunks(reader: asyncio.StreamReader) -> AsyncIterator[bytes]:
    while chunk := await reader.read(CHUNK):
        yield chunk


async def _lines(chunks: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
    """Lines as read, newline kept (the last may lack one); no limit on a line's length."""
    pending = b""
    async for chunk in chunks:
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            yield line + b"\n"
    if pending:
        yield pending


@dataclass
class Permission:
    """A `session/request_permission` the agent sent, until one side answered it."""

    request_id: Any
    session_id: str | None
    options: dict[str, str]
    """Chat label → the option's `optionId`."""
    settled: str | None = None
    """Who answered first: `editor`, `chat` or `stop`."""
    ask_id: str | None = None
    task: asyncio.Task[None] | None = field(default=None, repr=False)


class Output:
    """Our stdout: an asyncio pipe where it is one, else plain blocking writes (a file)."""

    def __init__(self) -> None:
        self._writer: asyncio.StreamWriter | None = None

    async def open(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            transport, protocol = await loop.connect_write_pipe(
                lambda: asyncio.streams.FlowControlMixin(), os.fdopen(os.dup(1), "wb")
            )
        except (ValueError, OSError):
            return
        self._writer = asyncio.StreamWriter(transport, protocol, None, loop)

    async def write(self, data: bytes) -> None:
        if self._writer is None:
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
            return
        self._writer.write(data)
        await self._writer.drain()


class Proxy:
    def __init__(self, card: CardWriter, agent: asyncio.subprocess.Process, out: Output) -> None:
        self.card = card
        self.agent = agent
        self.out = out
        self.permissions: dict[str, Permission] = {}
        self.prompts: dict[str, str] = {}
        """An editor's `session/prompt` request id → the run it started."""
        self.stopped: set[str] = set()
        """Runs a chat's Stop already cancelled."""
        self.ended_by_editor = False
        self._background: set[asyncio.Task[None]] = set()

    # -- the agent's input ---------------------------------------------------------------

    def to_agent(self, data: bytes) -> None:
        stdin = self.agent.stdin
        if stdin is not None and not stdin.is_closing():
            stdin.write(data)

    async def from_editor(self, chunks: AsyncIterator[bytes]) -> None:
        async for line in _lines(chunks):
            if self._keep_from_editor(line):
                self.to_agent(line)
                if self.agent.stdin is not None:
                    try:
                        await self.agent.stdin.drain()
                    except ConnectionError:
                        break  # the agent is gone; its exit ends the session
        self.ended_by_editor = True
        if self.agent.stdin is not None and not self.agent.stdin.is_closing():
            self.agent.stdin.close()  # end of input: the agent ends as it would without us

    def _keep_from_editor(self, line: bytes) -> bool:
        """Observe a line from the editor; False: it answers what the proxy answered already."""
        try:
            message = _message(line)
            if message is None:
                return True
            method = message.get("method")
            if method is None and "id" in message:
                permission = self.permissions.pop(_key(message["id"]), None)
                if permission is not None:
                    if permission.settled is not None:
                        return False
                    permission.settled = "editor"
                    self._withdraw_soon(permission)
            elif method == "session/prompt" and "id" in message:
                params = message.get("params")
                session = params.get("sessionId") if isinstance(params, dict) else None
                self.prompts[_key(message["id"])] = self.card.prompt_started(str(session) if session else "")
        except Exception as exc:  # observing never stops a line
            self.card.say_once(f"observe:{type(exc).__name__}", f"a message from the editor was not observed: {exc}")
        return True

    # -- the agent's output --------------------------------------------------------------

    async def from_agent(self) -> None:
        assert self.agent.stdout is not None
        async for line in _lines(_chunks(self.agent.stdout)):
            try:
                await self.out.write(line)
            except (BrokenPipeError, ConnectionError):
                pass  # the editor left: keep draining the agent so it is not blocked
            self._observe_agent(line)

    def _observe_agent(self, line: bytes) -> None:
        try:
            message = _message(line)
            if message is None:
                return
            method = message.get("method")
            if method == "session/update":
                self.card.update(message.get("params"))
            elif method == "session/request_permission" and "id" in message:
                self._permission(message)
            elif method is None and "id" in message:
                run_id = self.prompts.pop(_key(message["id"]), None)
                if run_id is not None:
                    self.card.prompt_ended(run_id, run_end(message), message)
        except Exception as exc:
            self.card.say_once(f"observe:{type(exc).__name__}", f"a message from the agent was not observed: {exc}")

    # -- permission requests ---------------------------------------------------------------

    def _permission(self, message: dict[str, Any]) -> None:
        raw = message.get("params")
        params: dict[str, Any] = raw if isinstance(raw, dict) else {}
        labels: dict[str, str] = {}
        for option in params.get("options") or []:
            if isinstance(option, dict) and isinstance(option.get("optionId"), str):
                name = " ".join(clean_text(str(option.get("name") or option["optionId"])).split())
                label = cut(name, MAX_OPTION_CHARS)
                labels.setdefault(label, option["optionId"])
        session = params.get("sessionId")
        permission = Permission(message["id"], session if isinstance(session, str) else None, labels)
        self.permissions[_key(message["id"])] = permission
        tool = params.get("toolCall")
        title = tool.get("title") if isinstance(tool, dict) else None
        if not isinstance(title, str) or not title.strip():
            title = "a tool call"
        prompt = cut(" ".join(clean_text(f"Allow {title}?").split()), MAX_PROMPT_CHARS)
        try:
            body = AskInput.parse({"kind": "choice", "prompt": prompt, "options": list(labels), "source": "acp"})
        except CardError as exc:
            self.card.say_once(f"ask:{exc.field}", f"a permission request is asked in the editor only: {exc}")
            return
        permission.task = asyncio.create_task(self._ask(permission, body))

    async def _ask(self, permission: Permission, body: AskInput) -> None:
        await self.card.connected.wait()
        ask = await self.card.attempt("ask", lambda store: store.asks.open(self.card.owner, body))
        if ask is None:
            return
        ask_id = permission.ask_id = ask.ask_id
        while permission.settled is None:
            done = await self.card.attempt("ask", lambda store: store.asks.wait(self.card.owner, ask_id, ASK_POLL))
            if permission.settled is not None:
                break  # the editor (or a Stop) answered while we looked
            if done is None:  # the store failed: look again later
                await asyncio.sleep(ASK_POLL)
                continue
            if done.state is AskState.answered and done.answer is not None and done.answer.options:
                option = permission.options.get(done.answer.options[0])
                if option is None:
                    return
                permission.settled = "chat"
                self.to_agent(_line({
                    "id": permission.request_id,
                    "result": {"outcome": {"outcome": "selected", "optionId": option}},
                }))
                return
            if done.state is not AskState.open:
                return  # expired or withdrawn: the editor's answer is the one
        if permission.settled != "chat":
            await self._withdraw(permission)

    def _withdraw_soon(self, permission: Permission) -> None:
        if permission.task is not None and not permission.task.done():
            return  # its task sees `settled` and withdraws the ask itself
        if permission.ask_id is not None:
            task = asyncio.create_task(self._withdraw(permission))
            self._background.add(task)
            task.add_done_callback(self._background.discard)

    async def _withdraw(self, permission: Permission) -> None:
        if permission.ask_id is not None:
            ask_id = permission.ask_id
            await self.card.attempt("withdraw", lambda store: store.asks.withdraw(self.card.owner, ask_id))

    # -- Stop from chat ------------------------------------------------------------------

    async def watch_stop(self) -> None:
        await self.card.connected.wait()
        while True:
            await asyncio.sleep(STOP_POLL)
            await still_wanted()  # redis-py may have swallowed the cancel
            run_id, session = self.card.run_id, self.card.run_session
            if run_id is None or run_id in self.stopped:
                continue
            if await self._stop_pressed(run_id) and self.card.run_id == run_id:
                self.stopped.add(run_id)
                self._cancel(session)

    async def _stop_pressed(self, run_id: str) -> bool:
        mark = await self.card.attempt("stop", lambda store: store.asks.stop_mark(self.card.owner, run_id))
        return mark is not None

    def _cancel(self, session: str | None) -> None:
        """Cancel the live turn as a client does: `session/cancel`, and its open permission
        requests answered `cancelled` (the protocol asks a cancelling client to)."""
        self.to_agent(_line({"method": "session/cancel", "params": {"sessionId": session}}))
        for permission in self.permissions.values():
            if permission.settled is None and permission.session_id == session:
                permission.settled = "stop"
                self.to_agent(_line({"id": permission.request_id, "result": {"outcome": {"outcome": "cancelled"}}}))
                if permission.task is None or permission.task.done():
                    self._withdraw_soon(permission)

    # -- the end -------------------------------------------------------------------------

    async def finish(self, signalled: bool) -> None:
        """The agent exited: a turn still open ended, and the open asks are withdrawn."""
        if self.card.run_id is not None:
            state = RunState.canceled if signalled or self.ended_by_editor else RunState.failed
            self.card.prompt_ended(self.card.run_id, state)
        for permission in self.permissions.values():
            if permission.task is not None:
                permission.task.cancel()
            if permission.settled is None:
                await self._withdraw(permission)
        await self.card.flush(FLUSH)


def _status(returncode: int) -> int:
    """The agent's exit status, as a shell reports a signal's (128 + its number)."""
    return returncode if returncode >= 0 else 128 - returncode


async def run_acp(owner: Owner, command: list[str], connect: Callable[[], Awaitable[CardStore]]) -> int:
    """Run `command` as the ACP agent between our stdio and it; its exit status."""
    try:
        # Its own process group: a Ctrl-C or a signal to ours reaches it once, from us.
        agent = await asyncio.create_subprocess_exec(
            *command, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, start_new_session=True
        )
    except OSError as exc:
        warn(f"cannot run {command[0]}: {exc.strerror or exc}")
        return 127
    card = CardWriter(owner, connect)
    out = Output()
    await out.open()
    proxy = Proxy(card, agent, out)
    loop = asyncio.get_running_loop()
    signalled = False

    def forward(signum: int) -> None:
        nonlocal signalled
        signalled = True
        if agent.returncode is None:
            agent.send_signal(signum)

    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, forward, signum)
    writer = asyncio.create_task(card.run())
    stop = asyncio.create_task(proxy.watch_stop())
    editor = asyncio.create_task(proxy.from_editor(stdin_chunks()))
    try:
        await proxy.from_agent()
        returncode = await agent.wait()
        editor.cancel()
        stop.cancel()
        await proxy.finish(signalled)
    finally:
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
        for task in (editor, stop, writer):
            task.cancel()
        if card.store is not None:
            await card.store.redis.aclose()
    return _status(returncode)


def acp_command(args: argparse.Namespace, settings: Settings) -> int:
    """`progresscast acp`: a bad --session or --agent is refused before the agent starts;
    a store that is not there only leaves the session unseen."""
    from ...model.owners import resolve_option_owner

    if not args.wrapped:
        raise CardError("AGENT_COMMAND", "is required after -- (the agent to run, e.g. -- gemini --experimental-acp)")
    owner = resolve_option_owner(
        args.session, args.agent, known_agents=settings.agents.known_set, default_agent=settings.agents.default
    )

    async def connect() -> CardStore:
        from ...store.connections import connect as connect_redis
        from ...store.connections import redis_url

        # The embedded Redis may be started here: off the loop, so the bytes flow meanwhile.
        url = await asyncio.to_thread(redis_url, args.redis, settings)
        store = CardStore(connect_redis(url, settings), metrics=False)
        await store.redis.ping()
        return store

    return asyncio.run(run_acp(owner, list(args.wrapped), connect))
