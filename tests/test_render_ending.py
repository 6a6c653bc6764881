"""render/ending.py and its use: the line that says how a run ended (the head of the
answer, of an ended preview, or a message of its own) and the ping text — per channel,
pure."""

from __future__ import annotations

from dataclasses import replace

import pytest

from progresscast.config.base import Mode, RenderSettings
from progresscast.model.activity import Activity
from progresscast.model.card import Card, CardInput
from progresscast.model.needs import needs
from progresscast.model.owners import Owner
from progresscast.model.view import RunState, View
from progresscast.render.discord import SUPPRESS_NOTIFICATIONS
from progresscast.render.discord_payload import discord_answer, discord_ping
from progresscast.render.ending import end_line, ping_text
from progresscast.render.matrix_payload import matrix_answer, matrix_ping
from progresscast.render.slack_payload import slack_answer, slack_draft, slack_ping
from progresscast.render.telegram_payload import telegram_answer, telegram_draft, telegram_ping
from progresscast.render.templates import theme
from progresscast.render.text import render_text
from progresscast.testing import blocks_text
from progresscast.testing.telegram_html import parse

OWNER = Owner("main", "shop")


def view(*steps: tuple[str, str], run: RunState = RunState.none, **activity: object) -> View:
    parsed = CardInput.parse({"plan": [{"step": s, "status": st} for s, st in steps]}) if steps else None
    card = Card(
        sessionKey="shop", agentId="main", displayKey=OWNER.display_key, revision=3,
        plan=parsed.plan if parsed else None, markdown=None if steps else "a note",
        updatedAt="2026-06-01T00:00:00.000Z",
    )
    return View(OWNER, card, Activity(**activity), run=run, run_id="r1", paused=run is not RunState.active)  # type: ignore[arg-type]


TG = theme("telegram")


def test_the_end_line_of_each_way_a_run_ends() -> None:
    done = view(("Fetch", "completed"), ("Fix", "completed"), ("Ship", "skipped"), run=RunState.completed)
    assert end_line(done, TG) == "✅ shop · 3/3 done"
    failed = view(("Fetch", "completed"), ("Confirm access", "blocked"), ("Ship", "pending"), run=RunState.failed)
    assert end_line(failed, TG) == "❌ shop · failed · ⛔ Confirm access"
    assert end_line(view(("Fetch", "in_progress"), run=RunState.canceled), TG) == "⏹️ shop · canceled"
    assert end_line(view(run=RunState.completed), TG) == "✅ shop · done"  # a note, no plan
    waiting = view(("Ask", "in_progress"), run=RunState.failed, attention="Waiting for input: which branch?")
    assert end_line(waiting, TG) == "❌ shop · failed · ⛔ Waiting for input: which branch?"
    assert end_line(view(("Fetch", "in_progress"), run=RunState.active), TG) is None  # not ended
    assert end_line(replace(view(run=RunState.completed), card=None), TG) is None  # nothing to say
    assert end_line(replace(view(run=RunState.completed), card=None, activity=Activity(answer="hi")), TG) == (
        "✅ shop · done"
    )
    text = theme("text")
    assert end_line(failed, text) == "!! shop · failed · [!] Confirm access"


def test_a_ping_names_what_newly_needs_a_person() -> None:
    v = view(("A", "blocked"), ("B", "blocked"), run=RunState.active, attention="Waiting for input: ok?")
    assert ping_text(v, needs(v), TG) == "⛔ Needs you — shop: A, B, Waiting for input: ok?"
    assert ping_text(v, needs(v)[1:2], TG) == "⛔ Needs you — shop: B"
    failed = replace(v, run=RunState.failed)
    assert ping_text(failed, needs(failed), TG) == "❌ shop · failed · ⛔ A, B, Waiting for input: ok?"
    long = view(("x" * 500, "blocked"), run=RunState.active)
    assert len(ping_text(long, needs(long), TG) or "") <= 400


def test_telegram_answer_is_headed_by_the_end_line_or_is_that_line_alone() -> None:
    first, second, *_ = telegram_answer("Done.\n\n" + "word " * 1000, head="✅ shop · 3/3 done")
    assert first.params["text"].startswith("<b>✅ shop · 3/3 done</b>\n\nDone.")
    assert not second.params["text"].startswith("<b>✅")
    [alone] = telegram_answer("", head="❌ shop · failed · ⛔ Confirm access")
    assert parse(alone.params["text"]).text == "❌ shop · failed · ⛔ Confirm access"
    assert telegram_answer("") == []
    fallback = alone.fallback()
    assert fallback is not None and fallback.params["text"] == "❌ shop · failed · ⛔ Confirm access"


def test_telegram_ping_is_plain_text_without_mentions() -> None:
    v = view(("Ask @alice_admin <b>now</b>", "blocked"), run=RunState.active)
    ping = telegram_ping(v, needs(v))
    assert ping is not None and "parse_mode" not in ping.params
    assert ping.params["text"] == "⛔ Needs you — shop: Ask @\u2060alice_admin <b>now</b>"


def test_slack_answer_head_and_ping_are_escaped() -> None:
    [answer] = slack_answer("All good.", head="✅ <!channel> · done")
    shown = blocks_text(answer.params["blocks"])
    assert shown.text.startswith("✅ <!channel> · done") and shown.mentions == []
    v = view(("Tell <!here>", "blocked"), run=RunState.active)
    ping = slack_ping(v, needs(v), thread_ts="1.2")
    assert ping is not None and ping.params == {"text": "⛔ Needs you — shop: Tell &lt;!here&gt;", "thread_ts": "1.2"}


@pytest.mark.parametrize("mode", [Mode.partial, Mode.block])
def test_an_ended_preview_is_headed_by_how_the_run_ended_and_says_failed_once(mode: Mode) -> None:
    settings = RenderSettings(mode=mode)
    v = view(("Fetch", "completed"), ("Confirm access", "blocked"), run=RunState.failed, answer="Stuck here.")
    text = render_text(v, settings) or ""
    assert text.startswith("!! shop · failed · [!] Confirm access\n\nStuck here.")
    assert text.count("failed") == 1 and "Run failed" not in text
    html = telegram_draft(v, settings)
    assert html is not None and html.params["text"].startswith("<b>❌ shop · failed · ⛔ Confirm access</b>")
    slack = slack_draft(v, settings)
    assert slack is not None and blocks_text(slack.params["blocks"]).text.startswith("❌ shop · failed")
    live = replace(v, run=RunState.active)
    assert "failed" not in (render_text(live, settings) or "")
    after = replace(v, after_end=True)  # a card written after the run ended: no head
    assert not (render_text(after, settings) or "").startswith("!!")


def test_blocked_stays_blocked_in_every_chat_channel_when_the_run_is_over() -> None:
    v = view(("Fetch", "completed"), ("Confirm access", "blocked"), ("Ship", "pending"), run=RunState.completed)
    text = render_text(v, RenderSettings()) or ""
    assert "[!] Confirm access" in text and "[‖] Ship" in text
    html = telegram_draft(v, RenderSettings())
    assert html is not None and "⛔ Confirm access" in html.params["text"] and "⏸️ Ship" in html.params["text"]
    rich = telegram_draft(v, RenderSettings(rich=True))
    assert rich is not None and "⛔" in str(rich.params)


def test_discord_and_matrix_pings_notify_and_mention_nobody() -> None:
    v = view(("Ask @everyone and <@123>", "blocked"), run=RunState.active)
    ping = discord_ping(v, needs(v))
    assert ping is not None and ping.params["allowed_mentions"] == {"parse": []}
    assert not ping.params["flags"] & SUPPRESS_NOTIFICATIONS  # a ping notifies; drafts are silent
    assert ping.params["content"] == "⛔ Needs you — shop: Ask \\@everyone and \\<\\@123\\>"  # escaped
    matrix = matrix_ping(v, needs(v), thread_root="$root")
    assert matrix is not None and matrix.params["msgtype"] == "m.text" and matrix.params["m.mentions"] == {}
    assert matrix.params["body"] == "⛔ Needs you — shop: Ask @everyone and <@123>"
    assert matrix.params["m.relates_to"]["rel_type"] == "m.thread"
    [answer] = matrix_answer("", head="✅ shop · done")
    assert answer.params["body"] == "✅ shop · done" and answer.params["msgtype"] == "m.text"
    [d_answer] = discord_answer("Fixed.", head="✅ shop · 1/1 done")
    assert d_answer.params["content"].startswith("**✅ shop · 1/1 done**")
