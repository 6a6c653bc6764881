"""Answering the agent from Discord: an ask's buttons, a press (a signed component
interaction) that wins answered with the message's new look (`UPDATE_MESSAGE`, type 7)
— the same the lane's later edit sends —, one that loses with an ephemeral message, a
typed answer through a modal, Stop with its confirmation — and the presses that must
change nothing. The adapter's httpx client against the Discord emulator, its
interactions route served on a real port, a real Redis."""
# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name

from __future__ import annotations

import asyncio
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ask_cli import CLI_PROMPT, ask_and_press
from progresscast.model.asks import STOP_CONTROL, AskInput, AskState, option_control
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.testing import DiscordAPIEmulator, DiscordMessage, read_markdown
from progresscast.testing._loopback import LoopbackServer
from test_discord_adapter import OTHER, OWNER, C, Harness, discord, fast, harness  # noqa: F401

PROMPT = "Run rm -rf build?"
BYSTANDER = "400000000000031337"
SUPPRESS_NOTIFICATIONS = 1 << 12


def ask_message(discord: DiscordAPIEmulator, channel: str, prompt: str = PROMPT) -> DiscordMessage | None:
    """The ask's own message (the draft names the prompt too: `Waiting for you: …`)."""
    return next((m for m in discord.channel(channel).visible() if f"asks: {prompt}" in m.read().text), None)


def labels(message: DiscordMessage) -> list[str]:
    return [str(b.get("label")) for b in message.buttons()]


def said(response: httpx.Response) -> str:
    """What the presser alone is shown: an ephemeral message that pings nobody."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["type"] == 4 and body["data"]["flags"] == 64, body
    assert body["data"]["allowed_mentions"] == {"parse": []}
    return read_markdown(body["data"]["content"]).text


def updated(discord: DiscordAPIEmulator, response: httpx.Response, message_id: str, channel: str = C) -> DiscordMessage:
    """The pressed message, updated by the press's answer: type 7, applied by Discord at
    once (before any edit of the lane's), pinging nobody."""
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["type"] == 7, body
    assert body["data"]["allowed_mentions"] == {"parse": []}
    assert not discord.refused  # Discord took every update
    return discord.channel(channel).messages[message_id]


def draft(discord: DiscordAPIEmulator, channel: str = C) -> DiscordMessage:
    return next(m for m in discord.channel(channel).visible() if "asks:" not in m.read().text)


async def followed(harness: Any, **config: Any) -> Harness:
    h: Harness = await harness(**config)
    assert (await h.command("follow t1")).startswith("Following agent:main:t1")
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    await h.shows("Build")
    return h


async def open_ask(h: Harness, **body: Any) -> str:
    made = await h.store.asks.open(OWNER, AskInput.parse({"kind": "approval", "prompt": PROMPT, **body}))
    return made.ask_id


async def test_a_press_answers_the_ask_and_the_message_says_so(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h)
    msg = await discord.wait_for(lambda: ask_message(discord, C), 5)
    assert labels(msg) == ["Allow", "Deny"]
    assert all(len(str(b["custom_id"])) <= 100 for b in msg.buttons())
    assert msg.reply_to == draft(discord).id  # a reply to the live draft ...
    [create] = [c for c in discord.calls_for(C, "create_message") if "asks:" in str(c.body)]
    assert not create.body["flags"] & SUPPRESS_NOTIFICATIONS  # ... that notifies
    assert create.body["allowed_mentions"] == {"parse": []}
    await discord.wait_for(lambda: "Waiting for you: Run rm -rf build?" in draft(discord).read().text, 5)

    shown = updated(discord, await discord.press(C, msg.id, "Allow", name="Ana"), msg.id)
    # The message says the outcome and has no buttons as soon as Discord has the answer.
    assert "✅" in shown.read().text and "Ana answered: Allow" in shown.read().text and not shown.buttons()
    update = (shown.content, shown.components)
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.answered and ask.answer is not None
    assert ask.answer.options == ("Allow",) and ask.answer.by.name == "Ana" and ask.answer.by.platform == "discord"
    assert ask.answer.by.destination == C

    # The lane's edit of the message follows, and changes nothing the person sees.
    def lane_edited() -> bool:
        return any("answered: Allow" in str(c.body.get("content")) for c in discord.calls_for(C, "edit_message"))

    await discord.wait_for(lane_edited, 5)
    after = discord.channel(C).messages[msg.id]
    assert (after.content, after.components) == update
    # A late press (a button still on someone's screen) is told who answered; nothing changes.
    late = await discord.press(C, msg.id, option_control(ask_id, 1), user_id=BYSTANDER, name="Ben", forged=True)
    assert said(late) == "Already answered by Ana."
    assert (after.content, after.components) == update
    await discord.wait_for(lambda: "Waiting for you" not in draft(discord).read().text, 5)


async def test_two_people_press_at_once_one_wins(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    await open_ask(h)
    msg = await discord.wait_for(lambda: ask_message(discord, C), 5)
    first, second = await asyncio.gather(
        discord.press(C, msg.id, "Allow", nick="Ana (ops)"),
        discord.press(C, msg.id, "Deny", user_id="400000000000000002", name="Ben"),
    )
    # One wins and sees the message updated; the other is told, alone, who answered.
    won, lost = (first, second) if first.json()["type"] == 7 else (second, first)
    shown = updated(discord, won, msg.id)
    if "Ana (ops) answered: Allow" in shown.read().text:
        assert said(lost) == "Already answered by Ana (ops)."
    else:
        assert "Ben answered: Deny" in shown.read().text and said(lost) == "Already answered by Ben."
    assert not shown.buttons()


async def test_a_member_without_manage_channels_changes_nothing(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, allowText=True)
    msg = await discord.wait_for(lambda: ask_message(discord, C), 5)
    reply = said(await discord.press(C, msg.id, "Allow", user_id=BYSTANDER, name="Mallory", manage_channels=False))
    assert "administrators" in reply and "channel" in reply
    # Nor may they open the answer form.
    typed = said(await discord.press(C, msg.id, "Type an answer…", user_id=BYSTANDER, manage_channels=False))
    assert "administrators" in typed
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.open
    assert labels(discord.channel(C).messages[msg.id]) == ["Allow", "Deny", "Type an answer…"]


async def test_a_listed_answerer_may_answer(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness, channels=[{"id": C, "sessions": ["*"], "answerers": [BYSTANDER]}])
    await open_ask(h)
    msg = await discord.wait_for(lambda: ask_message(discord, C), 5)
    reply = await discord.press(C, msg.id, "Deny", user_id=BYSTANDER, name="Mallory", manage_channels=False)
    assert "Mallory answered: Deny" in updated(discord, reply, msg.id).read().text


async def test_a_forged_press_from_another_channel_changes_nothing(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    assert (await h.command("follow t1", channel=OTHER)).startswith("Following agent:main:t1")
    ask_id = await open_ask(h)
    mine = await discord.wait_for(lambda: ask_message(discord, C), 5)
    theirs = await discord.wait_for(lambda: ask_message(discord, OTHER), 5)
    other_draft = await discord.wait_for(lambda: draft(discord, OTHER), 5)
    control = option_control(ask_id, 0)
    # This channel's button data replayed in the other channel: on its draft, and naming
    # this channel's ask message; and a control naming an ask the other channel never got.
    for target, data in ((other_draft.id, control), (mine.id, control), (theirs.id, option_control("x" * 22, 0))):
        assert "does not belong" in said(await discord.press(OTHER, target, data, forged=True))
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.open
    assert labels(discord.channel(C).messages[mine.id]) == ["Allow", "Deny"]
    assert "does not belong" in said(await discord.press(C, draft(discord).id, "garbage", forged=True))


async def test_an_expired_ask_says_so_and_a_late_press_is_told(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, timeoutSeconds=1)
    msg = await discord.wait_for(lambda: ask_message(discord, C), 5)

    def expired() -> bool:
        m = discord.channel(C).messages[msg.id]
        return "no answer in time" in m.read().text and not m.buttons()

    await discord.wait_for(expired, 8)
    # A press sent before the edit arrived.
    assert said(await discord.press(C, msg.id, option_control(ask_id, 0), forged=True)) == "This question expired."


async def test_a_typed_answer_through_the_modal(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, kind="text", prompt="Which branch?")
    msg = await discord.wait_for(lambda: ask_message(discord, C, "Which branch?"), 5)
    assert labels(msg) == ["Type an answer…"]
    assert "Reply to this message" not in msg.read().text  # the bot reads no messages on Discord
    opened = await discord.press(C, msg.id, "Type an answer…", name="Ana")
    body = opened.json()
    assert body["type"] == 9 and body["data"]["custom_id"] == f"pc:m:{msg.id}", body
    assert len(body["data"]["title"]) <= 45
    # The submit of a modal opened from the ask's button updates the ask message.
    submitted = await discord.submit_modal(C, "release-2.4 @everyone", name="Ana")
    shown = updated(discord, submitted, msg.id)
    assert "Ana answered: release-2.4 @everyone" in shown.read().text and not shown.buttons()
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.answer is not None and ask.answer.text == "release-2.4 @everyone"
    assert ask.answer.by.name == "Ana"
    # A submit naming a message that is no ask of this channel's changes nothing.
    forged = await discord.submit_modal(C, "main", custom_id=f"pc:m:{draft(discord).id}")
    assert "does not belong" in said(forged)


async def test_stop_asks_to_confirm_then_stops_the_run(discord: DiscordAPIEmulator, harness: Any) -> None:
    h: Harness = await harness()
    await h.command("follow t1")
    await h.store.start_run(OWNER, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    [shown] = await h.shows("Build")
    assert labels(shown) == ["⏹ Stop"] and shown.components_v2

    # A bystander's press changes nothing, and they are told why.
    assert "administrators" in said(
        await discord.press(C, shown.id, STOP_CONTROL, user_id=BYSTANDER, manage_channels=False)
    )
    assert labels(discord.channel(C).messages[shown.id]) == ["⏹ Stop"]
    # The first press turns the button into its confirmation, in the press's answer
    # (the second must come within the window: 10 s on the tests' time scale).
    armed = updated(discord, await discord.press(C, shown.id, STOP_CONTROL, name="Ana"), shown.id)
    assert labels(armed) == ["Press again to stop"] and armed.components_v2 and "Build" in armed.read().text
    stopping = updated(discord, await discord.press(C, shown.id, STOP_CONTROL, name="Ana"), shown.id)
    assert "Stopping — Ana" in stopping.read().text and not stopping.buttons()  # the button is gone at once
    view = await h.store.view(OWNER)
    assert view.stop is not None and view.stop.by.name == "Ana"
    await h.shows("Stopping — Ana")

    await h.store.end_run(OWNER, "run-1", RunState.canceled)
    await discord.wait_for(lambda: any("stopped by Ana" in t for t in discord.channel(C).texts()), 5)


async def test_a_plain_draft_has_the_stop_button_too(discord: DiscordAPIEmulator, harness: Any) -> None:
    h: Harness = await harness(richMessages=False)
    await h.command("follow t1")
    await h.store.start_run(OWNER, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"))
    [shown] = await h.shows("Build")
    assert labels(shown) == ["⏹ Stop"] and not shown.components_v2
    # The update is the plain message (a plain message cannot take Components V2).
    armed = updated(discord, await discord.press(C, shown.id, STOP_CONTROL, name="Ana"), shown.id)
    assert labels(armed) == ["Press again to stop"] and not armed.components_v2
    await discord.press(C, shown.id, STOP_CONTROL, name="Ana")
    [stopping] = await h.shows("Stopping — Ana")
    assert stopping.id == shown.id and not stopping.buttons()  # an edit that takes the button away


async def test_the_cli_waits_for_the_press(discord: DiscordAPIEmulator, harness: Any, redis_url: str) -> None:
    h = await followed(harness)

    async def press() -> None:
        msg = await discord.wait_for(lambda: ask_message(discord, C, CLI_PROMPT), 10)
        assert "answered: Later" in updated(discord, await discord.press(C, msg.id, "Later"), msg.id).read().text

    assert await ask_and_press(redis_url, press) == "Later\n"
    assert (await h.store.history(Owner("main", "t1")))[0].event["kind"] == "answer"  # type: ignore[index]


async def test_the_emulator_checks_buttons_as_discord_does() -> None:
    def button(custom_id: str, label: str = "a") -> dict[str, Any]:
        return {"type": 2, "style": 1, "label": label, "custom_id": custom_id}

    def row(*buttons: dict[str, Any]) -> dict[str, Any]:
        return {"type": 1, "components": list(buttons)}

    refused = {
        "custom_id": [row(button("x" * 101))],
        "label": [row(button("a", "y" * 81))],
        "rows": [row(button(f"b{i}")) for i in range(6)],
        "buttons": [row(*(button(f"c{i}") for i in range(6)))],
        "duplicated": [row(button("d"), button("d"))],
    }
    async with (
        DiscordAPIEmulator(channels=[C], message_limit=None) as discord,
        httpx.AsyncClient(headers={"Authorization": f"Bot {discord.token}"}) as http,
    ):
        url = f"{discord.base_url}/channels/{C}/messages"
        for name, components in refused.items():
            reply = await http.post(url, json={"content": "x", "components": components})
            assert reply.status_code == 400 and reply.json()["code"] == 50035, name
        ok = await http.post(url, json={"content": "x", "components": [row(button("x" * 100, "y" * 80))]})
        assert ok.status_code == 200, ok.text
        container = {"type": 17, "components": [{"type": 10, "content": "x"}, row(button("z"))]}
        v2 = await http.post(url, json={"flags": 1 << 15, "components": [container, row(button("z"))]})
        assert v2.status_code == 400 and "COMPONENT_CUSTOM_ID_DUPLICATED" in v2.text


async def test_the_emulator_updates_a_pressed_message_as_discord_does() -> None:
    """Type 7 applied to the message a button was on, as an edit is checked; refused (the
    message unchanged, Discord's 50035 kept) for an interaction with no message and for
    data an edit could not carry."""
    answers: list[dict[str, Any]] = []

    async def interactions(request: Request) -> JSONResponse:
        return JSONResponse(answers.pop(0))

    app = Starlette(routes=[Route("/interactions", interactions, methods=["POST"])])
    row = {"type": 1, "components": [{"type": 2, "style": 1, "label": "Go", "custom_id": "go"}]}
    async with (
        DiscordAPIEmulator(channels=[C], message_limit=None) as discord,
        LoopbackServer(app) as server,
        httpx.AsyncClient(headers={"Authorization": f"Bot {discord.token}"}) as http,
    ):
        url = f"{server.url}/interactions"
        made = await http.post(f"{discord.base_url}/channels/{C}/messages", json={"content": "ask", "components": [row]})
        message_id = made.json()["id"]
        shown = discord.channel(C).messages[message_id]

        answers.append({"type": 7, "data": {"content": "done", "components": []}})
        await discord.press(C, message_id, "Go", url=url)
        assert (shown.content, shown.components, discord.refused) == ("done", [], [])
        assert shown.edited_at is not None

        refusals = [
            # Content past 2,000 characters: refused as an edit would be.
            ({"type": 7, "data": {"content": "x" * 2001}}, lambda: discord.press(C, message_id, "go", forged=True, url=url)),
            # A command has no message to update.
            ({"type": 7, "data": {"content": "no"}}, lambda: discord.send_interaction(
                {"id": "1", "type": 2, "channel_id": C, "data": {"name": "progresscast"}}, url)),
            # Nor has a modal submit that no button opened.
            ({"type": 7, "data": {"content": "no"}}, lambda: discord.submit_modal(C, "hi", custom_id="m", url=url)),
        ]
        for answer, send in refusals:
            answers.append(answer)
            assert (await send()).status_code == 200
        fields = [next(iter(error["errors"])) for _, error in discord.refused]
        assert fields == ["content", "type", "type"]
        assert all(error["code"] == 50035 and error["message"] == "Invalid Form Body" for _, error in discord.refused)
        assert (shown.content, shown.components) == ("done", [])
