"""A room on the session's Synapse as a person and the bot see it: `Person` makes the
calls a Matrix app makes for someone, `Harness` a bot account (Synapse's default rate
limits), a person (an admin without rate limits) and the adapter, restartable.

What a room shows is read back as the person's client would: the bot's messages
from `/messages`, each with its newest `m.replace` edit applied, redactions as gone.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
from redis.asyncio import Redis

from progresscast.channels.worker import WorkerOptions
from progresscast.config.settings import Settings
from progresscast.matrix.adapter import MatrixAdapter, MatrixOptions
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.render.matrix_payload import notice_html
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.store.embedded import ensure_embedded, stop_embedded
from progresscast.testing.synapse import CLIENT, Account, Synapse

SHOP = Owner("main", "shop")


def is_draft(content: dict[str, Any]) -> bool:
    """A draft (or an answer), not a command's reply: both are HTML notices, but a
    reply's HTML is its plain text escaped (`notice_html`)."""
    html = content.get("formatted_body")
    return html is not None and html != notice_html(str(content.get("body", "")))


async def until(check: Callable[[], Awaitable[Any]], what: str, timeout: float = 20.0) -> Any:
    """Wait until `check()` returns something truthy; fail saying `what` otherwise."""
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = await check()
        if last:
            return last
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}; last seen: {last!r}")


class Person:
    """A person's client: the calls a Matrix app makes for them."""

    def __init__(self, synapse: Synapse, account: Account) -> None:
        self.account = account
        self.http = httpx.AsyncClient(
            base_url=synapse.url, headers={"Authorization": f"Bearer {account.access_token}"}, timeout=30
        )
        self._txn = 0

    async def call(self, method: str, path: str, body: Any = None, **params: Any) -> Any:
        reply = await self.http.request(method, path, json=body, params=params or None)
        assert reply.status_code < 400, f"{method} {path}: {reply.status_code} {reply.text}"
        return reply.json()

    async def create_room(self, **extra: Any) -> str:
        reply = await self.call("POST", f"{CLIENT}/createRoom", {"preset": "private_chat", **extra})
        return str(reply["room_id"])

    async def invite(self, room: str, user: str) -> None:
        await self.call("POST", f"{CLIENT}/rooms/{quote(room)}/invite", {"user_id": user})

    async def say(self, room: str, body: str, **content: Any) -> str:
        self._txn += 1
        path = f"{CLIENT}/rooms/{quote(room)}/send/m.room.message/t{self._txn}.{time.monotonic_ns()}"
        return str((await self.call("PUT", path, {"msgtype": "m.text", "body": body, **content}))["event_id"])

    async def members(self, room: str) -> set[str]:
        return set((await self.call("GET", f"{CLIENT}/rooms/{quote(room)}/joined_members"))["joined"])

    async def events(self, room: str) -> list[dict[str, Any]]:
        reply = await self.call("GET", f"{CLIENT}/rooms/{quote(room)}/messages", dir="f", limit="1000")
        return list(reply["chunk"])

    async def shown(self, room: str, sender: str) -> list[dict[str, Any]]:
        """The sender's messages as a client shows them: each with its newest edit
        applied (`content` is then the `m.new_content`), redacted ones left out."""
        events = await self.events(room)
        edits: dict[str, dict[str, Any]] = {}
        out: list[dict[str, Any]] = []
        for event in events:
            if event["type"] != "m.room.message" or event["sender"] != sender:
                continue
            relation = event["content"].get("m.relates_to", {})
            if relation.get("rel_type") == "m.replace":
                edits[relation["event_id"]] = event
            elif event["content"]:  # a redacted event has no content left
                out.append(event)
        for event in out:
            edit = edits.get(event["event_id"])
            event["shown"] = edit["content"]["m.new_content"] if edit else event["content"]
            event["edit"] = edit
        return out

    async def close(self) -> None:
        await self.http.aclose()


class Harness:
    """A bot account (Synapse's default rate limits), a person, and the adapter (restartable)."""

    def __init__(self, synapse: Synapse, redis: Redis, redis_url: str = "") -> None:
        self.synapse = synapse
        self.redis = redis
        self.redis_url = redis_url
        """What `progresscast --redis` takes to reach this harness's Redis."""
        self.store = CardStore(redis)
        self.bot = synapse.register("bot")
        self.person = Person(synapse, synapse.register("person", admin=True, exempt=True))
        self.rooms: list[dict[str, Any]] = []
        self.matrix: dict[str, Any] = {}
        self.adapter: MatrixAdapter | None = None
        self.task: asyncio.Task[None] | None = None

    def settings(self) -> Settings:
        return Settings.model_validate(
            {
                "channels": {
                    "matrix": {
                        "homeserver": self.synapse.url,
                        "userId": self.bot.user_id,
                        "accessToken": self.bot.access_token,
                        "rooms": self.rooms,
                        **self.matrix,
                    }
                }
            }
        )

    async def start(self) -> None:
        options = MatrixOptions(worker=WorkerOptions(group="matrix", consumer="test", settle=1.0), poll_ms=1000)
        self.adapter = MatrixAdapter(self.settings(), self.redis, options=options)
        self.task = asyncio.create_task(self.adapter.run())
        waiter = asyncio.create_task(self.adapter.started.wait())
        await asyncio.wait([waiter, self.task], timeout=15, return_when=asyncio.FIRST_COMPLETED)
        if self.task.done():
            self.task.result()

    async def stop(self) -> None:
        if self.task is not None:
            self.task.cancel()
            try:
                await asyncio.wait_for(asyncio.shield(self.task), 15)
            except asyncio.CancelledError:
                pass
            self.task = None

    async def room(self, sessions: list[str] | None = None, *, granted: bool = True) -> str:
        room = await self.person.create_room()
        if granted:
            self.rooms.append({"id": room, **({"sessions": sessions} if sessions is not None else {})})
        return room

    async def invite(self, room: str) -> None:
        await self.person.invite(room, self.bot.user_id)
        await until(lambda: self._joined(room), f"the bot to join {room}")

    async def _joined(self, room: str) -> bool:
        return self.bot.user_id in await self.person.members(room)

    async def command(self, room: str, text: str, reply: str) -> str:
        """Type a command and wait for the bot's reply containing `reply`."""
        sent = await self.person.say(room, text)

        said: list[str] = []

        async def answered() -> str | None:
            events = await self.person.events(room)
            after = [e for e in events[next(i for i, e in enumerate(events) if e["event_id"] == sent) :]]
            said[:] = [str(e["content"].get("body", "")) for e in after if e["sender"] == self.bot.user_id]
            return next((body for body in said if reply in body), None)

        try:
            return str(await until(answered, f"a reply with {reply!r} to {text!r}"))
        except AssertionError:
            raise AssertionError(f"no reply with {reply!r} to {text!r}; the bot said {said}") from None

    async def said(self, room: str) -> list[str]:
        """The bodies of the bot's messages in the room, oldest first (edits included)."""
        events = await self.person.events(room)
        return [
            str(e["content"].get("body", "")) for e in events
            if e["sender"] == self.bot.user_id and e["type"] == "m.room.message"
        ]

    async def put(self, *steps: tuple[str, str], markdown: str | None = None, owner: Owner = SHOP) -> None:
        plan = [{"step": s, "status": st} for s, st in steps] or None
        await self.store.put(owner, CardInput.parse({"plan": plan, "markdown": markdown}))

    async def drafts(self, room: str) -> list[dict[str, Any]]:
        """The bot's m.notice drafts the room shows (command replies left out)."""
        shown = await self.person.shown(room, self.bot.user_id)
        return [e for e in shown if is_draft(e["shown"])]

    async def shows(self, room: str, *needles: str, count: int = 1) -> list[dict[str, Any]]:
        async def ok() -> list[dict[str, Any]] | None:
            drafts = await self.drafts(room)
            last = drafts[-1]["shown"]["body"] if drafts else ""
            return drafts if len(drafts) == count and all(n in last for n in needles) else None

        found: list[dict[str, Any]] = await until(ok, f"{count} draft(s) showing {needles}", timeout=40)
        return found


@asynccontextmanager
async def room_harness(synapse: Synapse, home: Path) -> AsyncIterator[Harness]:
    """A harness on its own embedded Redis under `home`, stopped and closed after."""
    url = ensure_embedded(home)
    redis = connect(url)
    made = Harness(synapse, redis, url)
    try:
        yield made
    finally:
        await made.stop()
        await made.person.close()
        await redis.aclose()
        stop_embedded(home)


async def following(h: Harness, sessions: list[str] | None = None) -> str:
    room = await h.room(sessions if sessions is not None else ["shop*"])
    await h.start()
    await h.invite(room)
    await h.command(room, "!pc follow shop", "Following")
    return room


class HomeserverProxy:
    """A loopback HTTP proxy in front of the homeserver, for faults on the bot's way.

    `drop_first_draft`: the first draft send it sees is forwarded, and then the
    connection is dropped instead of answering: the send was applied, but the bot
    cannot know. `sync_down`: while set, every /sync is answered 502 (not forwarded)."""

    def __init__(self, upstream: str, *, drop_first_draft: bool = False) -> None:
        self.upstream = upstream
        self.drop_first_draft = drop_first_draft
        self.sync_down = False
        self.failed_syncs = 0
        self.dropped: list[str] = []
        self.sends: list[str] = []
        self.first = 0.0
        self.http = httpx.AsyncClient(base_url=upstream, timeout=60)
        self.runner: Any = None
        self.url = ""

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        if self.sync_down and request.path.endswith("/sync"):
            self.failed_syncs += 1
            return web.Response(status=502, text="Bad Gateway")
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")}
        reply = await self.http.request(request.method, request.path_qs, content=body, headers=headers)
        sent = json.loads(body) if "/send/m.room.message/" in request.path else {}
        if is_draft(sent) and "m.new_content" not in sent and self.drop_first_draft:
            txn = request.path.rsplit("/", 1)[-1]
            self.sends.append(txn)
            # The first send, and whatever repeats it at once (the HTTP client itself
            # repeats an idempotent PUT once on a dropped keep-alive connection).
            if not self.dropped or (txn == self.sends[0] and time.monotonic() - self.first < 0.5):
                if not self.dropped:
                    self.first = time.monotonic()
                    self.dropped.append(reply.json().get("event_id", ""))
                assert request.transport is not None
                request.transport.abort()
                return web.Response(status=500)
        return web.Response(status=reply.status_code, body=reply.content, content_type="application/json")

    async def start(self) -> None:
        from aiohttp import web

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        await self.runner.cleanup()
        await self.http.aclose()


__all__ = [
    "CLIENT", "SHOP", "Harness", "HomeserverProxy", "Person", "following", "is_draft", "room_harness", "until",
]
