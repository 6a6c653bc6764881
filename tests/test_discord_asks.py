"""Answering the agent from Discord: an ask's buttons, a press (a signed component
interaction, answered at once with an ephemeral message), the message edited to the
outcome, a typed answer through a modal, Stop with its confirmation — and the presses
that must change nothing. The adapter's httpx client against the Discord emulator, its
interactions route served on a real port, a real Redis."""
# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from ask_cli import CLI_PROMPT, ask_and_press
from progresscast.model.asks import STOP_CONTROL, AskInput, AskState, option_control
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.testing import DiscordAPIEmulator, DiscordMessage, read_markdown
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

    assert said(await discord.press(C, msg.id, "Allow", name="Ana")) == "Answered: Allow"
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.answered and ask.answer is not None
    assert ask.answer.options == ("Allow",) and ask.answer.by.name == "Ana" and ask.answer.by.platform == "discord"
    assert ask.answer.by.destination == C

    def edited() -> bool:
        m = discord.channel(C).messages[msg.id]
        return "Ana answered: Allow" in m.read().text and not m.buttons()

    await discord.wait_for(edited, 5)
    await discord.wait_for(lambda: "Waiting for you" not in draft(discord).read().text, 5)


async def test_two_people_press_at_once_one_wins(discord: DiscordAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    await open_ask(h)
    msg = await discord.wait_for(lambda: ask_message(discord, C), 5)
    first, second = await asyncio.gather(
        discord.press(C, msg.id, "Allow", nick="Ana (ops)"),
        discord.press(C, msg.id, "Deny", user_id="400000000000000002", name="Ben"),
    )
    texts = sorted([said(first), said(second)])
    assert texts in (["Already answered by Ana (ops).", "Answered: Allow"], ["Already answered by Ben.", "Answered: Deny"])


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
    assert said(reply) == "Answered: Deny"


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
    assert said(await discord.submit_modal(C, "release-2.4 @everyone", name="Ana")) == (
        "Answered: release-2.4 @everyone"
    )
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.answer is not None and ask.answer.text == "release-2.4 @everyone"
    assert ask.answer.by.name == "Ana"
    await discord.wait_for(lambda: "Ana answered: release-2.4" in discord.channel(C).messages[msg.id].read().text, 5)
    assert not discord.channel(C).messages[msg.id].buttons()
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

    assert "again within 10 s" in said(await discord.press(C, shown.id, STOP_CONTROL, name="Ana"))
    assert (await h.store.view(OWNER)).stop is None
    assert said(await discord.press(C, shown.id, STOP_CONTROL, name="Ana")) == "Stopping t1."
    view = await h.store.view(OWNER)
    assert view.stop is not None and view.stop.by.name == "Ana"
    [stopping] = await h.shows("Stopping — Ana")
    assert not stopping.buttons()  # the button is gone

    await h.store.end_run(OWNER, "run-1", RunState.canceled)
    await discord.wait_for(lambda: any("stopped by Ana" in t for t in discord.channel(C).texts()), 5)


async def test_a_plain_draft_has_the_stop_button_too(discord: DiscordAPIEmulator, harness: Any) -> None:
    h: Harness = await harness(richMessages=False)
    await h.command("follow t1")
    await h.store.start_run(OWNER, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"))
    [shown] = await h.shows("Build")
    assert labels(shown) == ["⏹ Stop"] and not shown.components_v2
    for _ in range(2):
        await discord.press(C, shown.id, STOP_CONTROL, name="Ana")
    [stopping] = await h.shows("Stopping — Ana")
    assert stopping.id == shown.id and not stopping.buttons()  # an edit that takes the button away


async def test_the_cli_waits_for_the_press(discord: DiscordAPIEmulator, harness: Any, redis_url: str) -> None:
    h = await followed(harness)

    async def press() -> None:
        msg = await discord.wait_for(lambda: ask_message(discord, C, CLI_PROMPT), 10)
        assert said(await discord.press(C, msg.id, "Later")) == "Answered: Later"

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
