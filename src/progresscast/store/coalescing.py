"""A Redis client that sends the commands many tasks issue in one turn of the event loop
as one pipeline: one socket write and one wake-up for all of them.

redis-py spends about 0.1 ms of CPU on each command it sends alone (a connection from
the pool, packing, a timeout around the read, its observability hooks); in a pipeline a
command costs a fraction of that. `serve` runs thousands of lanes, and those a batch of
change events wakes issue their reads in the same turn of the loop — 10,000 first drafts
at start-up all at once. Each caller still awaits its own reply (or its own error), in
the order it sent, so nothing about one command changes: Redis runs the batch as it
would have run the same commands sent one after another on one connection. An explicit
pipeline that is not a transaction joins the batch too, its commands together and in
order. A command that blocks on the server (`XREADGROUP … BLOCK`, `BLPOP` …) would hold
back every command batched with it, so it goes alone, as before.

A batch is sent and read here rather than through redis-py's `Pipeline`, which spends
≈ 14 µs of CPU on each command of a pipeline (its hooks, and a timeout of its own around
every reply's read) where packing, sending and reading cost ≈ 5: the replies of a batch
arrive together, so one timeout (the connection's `socket_timeout`) covers the whole
read. The rest is redis-py's: its packing, its reads and their errors, its reply
callbacks, its retry policy. A batch with a reply option redis-py treats specially
(never decoded, an answer for an empty reply) goes through its `Pipeline`, as before. A
batch of one command is sent the same way as any other.

With `keep_connections=N`, the client keeps up to N connections of its pool for its
batches: a batch takes a kept one that is free, else one from the pool (kept too while
fewer than N are). At a calm pace (a hundred chats, a write each now and then) most
batches hold one command, and taking a connection from redis-py's pool and giving it
back costs about as much CPU as the round trip itself (its locks, its timeout, its
checks and metrics); a batch sent while another waits for its replies is common even
then. Only the commands role's pool keeps any, one per `connections.KEEP_FROM`
connections of it (at most `connections.KEEP_MOST`): kept out of the pool, they are
fewer for the others (a blocking read among them).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from typing import Any

from redis.asyncio import Redis
from redis.asyncio.client import Pipeline
from redis.asyncio.connection import AbstractConnection
from redis.client import EMPTY_RESPONSE, NEVER_DECODE
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

_BLOCKING = frozenset({
    "BLPOP", "BRPOP", "BRPOPLPUSH", "BLMOVE", "BLMPOP", "BZPOPMIN", "BZPOPMAX", "BZMPOP", "WAIT", "WAITAOF",
})
"""Commands that may wait on the server (XREAD and XREADGROUP do when given BLOCK)."""
_SHAPED = (NEVER_DECODE, EMPTY_RESPONSE)
"""Reply options redis-py's own reading honours (a batch with one goes through it)."""


def _blocks(args: tuple[Any, ...]) -> bool:
    name = str(args[0]).upper()
    if name in _BLOCKING:
        return True
    return name in ("XREAD", "XREADGROUP") and any(a in ("BLOCK", b"BLOCK") for a in args[1:])


def _fail(reply: asyncio.Future[Any], exc: BaseException) -> None:
    if reply.done():  # its caller was cancelled meanwhile
        return
    if isinstance(exc, asyncio.CancelledError):  # the batch was cancelled (the loop is closing)
        reply.cancel()
    else:
        reply.set_exception(exc)


class LoadsOnce:
    """Mixed into a Redis client (a server's or a Cluster's): one `SCRIPT LOAD` for the
    callers that need the same script at once. A fresh server (or one whose scripts were
    flushed) answers a whole batch of a script's calls NOSCRIPT, and redis-py's `Script`
    has each caller load it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._loading: dict[bytes, asyncio.Future[Any]] = {}
        """Scripts being loaded, by their text."""

    async def script_load(self, script: Any) -> str:
        text = script.encode() if isinstance(script, str) else bytes(script)
        loading = self._loading.get(text)
        if loading is None:
            loading = self._loading[text] = asyncio.ensure_future(super().script_load(script))  # type: ignore[misc]
            loading.add_done_callback(lambda _: self._loading.pop(text, None))
            loading.add_done_callback(_looked_at)  # its error, if every caller was cancelled meanwhile
        return str(await asyncio.shield(loading))  # one caller cancelled: the others still wait


class CoalescingRedis(LoadsOnce, Redis):  # type: ignore[misc]  # redis-py's own bases disagree on command_info
    """`redis.asyncio.Redis` whose commands, issued in one turn of the event loop, leave
    as one pipeline (explicit pipelines and transactions are unchanged)."""

    def __init__(self, *args: Any, keep_connections: int = 0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._waiting: list[tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]] = []
        self._batches: set[asyncio.Task[None]] = set()
        """Batches on their way (referenced: a task only the loop knows may be collected)."""
        self._keeps = keep_connections
        self._held = 0
        """Connections taken from the pool and kept for batches (see the module)."""
        self._idle: list[AbstractConnection] = []
        """The kept connections no batch is using now."""

    async def execute_command(self, *args: Any, **options: Any) -> Any:
        if self.single_connection_client or _blocks(args):
            return await super().execute_command(*args, **options)  # type: ignore[no-untyped-call]
        return await self._join([(args, options)])[0]

    def pipeline(self, transaction: bool = True, shard_hint: str | None = None) -> Pipeline:
        if transaction:
            return super().pipeline(transaction, shard_hint)
        return _Joining(self, shard_hint)

    def _join(self, commands: list[tuple[tuple[Any, ...], dict[str, Any]]]) -> list[asyncio.Future[Any]]:
        """Queue commands for the batch of this turn of the loop: a future per reply."""
        loop = asyncio.get_running_loop()
        if not self._waiting:
            loop.call_soon(self._send_batch)
        replies: list[asyncio.Future[Any]] = []
        for args, options in commands:
            reply: asyncio.Future[Any] = loop.create_future()
            self._waiting.append((args, options, reply))
            replies.append(reply)
        return replies

    def _send_batch(self) -> None:
        batch, self._waiting = self._waiting, []
        task = asyncio.ensure_future(self._send(batch))
        self._batches.add(task)
        task.add_done_callback(self._batches.discard)

    async def _send(self, batch: list[tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]]) -> None:
        try:
            results = await self._exchange(batch)
            if results is None:
                async with super().pipeline(transaction=False) as pipe:  # redis-py's own
                    for args, options, _ in batch:
                        pipe.execute_command(*args, **options)
                    results = await pipe.execute(raise_on_error=False)
        except BaseException as exc:  # the connection failed: every caller hears it
            for _, _, reply in batch:
                _fail(reply, exc)
            if isinstance(exc, asyncio.CancelledError):
                raise
            return
        for (_, _, reply), result in zip(batch, results, strict=True):
            if reply.done():  # its caller was cancelled meanwhile
                continue
            if isinstance(result, Exception):
                reply.set_exception(result)
            else:
                reply.set_result(result)

    async def _exchange(
        self, batch: list[tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]]
    ) -> list[Any] | None:
        """Send the batch on one connection and read its replies: each a value or its
        `ResponseError`. A connection error fails them all (after the client's retries).
        None: redis-py's `Pipeline` reads this batch (a reply option it honours, or a
        server that spoke RESP2 to this connection: replies shaped by other callbacks)."""
        if any(option in options for _, options, _ in batch for option in _SHAPED):
            return None
        pool = self.connection_pool
        conn: AbstractConnection
        reused = bool(self._idle)
        if reused:  # taken before any await: the next batch takes another connection
            conn, kept = self._idle.pop(), True
        else:
            kept = self._held < self._keeps
            if kept:
                self._held += 1  # counted before the wait: batches waiting together keep no more than N
            try:
                conn = await pool.get_connection()  # type: ignore[no-untyped-call]
            except BaseException:
                if kept:
                    self._held -= 1
                raise
        try:
            if reused:  # the check the pool makes at its checkouts: closed by the server meanwhile, opened again
                await pool.ensure_connection(conn)
            if getattr(conn, "_resp2_fallback", False):
                return None
            return await conn.retry.call_with_retry(
                lambda: self._send_and_read(conn, batch), lambda _error: conn.disconnect()
            )
        finally:
            if kept:
                self._idle.append(conn)
            else:
                await pool.release(conn)

    async def _send_and_read(
        self, conn: AbstractConnection, batch: list[tuple[tuple[Any, ...], dict[str, Any], asyncio.Future[Any]]]
    ) -> list[Any]:
        await conn.send_packed_command(conn.pack_commands([args for args, _, _ in batch]))
        results: list[Any] = []
        try:
            async with asyncio.timeout(conn.socket_timeout):  # the batch's replies come together
                for args, options, _ in batch:
                    try:
                        # No timeout of its own (math.inf): the batch's covers it.
                        reply = await conn.read_response(timeout=math.inf)
                    except ResponseError as error:
                        results.append(error)
                        continue
                    callback = self.response_callbacks.get(args[0])
                    if callback is not None:
                        extra = {k: v for k, v in options.items() if k != "keys"} if options else options
                        reply = callback(reply, **extra)
                        if inspect.isawaitable(reply):
                            reply = await reply
                    results.append(reply)
        except TimeoutError as error:  # as redis-py's own read: the connection is dropped
            await conn.disconnect(nowait=True)
            where = f"{getattr(conn, 'host', '')}:{getattr(conn, 'port', '')}"
            raise RedisTimeoutError(f"Timeout reading from {where}") from error
        except BaseException:
            # Replies left unread on the socket must not reach the connection's next user.
            await conn.disconnect(nowait=True)
            raise
        return results


class _Joining(Pipeline):
    """A pipeline (not a transaction) whose commands join the client's batch."""

    def __init__(self, client: CoalescingRedis, shard_hint: str | None) -> None:
        super().__init__(client.connection_pool, client.response_callbacks, False, shard_hint)
        self._client = client

    async def execute(self, raise_on_error: bool = True) -> list[Any]:
        if self.watching or self.explicit_transaction or self.scripts or _any_blocks(self.command_stack):
            return await super().execute(raise_on_error)
        commands = [(tuple(args), dict(options)) for args, options in self.command_stack]
        replies = self._client._join(commands) if commands else []
        try:
            if replies:
                await asyncio.wait(replies)  # one batch answers them all at once
        finally:
            for reply in replies:  # none left with an error nobody looked at
                reply.add_done_callback(_looked_at)
            await self.reset()  # type: ignore[no-untyped-call]
        results: list[Any] = []
        for reply in replies:
            error = reply.exception()
            if error is not None and not isinstance(error, ResponseError):
                raise error  # the connection failed: the whole pipeline did
            results.append(error if error is not None else reply.result())
        if raise_on_error:
            for result in results:
                if isinstance(result, ResponseError):
                    raise result
        return results


def _looked_at(reply: asyncio.Future[Any]) -> None:
    if not reply.cancelled():
        reply.exception()


def _any_blocks(stack: Any) -> bool:
    return any(_blocks(args) for args, _ in stack)


__all__ = ["CoalescingRedis"]
