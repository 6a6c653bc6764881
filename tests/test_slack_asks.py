"""Answering the agent from Slack: an ask's buttons (Block Kit), a press sent as a signed
`block_actions` interaction and answered ephemerally through its `response_url`, the
message edited to the outcome, typed answers in the ask's thread, Stop with its
confirmation — and the presses that must change nothing. Real slack_sdk against the
Slack emulator, a real Redis."""
# ruff: noqa: F811 — the fixtures are the adapter tests', imported; pytest passes them by name

from __future__ import annotations

import json
import time
from typing import Any

import httpx

from ask_cli import CLI_PROMPT, ask_and_press
from progresscast.model.asks import STOP_CONTROL, AskInput, AskState, option_control
from progresscast.model.owners import Owner
from progresscast.model.view import RunState
from progresscast.testing import SlackAPIEmulator, SlackMessage
from progresscast.testing.slack_blocks import buttons
from progresscast.testing.slackapi import Interaction
from test_slack_adapter import OTHER, OWNER, C, Harness, fast, harness, slack  # noqa: F401


def ask_message(slack: SlackAPIEmulator, channel: str, prompt: str) -> SlackMessage | None:
    """The ask's own message (the draft names the prompt too: `Waiting for you: …`)."""
    return next((m for m in slack.channel(channel).visible() if f"asks: {prompt}" in m.visible_text), None)


async def answered(slack: SlackAPIEmulator, pressed: Interaction) -> str | None:
    await slack.wait_for(lambda: pressed.answers, 5)
    assert pressed.status == 200 and pressed.answers[0]["response_type"] == "ephemeral"
    assert pressed.answers[0].get("replace_original") is False
    return pressed.answer


async def followed(harness: Any, channel: str = C, **config: Any) -> Harness:
    h: Harness = await harness(**config)
    h.slack.interactions_url = f"{h.url}/slack/interactions"
    h.slack.events_url = f"{h.url}/slack/events"
    await h.command("follow t1", channel=channel)
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    await h.shows("Build", channel=channel)
    return h


async def open_ask(h: Harness, **body: Any) -> str:
    made = await h.store.asks.open(OWNER, AskInput.parse({"kind": "approval", "prompt": "Run rm -rf build?", **body}))
    return made.ask_id


async def test_a_press_answers_the_ask_and_the_message_says_so(slack: SlackAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, prompt="Run rm -rf <!channel> build?")
    msg = await slack.wait_for(lambda: ask_message(slack, C, "Run rm -rf <!channel> build?"), 5)
    assert buttons(msg.blocks) == [("Allow", option_control(ask_id, 0)), ("Deny", option_control(ask_id, 1))]
    assert msg.shown().mentions == [] and read_mentions(msg) == []
    # The draft says at its top that the agent waits.
    await slack.wait_for(lambda: "❓ Waiting for you" in slack.channel(C).visible()[0].visible_text, 5)

    pressed = slack.press(C, msg.ts, "Allow", user="U0ANA", name="ana")
    assert await answered(slack, pressed) == "Answered: Allow"
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.answered and ask.answer is not None
    by = ask.answer.by
    assert (ask.answer.options, by.name, by.user, by.platform, by.destination) == (
        ("Allow",), "ana", "U0ANA", "slack", C)

    def edited() -> SlackMessage | None:
        m = slack.channel(C).messages[msg.ts]
        return m if "ana answered: Allow" in m.visible_text and not buttons(m.blocks) else None

    await slack.wait_for(edited, 5)
    await slack.wait_for(lambda: all("Waiting for you" not in m.visible_text for m in slack.channel(C).visible()), 5)


def read_mentions(msg: SlackMessage) -> list[str]:
    from progresscast.testing import read_mrkdwn

    return read_mrkdwn(msg.text).mentions


async def test_two_people_press_at_once_one_wins(slack: SlackAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    await open_ask(h)
    msg = await slack.wait_for(lambda: ask_message(slack, C, "Run rm -rf build?"), 5)
    first = slack.press(C, msg.ts, "Allow", user="U0ANA", name="ana")
    second = slack.press(C, msg.ts, "Deny", user="U0BEN", name="ben")
    texts = sorted([str(await answered(slack, first)), str(await answered(slack, second))])
    assert texts in (["Already answered by ana.", "Answered: Allow"], ["Already answered by ben.", "Answered: Deny"])


async def test_a_forged_press_from_another_channel_changes_nothing(slack: SlackAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    await h.command("follow t1", channel=OTHER)
    ask_id = await open_ask(h)
    mine = await slack.wait_for(lambda: ask_message(slack, C, "Run rm -rf build?"), 5)
    theirs = await slack.wait_for(lambda: ask_message(slack, OTHER, "Run rm -rf build?"), 5)
    # The other channel replays this channel's action id on its own draft (no ask), on
    # its ask message with an ask it never got, and this channel's ask message is not
    # theirs to press.
    draft = next(m for m in slack.channel(OTHER).visible() if "Build" in m.visible_text)
    for channel, ts, control in (
        (OTHER, draft.ts, option_control(ask_id, 0)),
        (OTHER, theirs.ts, option_control("x" * 22, 0)),
        (OTHER, theirs.ts, "garbage"),
    ):
        pressed = slack.press(channel, ts, control, forged=True)
        assert "does not belong" in str(await answered(slack, pressed))
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.open
    assert buttons(slack.channel(C).messages[mine.ts].blocks)


async def test_an_expired_ask_says_so_and_a_late_press_is_told(slack: SlackAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    await open_ask(h, timeoutSeconds=1)
    msg = await slack.wait_for(lambda: ask_message(slack, C, "Run rm -rf build?"), 5)
    [(_, control), _] = buttons(msg.blocks)

    def expired() -> SlackMessage | None:
        m = slack.channel(C).messages[msg.ts]
        return m if "no answer in time" in m.visible_text and not buttons(m.blocks) else None

    await slack.wait_for(expired, 8)
    pressed = slack.press(C, msg.ts, control, forged=True)  # a press sent before the edit arrived
    assert await answered(slack, pressed) == "This question expired."


async def test_a_typed_answer_is_a_reply_in_the_asks_thread(slack: SlackAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h, kind="text", prompt="Which branch?")
    msg = await slack.wait_for(lambda: ask_message(slack, C, "Which branch?"), 5)
    assert not buttons(msg.blocks) and "Reply in this message's thread" in msg.visible_text
    slack.post_as_user(C, "release-2.4 &amp; <b>", thread_ts=msg.ts, user="U0ANA", name="ana")
    # Told to the person alone, as a press's answer is (the thread shows their reply already).
    await slack.wait_for(lambda: any(t.startswith("Answered: release-2.4") for t in slack.ephemeral_to("U0ANA")), 5)
    assert not [m for m in slack.channel(C).visible(thread_ts=msg.ts) if "Answered:" in m.visible_text]
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.answer is not None and ask.answer.text == "release-2.4 & <b>"
    assert (ask.answer.by.user, ask.answer.by.name) == ("U0ANA", "ana")  # named as a press names them
    await slack.wait_for(lambda: "ana answered: release-2.4" in slack.channel(C).messages[msg.ts].visible_text, 5)
    # A reply in any other thread is just chat.
    person = slack.post_as_user(C, "nice")
    slack.post_as_user(C, "indeed", thread_ts=person.ts)
    await slack.wait_for(lambda: len(slack.events) >= 1 and all(s == 200 for _, s in slack.events), 5)
    assert not slack.channel(C).visible(thread_ts=person.ts)


async def test_stop_asks_to_confirm_then_stops_the_run(slack: SlackAPIEmulator, harness: Any) -> None:
    h: Harness = await harness()
    slack.interactions_url = f"{h.url}/slack/interactions"
    await h.command("follow t1")
    await h.store.start_run(OWNER, "run-1", stoppable=True)
    await h.put(("Build", "in_progress"), ("Test", "pending"))
    [draft] = await h.shows("Build")
    assert buttons(draft.blocks) == [("⏹ Stop", STOP_CONTROL)]

    first = slack.press(C, draft.ts, STOP_CONTROL, name="ana")
    assert "again within 10 s" in str(await answered(slack, first))
    assert (await h.store.view(OWNER)).stop is None
    second = slack.press(C, draft.ts, STOP_CONTROL, name="ana")
    assert await answered(slack, second) == "Stopping t1."
    view = await h.store.view(OWNER)
    assert view.stop is not None and view.stop.by.name == "ana"
    [draft] = await h.shows("Stopping — ana")
    assert not buttons(draft.blocks)  # the button is gone

    await h.store.end_run(OWNER, "run-1", RunState.canceled)
    await slack.wait_for(lambda: any("stopped by ana" in m.visible_text for m in slack.channel(C).visible()), 5)


async def test_the_cli_waits_for_the_press(slack: SlackAPIEmulator, harness: Any, redis_url: str) -> None:
    h = await followed(harness)

    async def press() -> None:
        msg = await slack.wait_for(lambda: ask_message(slack, C, CLI_PROMPT), 10)
        await answered(slack, slack.press(C, msg.ts, "Later"))

    assert await ask_and_press(redis_url, press) == "Later\n"
    assert (await h.store.history(Owner("main", "t1")))[0].event["kind"] == "answer"  # type: ignore[index]


async def test_interactions_are_signed_and_checked(slack: SlackAPIEmulator, harness: Any) -> None:
    h = await followed(harness)
    ask_id = await open_ask(h)
    msg = await slack.wait_for(lambda: ask_message(slack, C, "Run rm -rf build?"), 5)
    url = f"{h.url}/slack/interactions"
    payload = {
        "type": "block_actions", "user": {"id": "U0EVE", "name": "eve"}, "channel": {"id": C},
        "container": {"message_ts": msg.ts}, "actions": [{"action_id": option_control(ask_id, 0)}],
    }
    forged = await slack.send_interaction(url, payload, secret="not-the-secret")
    stale = await slack.send_interaction(url, payload, timestamp=int(time.time()) - 600)
    assert (forged.status_code, stale.status_code) == (401, 401)
    bad = await slack.send_interaction(url, "{not json")
    assert bad.status_code == 400 and "payload must be JSON" in bad.json()["error"]
    no_user = await slack.send_interaction(url, {**payload, "user": {}})
    assert no_user.status_code == 400 and no_user.json()["error"] == "payload.user.id is required (a string)"
    other = await slack.send_interaction(url, {"type": "view_submission"})
    assert other.status_code == 200
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.state is AskState.open


async def test_the_emulator_refuses_buttons_slack_refuses(slack: SlackAPIEmulator) -> None:
    def button(text: str, action_id: str) -> dict[str, Any]:
        return {"type": "button", "text": {"type": "plain_text", "text": text}, "action_id": action_id}

    cases = [
        [button(str(i), f"a{i}") for i in range(26)],
        [button("x" * 76, "a")],
        [button("a", "same"), button("b", "same")],
    ]
    async with httpx.AsyncClient() as client:
        for elements in cases:
            reply = await client.post(f"{slack.base_url}chat.postMessage", headers={
                "Authorization": f"Bearer {slack.token}"}, json={
                "channel": C, "text": "x", "blocks": [{"type": "actions", "elements": elements}],
            })
            assert reply.json()["error"] == "invalid_blocks", json.dumps(elements)[:80]


async def test_in_a_follows_own_thread_a_reply_there_answers_its_one_open_question(
    slack: SlackAPIEmulator, harness: Any
) -> None:
    h: Harness = await harness(richMessages=True, notify=[])
    slack.events_url = f"{h.url}/slack/events"
    await h.store.start_run(OWNER, "r1")
    await h.put(("Fix", "in_progress"))
    await h.command("follow t1")
    [anchor, _] = await h.shows("[in_progress] Fix", count=2)
    ask_id = await open_ask(h, kind="text", prompt="Which branch?")
    msg = await slack.wait_for(lambda: ask_message(slack, C, "Which branch?"), 5)
    assert msg.thread_ts == anchor.ts and msg.reply_broadcast  # a reply in the follow's thread, shown in the channel
    # Without the `users:read` scope Slack will not name the person: their id is shown,
    # and where Slack will not whisper, the answer is told in the thread.
    slack.fail_next("users.info", "missing_scope")
    slack.fail_next("chat.postEphemeral", "channel_not_found")
    slack.post_as_user(C, "main", thread_ts=anchor.ts, user="U0ANA")
    await slack.wait_for(lambda: "U0ANA answered: main" in slack.channel(C).messages[msg.ts].visible_text, 5)
    await slack.wait_for(
        lambda: any("Answered: main" in m.visible_text for m in slack.channel(C).visible(thread_ts=anchor.ts)), 5
    )
    ask, _ = await h.store.asks.get(OWNER, ask_id)
    assert ask is not None and ask.answer is not None and ask.answer.text == "main"
