"""The Matrix adapter against a real Synapse homeserver (tests/synapse_server.py).

A person (an admin account without rate limits) creates a room, invites the bot,
and types `!pc follow shop`; cards are written through the store (the one write
path every input uses). What the room shows is read back as the person's client
would: the bot's messages from `/messages`, each with its newest `m.replace` edit
applied, redactions as gone. The bot account keeps Synapse's default rate limits.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.channels.worker import WorkerOptions
from progresscast.config.settings import Settings
from progresscast.matrix.adapter import MatrixAdapter, MatrixOptions
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.connections import connect
from progresscast.store.embedded import ensure_embedded, stop_embedded
from synapse_server import Account, Synapse

SHOP = Owner("main", "shop")
CLIENT = "/_matrix/client/v3"


def test_synapse_registers_users(synapse: Synapse) -> None:
    bot = synapse.register("bot")
    assert synapse.request(bot, "GET", f"{CLIENT}/account/whoami")["user_id"] == bot.user_id


@pytest.fixture
async def redis(tmp_path: Path) -> AsyncIterator[Redis]:
    home = tmp_path / "home"
    client = connect(ensure_embedded(home))
    yield client
    await client.aclose()
    stop_embedded(home)


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

    def __init__(self, synapse: Synapse, redis: Redis) -> None:
        self.synapse = synapse
        self.redis = redis
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

    async def put(self, *steps: tuple[str, str], markdown: str | None = None, owner: Owner = SHOP) -> None:
        plan = [{"step": s, "status": st} for s, st in steps] or None
        await self.store.put(owner, CardInput.parse({"plan": plan, "markdown": markdown}))

    async def drafts(self, room: str) -> list[dict[str, Any]]:
        """The bot's m.notice drafts the room shows (command replies left out)."""
        shown = await self.person.shown(room, self.bot.user_id)
        return [e for e in shown if "formatted_body" in e["shown"]]

    async def shows(self, room: str, *needles: str, count: int = 1) -> list[dict[str, Any]]:
        async def ok() -> list[dict[str, Any]] | None:
            drafts = await self.drafts(room)
            last = drafts[-1]["shown"]["body"] if drafts else ""
            return drafts if len(drafts) == count and all(n in last for n in needles) else None

        found: list[dict[str, Any]] = await until(ok, f"{count} draft(s) showing {needles}", timeout=40)
        return found


@pytest.fixture
async def harness(synapse: Synapse, redis: Redis) -> AsyncIterator[Harness]:
    made = Harness(synapse, redis)
    yield made
    await made.stop()
    await made.person.close()


async def following(h: Harness, sessions: list[str] | None = None) -> str:
    room = await h.room(sessions if sessions is not None else ["shop*"])
    await h.start()
    await h.invite(room)
    await h.command(room, "!pc follow shop", "Following")
    return room


async def test_a_followed_card_is_one_draft_edited_to_the_newest_card(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"), ("Pay", "pending"))
    first = (await harness.shows(room, "▶️ Pick the items"))[0]
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
    drafts = await harness.shows(room, "✅ Pick the items", "▶️ Pay")
    assert drafts[0]["event_id"] == first["event_id"]  # edited in place, not sent again
    shown, edit = drafts[0]["shown"], drafts[0]["edit"]
    assert shown["msgtype"] == "m.notice" and shown["format"] == "org.matrix.custom.html"
    assert "<strong>Pay</strong>" in shown["formatted_body"]
    assert edit["content"]["m.relates_to"] == {"rel_type": "m.replace", "event_id": first["event_id"]}
    assert edit["content"]["m.mentions"] == {} and shown["m.mentions"] == {}


async def test_clear_redacts_and_a_restart_edits_the_same_draft(harness: Harness) -> None:
    room = await following(harness)
    await harness.put(("Pick the items", "in_progress"))
    first = (await harness.shows(room, "Pick the items"))[0]
    await harness.stop()
    await harness.put(("Pick the items", "completed"), ("Ship", "in_progress"))
    await harness.start()
    drafts = await harness.shows(room, "▶️ Ship")
    assert drafts[0]["event_id"] == first["event_id"]
    await harness.store.clear(SHOP)

    async def redacted() -> bool:
        events = await harness.person.events(room)
        draft = next(e for e in events if e["event_id"] == first["event_id"])
        return not draft["content"] and "redacted_because" in draft.get("unsigned", {})

    await until(redacted, "the draft to be redacted")
    assert await harness.drafts(room) == []


async def test_a_burst_under_the_default_rate_limit_ends_on_the_newest_card(
    harness: Harness, caplog: pytest.LogCaptureFixture
) -> None:
    # Faster than Synapse lets one user send (0.2 events a second after a burst of
    # 10): the homeserver's M_LIMIT_EXCEEDED paces the bot, and edits coalesce.
    harness.matrix = {"callsPerSecond": 20, "roomInterval": 0.05}
    room = await following(harness)
    caplog.set_level(logging.WARNING, logger="progresscast.matrix")
    for i in range(1, 31):
        await harness.put((f"Item {i}", "in_progress"))
        await asyncio.sleep(0.05)
    drafts = await harness.shows(room, "Item 30")
    assert len(drafts) == 1
    assert any("flood control" in r.getMessage() for r in caplog.records), "the homeserver never said M_LIMIT_EXCEEDED"
    edits = [e for e in await harness.person.events(room) if e["content"].get("m.relates_to", {}).get("rel_type") == "m.replace"]
    assert len(edits) < 29  # coalesced: not one edit per write


async def test_agent_text_neither_pings_nor_injects(harness: Harness) -> None:
    room = await following(harness)
    person = harness.person
    # The bot may notify the room (power 50), and notices notify the person too.
    levels = await person.call("GET", f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/")
    levels["users"][harness.bot.user_id] = 50
    await person.call("PUT", f"{CLIENT}/rooms/{quote(room)}/state/m.room.power_levels/", levels)
    await person.call("PUT", f"{CLIENT}/pushrules/global/override/.m.rule.suppress_notices/enabled", {"enabled": False})
    me = person.account.user_id
    await harness.put(
        ("@room look now", "in_progress"), (f"<script>alert(1)</script> {me}", "pending"),
        markdown=f"@room **hey** {me} <script>steal()</script> <img src=x onerror=alert(1)>",
    )
    draft = (await harness.shows(room, "@room look now"))[0]
    await harness.put(("@room look again", "in_progress"), (f"<script>alert(2)</script> {me}", "pending"))
    draft = (await harness.shows(room, "@room look again"))[0]
    for content in (draft["content"], draft["shown"], draft["edit"]["content"]):
        assert content["m.mentions"] == {}
    html = draft["shown"]["formatted_body"]
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html

    # A message of the bot that does not say whom it mentions does ping @room: the
    # check below can see a ping.
    control = harness.synapse.request(
        harness.bot, "PUT", f"{CLIENT}/rooms/{quote(room)}/send/m.room.message/control1",
        {"msgtype": "m.text", "body": "@room control"},
    )["event_id"]

    async def highlights() -> list[str]:
        reply = await person.call("GET", f"{CLIENT}/notifications")
        return [
            n["event"]["event_id"] for n in reply["notifications"]
            if any(isinstance(a, dict) and a.get("set_tweak") == "highlight" and a.get("value", True) for a in n["actions"])
        ]

    pinged = await until(highlights, "the control message to ping the person")
    assert pinged == [control]


async def test_rooms_not_granted_or_not_following_get_nothing(harness: Harness) -> None:
    room = await following(harness, ["shop*"])
    quiet = await harness.room(["shop*"])  # granted, follows nothing
    stranger = await harness.room(granted=False)
    await harness.stop()
    await harness.start()  # with the new rooms in its settings
    await harness.invite(quiet)
    await harness.person.invite(stranger, harness.bot.user_id)
    reply = await harness.command(room, "!pc follow billing", "may not follow")
    assert "main:billing" in reply or "billing" in reply
    await harness.person.say(stranger, "!pc follow shop")
    await harness.put(("Pick the items", "in_progress"))
    await harness.put(("Pick", "in_progress"), owner=Owner("main", "billing"))
    await harness.shows(room, "Pick the items")

    async def declined() -> bool:
        state = await harness.person.call("GET", f"{CLIENT}/rooms/{quote(stranger)}/state/m.room.member/{quote(harness.bot.user_id)}")
        return state.get("membership") == "leave"

    await until(declined, "the bot to decline the invite to a room not granted")
    assert harness.bot.user_id not in await harness.person.members(stranger)
    assert await harness.drafts(quiet) == []
    said = [e for e in await harness.person.events(stranger) if e["sender"] == harness.bot.user_id]
    assert [e["type"] for e in said] == ["m.room.member"]  # declining the invite, nothing more
    assert len(await harness.drafts(room)) == 1  # billing is not granted here: no draft of it


class DroppingProxy:
    """A loopback HTTP proxy in front of the homeserver that forwards the first draft
    send it sees and then drops the connection instead of answering: the send was
    applied, but the bot cannot know."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream
        self.dropped: list[str] = []
        self.sends: list[str] = []
        self.first = 0.0
        self.http = httpx.AsyncClient(base_url=upstream, timeout=60)
        self.runner: Any = None
        self.url = ""

    async def handle(self, request: Any) -> Any:
        from aiohttp import web

        body = await request.read()
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "content-type")}
        reply = await self.http.request(request.method, request.path_qs, content=body, headers=headers)
        is_draft = "/send/m.room.message/" in request.path and b"formatted_body" in body and b"m.new_content" not in body
        if is_draft:
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


async def test_an_unsure_send_is_repeated_with_its_transaction_id_and_lands_once(harness: Harness) -> None:
    proxy = DroppingProxy(harness.synapse.url)
    await proxy.start()
    try:
        harness.matrix = {"homeserver": proxy.url}
        room = await following(harness)
        await harness.put(("Pick the items", "in_progress"))
        drafts = await harness.shows(room, "Pick the items")
        await until(lambda: asyncio.sleep(0, proxy.dropped), "the proxy to drop the first send")
        assert drafts[0]["event_id"] == proxy.dropped[0]
        await until(lambda: asyncio.sleep(0, len(set(proxy.sends)) == 1 and len(proxy.sends) > 2), "a repeat")
        assert len(set(proxy.sends)) == 1  # the same transaction every time, so the same event
        await harness.put(("Pick the items", "completed"))
        drafts = await harness.shows(room, "✅ Pick the items")  # one draft: the one that landed, edited
        assert drafts[0]["event_id"] == proxy.dropped[0]
        assert len(set(proxy.sends)) == 1, proxy.sends
    finally:
        await harness.stop()
        await proxy.stop()


async def test_a_follow_typed_in_a_thread_shows_the_draft_in_that_thread(harness: Harness) -> None:
    room = await harness.room(["shop*"])
    await harness.start()
    await harness.invite(room)
    root = await harness.person.say(room, "Shop release")
    thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": root}}
    await harness.person.say(room, "!pc follow shop", **thread)
    await harness.put(("Pick the items", "in_progress"))
    draft = (await harness.shows(room, "Pick the items"))[0]
    assert draft["content"]["m.relates_to"]["rel_type"] == "m.thread"
    assert draft["content"]["m.relates_to"]["event_id"] == root
    async def replied() -> list[dict[str, Any]]:
        return [
            e for e in await harness.person.events(room)
            if e["sender"] == harness.bot.user_id and "Following" in e["content"].get("body", "")
        ]

    replies = await until(replied, "the reply to the follow")
    assert replies[0]["content"]["m.relates_to"]["event_id"] == root  # answered in the thread


async def test_commands_typed_while_the_adapter_is_down_run_once_after_it_restarts(harness: Harness) -> None:
    room = await following(harness)
    await harness.stop()
    await harness.person.say(room, "!pc mode partial")
    await harness.start()
    await harness.command(room, "!pc help", "mode partial")
    events = await harness.person.events(room)
    bodies = [e["content"].get("body", "") for e in events if e["sender"] == harness.bot.user_id]
    assert sum("Following" in b for b in bodies) == 1  # the follow before the restart is not run again
    assert sum("Mode for this room: partial" in b for b in bodies) == 1  # the one typed meanwhile, once


async def test_only_moderators_change_what_a_room_follows(harness: Harness) -> None:
    room = await following(harness)
    guest = Person(harness.synapse, harness.synapse.register("guest", admin=True, exempt=True))
    try:
        await harness.person.invite(room, guest.account.user_id)
        await guest.call("POST", f"{CLIENT}/rooms/{quote(room)}/join", {})
        await guest.say(room, "!pc unfollow")
        await harness.command(room, "!pc help", "Here: following agent:main:shop")
        said = [e["content"].get("body", "") for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id]
        assert any("power level 50" in b for b in said)
    finally:
        await guest.close()


async def test_an_encrypted_room_is_told_once_and_left(harness: Harness) -> None:
    encryption = {"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}
    room = await harness.person.create_room(initial_state=[encryption])
    harness.rooms.append({"id": room, "sessions": ["shop*"]})
    await harness.start()
    await harness.person.invite(room, harness.bot.user_id)

    async def left() -> bool:
        return harness.bot.user_id not in await harness.person.members(room) and bool(
            [e for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id and e["type"] == "m.room.message"]
        )

    await until(left, "the bot to say why and leave")
    said = [e["content"]["body"] for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id and e["type"] == "m.room.message"]
    assert len(said) == 1 and "end-to-end encrypted" in said[0]


async def test_one_reader_per_account_and_a_standby_takes_over(harness: Harness) -> None:
    from progresscast.matrix.adapter import run_matrix
    from progresscast.store import keys

    room = await harness.room(["shop*"])
    harness.matrix = {"leaseSeconds": 1.0}
    settings = harness.settings()
    options = MatrixOptions(worker=WorkerOptions(group="matrix", consumer="test", settle=1.0), poll_ms=1000)
    lease = keys.mx_lease(harness.bot.user_id)
    first = asyncio.create_task(run_matrix(settings, harness.redis, options=options))
    await until(lambda: harness.redis.get(lease), "the first process to take the lease")
    second = asyncio.create_task(run_matrix(settings, harness.redis, options=options))
    try:
        await harness.invite(room)
        await harness.command(room, "!pc follow shop", "Following")
        await harness.put(("Pick the items", "in_progress"))
        draft = (await harness.shows(room, "Pick the items"))[0]
        await harness.command(room, "!pc help", "Here: following")
        said = [e["content"].get("body", "") for e in await harness.person.events(room) if e["sender"] == harness.bot.user_id]
        assert sum("Following" in b for b in said) == 1  # one reader: one reply each
        first.cancel()
        await asyncio.gather(first, return_exceptions=True)
        await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
        drafts = await harness.shows(room, "▶️ Pay")
        assert drafts[0]["event_id"] == draft["event_id"]  # the standby edits the same draft
        await harness.command(room, "!pc card", "again below")
    finally:
        for task in (first, second):
            task.cancel()
        await asyncio.gather(first, second, return_exceptions=True)


async def test_run_end_redacts_the_draft_and_sends_the_answer_once(harness: Harness) -> None:
    from progresscast.model.view import RunState

    room = await following(harness)
    await harness.store.start_run(SHOP, "r1")
    await harness.put(("Pick the items", "completed"), ("Pay", "in_progress"))
    await harness.store.update_activity(SHOP, answer="Paid with **card** — @room <script>x()</script>")
    draft = (await harness.shows(room, "Pay"))[0]
    await harness.put(("Pick the items", "completed"), ("Pay", "completed"))
    await harness.store.end_run(SHOP, "r1", RunState.completed)

    async def answered() -> list[dict[str, Any]]:
        shown = await harness.person.shown(room, harness.bot.user_id)
        return [e for e in shown if e["shown"]["msgtype"] == "m.text"]

    [answer] = await until(answered, "the final answer")
    content = answer["content"]
    assert content["m.mentions"] == {} and "<strong>card</strong>" in content["formatted_body"]
    assert "<script" not in content["formatted_body"]
    await until(lambda: _redacted(harness, room, draft["event_id"]), "the draft to be redacted at the run's end")
    await harness.command(room, "!pc help", "Here: following")  # later: still one answer
    assert len(await answered()) == 1


async def _redacted(harness: Harness, room: str, event_id: str) -> bool:
    events = await harness.person.events(room)
    return any(e["event_id"] == event_id and not e["content"] for e in events)
