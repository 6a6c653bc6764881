"""The Slack Web API emulator, driven by the real slack_sdk AsyncWebClient over HTTP."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import parse_qsl

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.web.async_client import AsyncWebClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from progresscast.render import render_slack
from progresscast.testing import SlackAPIEmulator
from progresscast.testing._pacing import Pace
from progresscast.testing.slackapi import DEFAULT_SIGNING_SECRET, PERSON_ID
from test_render_slack import SLACK_CASES

C = "C0TEST0001"


@pytest.fixture
async def slack() -> AsyncIterator[SlackAPIEmulator]:
    async with SlackAPIEmulator(channels=[C, "C0TEST0002"], channel_pace=None, tiers={}) as emulator:
        yield emulator


def client(slack: SlackAPIEmulator, token: str | None = None) -> AsyncWebClient:
    # No retry handlers: every answer must reach the test as Slack gave it.
    return AsyncWebClient(token=token or slack.token, base_url=slack.base_url, retry_handlers=[])


async def error_of(call: Any) -> tuple[int, str, dict[str, Any]]:
    with pytest.raises(SlackApiError) as info:
        await call
    response = info.value.response
    headers = {k.lower(): v for k, v in dict(response.headers).items()}
    return response.status_code, response["error"], headers


async def test_post_update_delete_and_what_the_channel_shows(slack: SlackAPIEmulator) -> None:
    web = client(slack)
    auth = await web.auth_test()
    assert auth["ok"] and auth["team_id"] == slack.team_id and auth["user_id"] == slack.bot_user_id
    posted = await web.chat_postMessage(channel=C, text="*Hi* &lt;!channel&gt; <https://e.com|site>")
    ts = posted["ts"]
    assert posted["channel"] == C and posted["message"]["text"].startswith("*Hi*")
    shown = slack.channel(C).messages[ts].shown()
    assert shown.text == "Hi <!channel> site" and shown.mentions == [] and shown.links == [("https://e.com", "site")]
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": "<!here> edited"}}]
    updated = await web.chat_update(channel=C, ts=ts, text="fallback", blocks=blocks)
    assert updated["ts"] == ts
    message = slack.channel(C).messages[ts]
    assert message.visible_text == "@here edited" and message.shown().mentions == ["@here"] and message.edits == 1
    await web.chat_update(channel=C, ts=ts, text="only text")  # omitted blocks are kept
    assert slack.channel(C).messages[ts].visible_text == "@here edited"
    await web.chat_update(channel=C, ts=ts, text="plain now", blocks=[])  # [] removes them
    assert slack.channel(C).texts() == ["plain now"]
    reply = await web.chat_postMessage(channel=C, text="in thread", thread_ts=ts)
    history = await web.conversations_history(channel=C, limit=10)
    assert [m["ts"] for m in history["messages"]] == [ts]  # replies are not in the history
    replies = await web.conversations_replies(channel=C, ts=ts)
    assert [m["ts"] for m in replies["messages"]] == [ts, reply["ts"]]
    assert slack.channel(C).texts(thread_ts=ts) == ["in thread"]
    deleted = await web.chat_delete(channel=C, ts=ts)
    assert deleted["ok"] and ts in slack.channel(C).deleted and ts not in slack.channel(C).messages


@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing")  # the no_text case, on purpose
async def test_slack_error_strings(slack: SlackAPIEmulator) -> None:
    web = client(slack)
    assert (await error_of(client(slack, "xoxb-wrong").auth_test()))[:2] == (200, "invalid_auth")
    assert (await error_of(web.chat_postMessage(channel="C0NOPE0001", text="x")))[1] == "channel_not_found"
    assert (await error_of(web.chat_postMessage(channel=C, text="")))[1] == "no_text"
    assert (await error_of(web.chat_postMessage(channel=C, text="x" * 40_001)))[1] == "msg_too_long"
    assert (await error_of(web.chat_update(channel=C, ts="1.000001", text="x")))[1] == "message_not_found"
    too_long = [{"type": "section", "text": {"type": "mrkdwn", "text": "x" * 3001}}]
    assert (await error_of(web.chat_postMessage(channel=C, text="t", blocks=too_long)))[1] == "invalid_blocks"
    many = [{"type": "divider"}] * 51
    assert (await error_of(web.chat_postMessage(channel=C, text="t", blocks=many)))[1] == "invalid_blocks"
    person = slack.post_as_user(C, "a person's message")
    assert (await error_of(web.chat_update(channel=C, ts=person.ts, text="x")))[1] == "cant_update_message"
    assert (await error_of(web.chat_delete(channel=C, ts=person.ts)))[1] == "cant_delete_message"
    mine = await web.chat_postMessage(channel=C, text="mine")
    slack.make_uneditable(C, mine["ts"])
    assert (await error_of(web.chat_update(channel=C, ts=mine["ts"], text="x")))[1] == "cant_update_message"
    slack.delete_by_user(C, mine["ts"])
    assert (await error_of(web.chat_delete(channel=C, ts=mine["ts"])))[1] == "message_not_found"
    assert slack.channel(C).texts() == []  # nothing refused was applied


async def test_channel_pace_and_method_tiers_answer_429_with_retry_after() -> None:
    async with SlackAPIEmulator(
        channels=[C, "C0TEST0002"], channel_pace=Pace(2, 1.0), tiers={3: Pace(2, 0.5)}
    ) as slack:
        web = client(slack)
        first = await web.chat_postMessage(channel=C, text="1")
        await web.chat_postMessage(channel=C, text="2")
        status, error, headers = await error_of(web.chat_postMessage(channel=C, text="3"))
        assert (status, error, headers.get("retry-after")) == (429, "ratelimited", "1")
        await web.chat_postMessage(channel="C0TEST0002", text="another channel has its own pace")
        await web.chat_update(channel=C, ts=first["ts"], text="a")
        await web.chat_update(channel=C, ts=first["ts"], text="b")
        status, error, headers = await error_of(web.chat_update(channel=C, ts=first["ts"], text="c"))
        assert (status, error, headers.get("retry-after")) == (429, "ratelimited", "2")
        assert slack.channel(C).texts() == ["b", "2"]  # refused calls changed nothing
        await slack.wait_for(lambda: time.monotonic() - slack.calls[-1].at > 1.0, timeout=3)
        await web.chat_postMessage(channel=C, text="after the wait")


async def test_time_scale_speeds_the_pace_up() -> None:
    async with SlackAPIEmulator(channels=[C], channel_pace=Pace(1, 1.0), time_scale=0.05) as slack:
        web = client(slack)
        await web.chat_postMessage(channel=C, text="1")
        status, _, headers = await error_of(web.chat_postMessage(channel=C, text="2"))
        assert status == 429 and headers.get("retry-after") == "1"  # said in emulated seconds
        await slack.wait_for(lambda: time.monotonic() - slack.calls[-1].at > 0.06, timeout=2)
        await web.chat_postMessage(channel=C, text="3")  # 1/20 of a second later


async def test_faults_and_timeouts(slack: SlackAPIEmulator) -> None:
    web = client(slack)
    slack.fail_next("chat.postMessage", "ratelimited", retry_after=7)
    status, error, headers = await error_of(web.chat_postMessage(channel=C, text="x"))
    assert (status, error, headers.get("retry-after")) == (429, "ratelimited", "7")
    slack.fail_next("chat.update", "internal_error", status=500, channel=C)
    posted = await web.chat_postMessage(channel=C, text="x")
    assert (await error_of(web.chat_update(channel=C, ts=posted["ts"], text="y")))[:2] == (500, "internal_error")
    assert slack.calls[-1].injected and slack.channel(C).texts() == ["x"]
    with pytest.raises(ValueError):
        slack.fail_next("chat.postMesage")
    slack.timeout_next("chat.postMessage", delay=1.5)
    short = AsyncWebClient(token=slack.token, base_url=slack.base_url, timeout=0.5, retry_handlers=[])
    with pytest.raises(TimeoutError):
        await short.chat_postMessage(channel=C, text="landed anyway")
    assert slack.channel(C).texts() == ["x", "landed anyway"]  # the post took effect: an unsure outcome


async def test_streams_show_a_plan(slack: SlackAPIEmulator) -> None:
    web = client(slack)
    parent = slack.post_as_user(C, "follow please")
    chunks = [
        {"type": "plan_update", "title": "ticket-4821 · 1/2 complete"},
        {"type": "task_update", "id": "step-1", "title": "Reproduce", "status": "complete"},
        {"type": "task_update", "id": "step-2", "title": "Fix", "status": "in_progress"},
    ]
    assert (await error_of(web.chat_startStream(channel=C, thread_ts=parent.ts, chunks=chunks)))[
        1
    ] == "invalid_arguments"
    started = await web.chat_startStream(
        channel=C,
        thread_ts=parent.ts,
        recipient_user_id=PERSON_ID,
        recipient_team_id=slack.team_id,
        task_display_mode="plan",
        chunks=chunks,
    )
    ts = started["ts"]
    await web.chat_appendStream(
        channel=C, ts=ts, chunks=[{"type": "task_update", "id": "step-2", "title": "Fix", "status": "complete"}]
    )
    message = slack.channel(C).messages[ts]
    assert message.streaming and message.thread_ts == parent.ts
    assert message.visible_text == "ticket-4821 · 1/2 complete\n[complete] Reproduce\n[complete] Fix"
    assert (await error_of(web.chat_update(channel=C, ts=ts, text="x")))[1] == "cant_update_message"
    bad = [{"type": "task_update", "id": "x", "title": "t", "status": "blocked"}]
    assert (await error_of(web.chat_appendStream(channel=C, ts=ts, chunks=bad)))[1] == "invalid_chunks"
    await web.chat_stopStream(channel=C, ts=ts)
    assert not slack.channel(C).messages[ts].streaming
    assert (await error_of(web.chat_appendStream(channel=C, ts=ts, markdown_text="more")))[
        1
    ] == "message_not_in_streaming_state"
    no_streams = SlackAPIEmulator(channels=[C], streaming=False)
    async with no_streams:
        parent = no_streams.post_as_user(C, "hi")
        _, error, _ = await error_of(client(no_streams).chat_startStream(channel=C, thread_ts=parent.ts))
        assert error == "unknown_method"


@pytest.mark.parametrize("name", sorted(SLACK_CASES))
async def test_every_rendered_draft_is_accepted(slack: SlackAPIEmulator, name: str) -> None:
    case = SLACK_CASES[name]
    payload = render_slack(case.view, case.settings)
    if payload is None:
        return
    web = client(slack)
    posted = await web.chat_postMessage(channel=C, **payload["params"])
    shown = slack.channel(C).messages[posted["ts"]].shown()
    assert shown.mentions == []
    fallback = await web.chat_postMessage(channel=C, **payload["fallback"]["params"])
    assert slack.channel(C).messages[fallback["ts"]].shown().mentions == []
    plan = render_slack(case.view, case.settings.model_copy(update={"rich": True}))
    if plan is not None and plan["method"] in ("chat.startStream", "chat.stopStream"):
        parent = slack.post_as_user(C, "follow")
        await web.chat_startStream(
            channel=C,
            thread_ts=parent.ts,
            recipient_user_id=PERSON_ID,
            recipient_team_id=slack.team_id,
            **plan["params"],
        )


async def test_slash_commands_are_signed_like_slack(slack: SlackAPIEmulator) -> None:
    verifier = SignatureVerifier(DEFAULT_SIGNING_SECRET)
    seen: list[dict[str, str]] = []

    async def commands(request: Request) -> JSONResponse:
        body = await request.body()
        if not verifier.is_valid_request(body, dict(request.headers)):
            return JSONResponse({"error": "bad signature"}, status_code=401)
        seen.append(dict(parse_qsl(body.decode())))
        return JSONResponse({"response_type": "ephemeral", "text": "ok"})

    app_server = SlackAPIEmulator(channels=[])  # reuse its uvicorn plumbing to serve the app
    app_server.app = Starlette(routes=[Route("/slack/commands", commands, methods=["POST"])])
    async with app_server:
        url = f"{app_server.url}/slack/commands"
        ok = await slack.send_slash_command(url, "follow ticket-4821", channel_id=C)
        assert ok.status_code == 200 and ok.json()["text"] == "ok"
        assert seen[0]["command"] == "/progresscast" and seen[0]["text"] == "follow ticket-4821"
        assert seen[0]["channel_id"] == C and seen[0]["team_id"] == slack.team_id
        wrong = await slack.send_slash_command(url, "follow x", secret="not-the-secret")
        stale = await slack.send_slash_command(url, "follow x", timestamp=int(time.time()) - 301)
        assert (wrong.status_code, stale.status_code) == (401, 401) and len(seen) == 1
        event = await slack.send_event(url, {"type": "url_verification", "challenge": "c"})
        assert event.status_code == 200  # events are signed the same way
        forged = await slack.send_event(url, {"type": "url_verification", "challenge": "c"}, secret="x")
        assert forged.status_code == 401
