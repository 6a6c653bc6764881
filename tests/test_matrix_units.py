"""The Matrix adapter's pure parts: what a reply means, what a room event asks, who may change things."""

from __future__ import annotations

import aiohttp
import pytest
from nio import RoomRedactResponse, RoomSendError, RoomSendResponse

from progresscast.channels.chat.access import config_grant
from progresscast.channels.draft.outcome import OutcomeKind as K
from progresscast.config.agents import AgentSettings
from progresscast.config.base import Access
from progresscast.config.matrix import MatrixSettings
from progresscast.matrix.channel import MatrixPace
from progresscast.matrix.client import classify
from progresscast.matrix.sync import heard_in, is_creator, parse_command, power_of
from progresscast.model.owners import Owner

BOT = "@bot:example.org"


def test_replies_become_outcomes() -> None:
    assert classify(RoomSendResponse("$e", "!r")) == classify(RoomSendResponse("$e", "!r"))
    assert classify(RoomSendResponse("$e", "!r")).kind is K.ok and classify(RoomSendResponse("$e", "!r")).message_id == "$e"
    assert classify(RoomRedactResponse("$r", "!r")).kind is K.ok
    limited = classify(RoomSendError("Too Many Requests", "M_LIMIT_EXCEEDED", 2500))
    assert limited.kind is K.rate_limited and limited.retry_after == pytest.approx(2.5)
    assert classify(RoomSendError("too big", "M_TOO_LARGE")).kind is K.refused_content
    assert classify(RoomSendError("nope", "M_FORBIDDEN")).kind is K.forbidden  # the room refuses the bot: paused
    assert classify(RoomSendError("who?", "M_UNKNOWN_TOKEN")).kind is K.refused
    assert classify(RoomSendError("gone", "M_NOT_FOUND")).kind is K.gone
    assert classify(TimeoutError()).kind is K.unsure
    assert classify(aiohttp.ServerDisconnectedError()).kind is K.unsure
    assert classify(ConnectionRefusedError()).kind is K.transient


def message(body: str, **content: object) -> dict[str, object]:
    return {"type": "m.room.message", "sender": "@ann:example.org", "content": {"msgtype": "m.text", "body": body, **content}}


def test_commands_are_read_from_messages() -> None:
    assert parse_command(message("!pc follow shop main"), BOT) == ("0", "follow", ["shop", "main"])
    assert parse_command(message("!PC"), BOT) == ("0", "help", [])
    thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}}
    assert parse_command(message("!pc card", **thread), BOT) == ("$root", "card", [])
    assert parse_command(message("hello !pc follow x"), BOT) is None
    assert parse_command({**message("!pc help"), "sender": BOT}, BOT) is None  # its own
    edit = {"m.relates_to": {"rel_type": "m.replace", "event_id": "$c"}, "m.new_content": {"body": "!pc unfollow"}}
    assert parse_command(message("* !pc unfollow", **edit), BOT) is None
    assert parse_command({**message("!pc help"), "content": {"msgtype": "m.notice", "body": "!pc help"}}, BOT) is None


def test_which_events_are_someone_elses_message_landing() -> None:
    now = 1_700_000_005_000
    said = {**message("how is it going?"), "origin_server_ts": now - 5000}
    assert heard_in(said, BOT, now) == ("0", now - 5000)  # when it was posted
    thread = {"m.relates_to": {"rel_type": "m.thread", "event_id": "$root"}}
    assert heard_in({**message("in a thread", **thread), "origin_server_ts": now}, BOT, now) == ("$root", now)
    assert heard_in({**said, "origin_server_ts": now + 60_000}, BOT, now) == ("0", now)  # never later than heard
    assert heard_in({**message("!pc help"), "origin_server_ts": now}, BOT, now) == ("0", now)  # a command is a message
    sticker = {"type": "m.sticker", "sender": "@ann:example.org", "content": {"body": "a cat", "url": "mxc://x/y"}}
    assert heard_in(sticker, BOT, now) == ("0", now)
    assert heard_in({**said, "sender": BOT}, BOT, now) is None  # its own drafts, pings and replies
    edit = {"m.relates_to": {"rel_type": "m.replace", "event_id": "$c"}, "m.new_content": {"body": "fixed"}}
    assert heard_in(message("* fixed", **edit), BOT, now) is None  # changed in place: nothing landed
    assert heard_in({**said, "content": {}}, BOT, now) is None  # redacted
    redaction = {"type": "m.room.redaction", "sender": "@ann:example.org", "redacts": "$old", "content": {}}
    assert heard_in(redaction, BOT, now) is None
    reaction = {"type": "m.reaction", "sender": "@ann:example.org", "content": {"m.relates_to": {"rel_type": "m.annotation"}}}
    assert heard_in(reaction, BOT, now) is None


def test_power_levels_and_creators() -> None:
    levels = {"users": {"@mod:x": 50, "@ann:x": 10}, "users_default": 0}
    assert power_of(levels, "@mod:x") == 50 and power_of(levels, "@ann:x") == 10 and power_of(levels, "@bob:x") == 0
    v12 = {"sender": "@ann:x", "content": {"room_version": "12", "additional_creators": ["@co:x"]}}
    assert is_creator(v12, "@ann:x") and is_creator(v12, "@co:x") and not is_creator(v12, "@bob:x")
    v11 = {"sender": "@ann:x", "content": {"room_version": "11"}}
    assert not is_creator(v11, "@ann:x")  # before version 12 the creator's power is in the levels


def test_room_tables_grant_as_every_platforms_do() -> None:
    matrix = MatrixSettings(rooms=[{"id": "!a:x", "sessions": ["shop-*"]}, {"id": "!b:x", "follow": ["ops"]}])
    agents = AgentSettings()
    a, b, c = (config_grant(matrix, room, agents) for room in ("!a:x", "!b:x", "!c:x"))
    assert a.covers(Owner("main", "shop-1")) and not a.covers(Owner("main", "ops"))
    assert b.covers(Owner("main", "ops")) and not b.covers(Owner("main", "shop-1"))
    assert c.empty
    assert matrix.access is None and matrix.access_mode is Access.pairing  # no allow list: strangers pair
    assert MatrixSettings(access="open").access_mode is Access.open


def test_a_rate_limit_holds_every_room_in_real_time() -> None:
    budgets = MatrixPace().budgets()
    assert budgets.held_together and budgets.scale == 1.0
