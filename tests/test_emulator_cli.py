"""`progresscast emulator telegram`: the emulator on its own, driven by real
python-telegram-bot, with a person typing on stdin as a chat user."""

from __future__ import annotations

import asyncio
import io
import os
import re
import signal
import socket
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import telegram

from progresscast.channels.worker import WorkerOptions
from progresscast.cli.typed_lines import MAX_LINE_BYTES, Lines
from progresscast.config.settings import Settings
from progresscast.discord.adapter import DiscordAdapter, DiscordOptions
from progresscast.discord.register import register
from progresscast.gateway.app import create_app
from progresscast.gateway.server import serve_app
from progresscast.model.asks import AskInput, option_control
from progresscast.model.card import CardInput
from progresscast.model.owners import Owner
from progresscast.slack.adapter import SlackAdapter, SlackOptions
from progresscast.store.cards import CardStore
from progresscast.testing import DEFAULT_TOKEN, asks, press_words, pressed_button


def app_socket() -> tuple[socket.socket, str]:
    """A listening socket for an app the test serves, and its address."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    return sock, f"http://127.0.0.1:{sock.getsockname()[1]}"


async def read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str], timeout: float = 30) -> re.Match[str]:
    async def read() -> re.Match[str]:
        while line := await stream.readline():
            seen.append(line.decode())
            if found := re.search(pattern, "".join(seen)):
                return found
        raise AssertionError("".join(seen))

    try:
        return await asyncio.wait_for(read(), timeout)
    except TimeoutError:
        raise AssertionError(f"no {pattern!r} in {timeout:g} s; the console printed:\n{''.join(seen)}") from None


def pressed(typed: str, shown: str) -> str:
    """The console's lines for a press (or a typed answer) of message `(\\d+)`: the press's
    own update showing `shown`. The bot's edit of the message to the same content may be
    printed first: its lane heard of the answer through the store and raced the press's
    reply."""
    edit = rf"  ✎ the bot edits message \1:\n    │ {shown}\n"
    return rf"{typed}\n(?:{edit})?  ✎ the press updates message \1:\n    │ {shown}\n"


async def emulator(*args: str, stdin: Any = asyncio.subprocess.PIPE) -> asyncio.subprocess.Process:
    """`progresscast emulator ARGS`, its output piped to the test."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "emulator", *args,
        stdin=stdin, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None and proc.stderr is not None
    return proc


async def type_line(proc: asyncio.subprocess.Process, line: str) -> None:
    """Type `line` on the emulator's console and press Enter."""
    assert proc.stdin is not None
    proc.stdin.write(line.encode() + b"\n")
    await proc.stdin.drain()


async def test_type_as_a_user_and_see_what_the_bot_shows() -> None:
    proc = await emulator("telegram", "--chat", "4821")
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        base = (await read_until(proc.stdout, r'apiBaseUrl = "(http://127\.0\.0\.1:\d+/bot)"', seen)).group(1)
        assert f'token = "{DEFAULT_TOKEN}"' in "".join(seen)
        await read_until(proc.stdout, r"Type as the user of chat 4821", seen)
        await type_line(proc, "/follow ticket-4821")
        await read_until(proc.stdout, r"you → /follow ticket-4821", seen)
        async with telegram.Bot(DEFAULT_TOKEN, base_url=base) as bot:
            [update] = await bot.get_updates(timeout=5)
            assert update.message.text == "/follow ticket-4821" and update.message.chat_id == 4821
            sent = await bot.send_message(4821, "<b>Following</b> agent:main:ticket-4821 &amp; more", parse_mode="HTML")
            await read_until(proc.stdout, rf"the bot sends message {sent.message_id}:\n    │ Following agent:main:ticket-4821 & more", seen)
            await bot.edit_message_text("✅ done", 4821, sent.message_id)
            await read_until(proc.stdout, rf"the bot edits message {sent.message_id}:\n    │ ✅ done", seen)
            await bot.delete_message(4821, sent.message_id)
            await read_until(proc.stdout, rf"the bot deletes message {sent.message_id}", seen)
        proc.stdin.close()
        await read_until(proc.stdout, r"input closed: still serving until Ctrl-C", seen)
        assert proc.returncode is None
    finally:
        proc.kill()
        await proc.wait()


async def test_press_a_button_and_reply_from_the_console() -> None:
    """`press N` sends the N-th button's callback_query; the bot's answer is printed; `reply
    TEXT` replies to the message with buttons; `press N on MESSAGE` presses an older one's."""
    proc = await emulator("telegram", "--chat", "4821")
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        base = (await read_until(proc.stdout, r'apiBaseUrl = "(http://127\.0\.0\.1:\d+/bot)"', seen)).group(1)
        await read_until(proc.stdout, r"Type as the user of chat 4821", seen)
        async with telegram.Bot(DEFAULT_TOKEN, base_url=base) as bot:
            stop = telegram.InlineKeyboardMarkup([[telegram.InlineKeyboardButton("⏹ Stop", callback_data="pc:stop")]])
            draft = await bot.send_message(4821, "shop · working", reply_markup=stop)
            await read_until(proc.stdout, rf"\[1: ⏹ Stop\]   \(type: press 1 on {draft.message_id}\)", seen)
            keyboard = telegram.InlineKeyboardMarkup([[
                telegram.InlineKeyboardButton("Allow", callback_data="pc:a:x:0"),
                telegram.InlineKeyboardButton("Deny", callback_data="pc:a:x:1"),
            ]])
            sent = await bot.send_message(4821, "❓ main · shop asks: Run rm -rf build?", reply_markup=keyboard)
            await read_until(proc.stdout, rf"\[1: Allow\]  \[2: Deny\]   \(type: press N on {sent.message_id}\)", seen)
            await type_line(proc, "press 2")
            await read_until(proc.stdout, rf"you press \[Deny\] on message {sent.message_id}", seen)
            [update] = await bot.get_updates(timeout=5)
            assert update.callback_query.data == "pc:a:x:1" and update.callback_query.message.message_id == sent.message_id
            await bot.answer_callback_query(update.callback_query.id, text="Answered: Deny")
            await read_until(proc.stdout, r"bot → Answered: Deny", seen)
            await type_line(proc, "reply not now")
            await read_until(proc.stdout, rf"you reply to message {sent.message_id} → not now", seen)
            [update] = await bot.get_updates(offset=update.update_id + 1, timeout=5)
            assert update.message.reply_to_message.message_id == sent.message_id
            # The draft's Stop, while the ask is the newest message with buttons.
            await type_line(proc, f"press 1 on {draft.message_id}")
            await read_until(proc.stdout, rf"you press \[⏹ Stop\] on message {draft.message_id}", seen)
            [update] = await bot.get_updates(offset=update.update_id + 1, timeout=5)
            assert update.callback_query.data == "pc:stop" and update.callback_query.message.message_id == draft.message_id
            await bot.answer_callback_query(update.callback_query.id, text="Press Stop again")
            await read_until(proc.stdout, r"bot → Press Stop again", seen)
            # `reply` answers the open question, never the draft's Stop (now newer with buttons).
            reposted = await bot.send_message(4821, "shop · working", reply_markup=stop)
            await read_until(proc.stdout, rf"\(type: press 1 on {reposted.message_id}\)", seen)
            await type_line(proc, "reply later")
            await read_until(proc.stdout, rf"you reply to message {sent.message_id} → later", seen)
            # A plain `press N` too: the question's button, not the newer draft's Stop.
            await type_line(proc, "press 1")
            await read_until(proc.stdout, rf"you press \[Allow\] on message {sent.message_id}", seen)
            await type_line(proc, "press 1 on 999")
            await read_until(
                proc.stdout, rf"\(message 999 has no buttons to press; the newest that has is {reposted.message_id}\)", seen
            )
    finally:
        proc.kill()
        await proc.wait()


@pytest.mark.parametrize("kind", ["file", "/dev/null"])
async def test_stdin_from_a_file_is_typed_and_the_emulator_keeps_serving(tmp_path: Path, kind: str) -> None:
    # The event loop cannot watch a regular file or /dev/null; the emulator reads it as it is.
    typed = tmp_path / "typed.txt"
    typed.write_text("/follow ticket-4821\n")
    with (typed if kind == "file" else Path(os.devnull)).open("rb") as stdin:
        proc = await emulator("telegram", "--chat", "4821", stdin=stdin)
    assert proc.stdout is not None and proc.stderr is not None
    seen: list[str] = []
    try:
        if kind == "file":
            await read_until(proc.stdout, r"you → /follow ticket-4821", seen)
        await read_until(proc.stdout, r"input closed: still serving until Ctrl-C", seen)
        assert proc.returncode is None
    finally:
        proc.kill()
        await proc.wait()
    assert b"Traceback" not in await proc.stderr.read()


@pytest.mark.parametrize("kind", ["pipe", "file"])
async def test_a_typed_line_too_long_is_not_sent_and_the_console_goes_on(tmp_path: Path, kind: str) -> None:
    # 100,000 bytes in one line (a paste gone wrong), then a command.
    text = b"a" * 100_000 + b"\n/follow ticket-4821\n"
    typed = tmp_path / "typed.txt"
    typed.write_bytes(text)
    if kind == "pipe":
        proc = await emulator("telegram", "--chat", "4821")
    else:
        with typed.open("rb") as stdin:
            proc = await emulator("telegram", "--chat", "4821", stdin=stdin)
    assert proc.stdout is not None and proc.stderr is not None
    seen: list[str] = []
    try:
        await read_until(proc.stdout, r"Type as the user of chat 4821", seen)
        if kind == "pipe":
            assert proc.stdin is not None
            proc.stdin.write(text)
            await proc.stdin.drain()
        await read_until(proc.stdout, r"\(a line of more than 16,384 bytes was not sent\)", seen)
        await read_until(proc.stdout, r"you → /follow ticket-4821", seen)
        assert proc.returncode is None
        assert "aaaa" not in "".join(seen)
    finally:
        proc.kill()
        await proc.wait()
    assert b"Traceback" not in await proc.stderr.read()


def test_press_picks_the_newest_open_question_else_the_newest_message_with_buttons_or_the_one_named() -> None:
    stop, draft = "pc:stop", "pc:x:1"  # a draft's Stop; a control that is not ours
    ask = [option_control("a1", 0), option_control("a1", 1)]
    messages = [("7", [draft]), ("9", [draft, stop])]  # (id, its buttons' controls), oldest first
    pick = partial(pressed_button, with_buttons=messages, id_of=lambda m: m[0], controls=lambda m: m[1])
    assert pick("2") == (("9", [draft, stop]), 1)
    assert pick("1 on 7") == (("7", [draft]), 0)
    assert pick("2 on 7") == "(press 1 to 1: the buttons of message 7; press N on MESSAGE for another message)"
    assert pick("1 on 8") == "(message 8 has no buttons to press; the newest that has is 9)"
    assert pick("x") == "(press 1 to 2: the buttons of message 9; press N on MESSAGE for another message)"
    assert pressed_button("1", [], str, list) == "(no message here has buttons)"
    # An open question, older than the draft whose Stop came after it: a plain press is its.
    waiting = [("8", ask), ("9", [stop])]
    assert pressed_button("1", waiting, lambda m: m[0], lambda m: m[1]) == (("8", ask), 0)
    assert pressed_button("1 on 9", waiting, lambda m: m[0], lambda m: m[1]) == (("9", [stop]), 0)
    assert [press_words(w) for w in ("3", "3 on $ev:hs", "3 at 7", "on 7", "")] == [(3, None), (3, "$ev:hs"), None, None, None]
    # `reply` answers an open question, never a draft quoting one under its header line.
    assert asks("❓ main · shop asks: Deploy?\n1. Allow") and not asks("✅ Deploy? — Ana answered: Allow")
    assert not asks("main · shop · 1/2 done\n❓ Waiting for you: who asks: why?")


def test_typed_lines_come_whole_across_reads_and_a_long_one_is_dropped_to_its_end() -> None:
    out = io.StringIO()
    lines = Lines(out)
    tick = "✓".encode()  # three bytes, read apart
    assert lines.feed(b"/follow " + tick[:1]) == []
    assert lines.feed(tick[1:] + b"\nre") == ["/follow ✓"]
    assert lines.end() == ["re"]
    # Too long while it is still coming: said once, and dropped up to its end.
    assert lines.feed(b"x" * 10_000) == []
    assert lines.feed(b"x" * 10_000) == []
    assert lines.feed(b"x" * 10_000) == []
    assert lines.feed(b"xx\nok\n") == ["ok"]
    # Too long within one read.
    assert lines.feed(b"y" * (MAX_LINE_BYTES + 1) + b"\nnext") == []
    assert lines.end() == ["next"]
    assert lines.feed(b"z" * MAX_LINE_BYTES + b"\n") == ["z" * MAX_LINE_BYTES]  # the limit itself is sent
    assert out.getvalue() == "  (a line of more than 16,384 bytes was not sent)\n" * 2


@pytest.mark.parametrize("platform", ["telegram", "slack", "discord"])
async def test_sigterm_ends_an_emulator_as_an_ordinary_end(platform: str) -> None:
    # As `serve`: a service manager's stop is no failure (the Matrix one's Synapse goes with it).
    proc = await emulator(platform)
    assert proc.stdout is not None
    seen: list[str] = []
    try:
        await read_until(proc.stdout, r"Ctrl-C stops", seen)
        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), 10) == 0
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def test_emulator_slack_prints_its_settings_takes_slash_commands_and_shows_the_channel(
    redis: Any, monkeypatch: Any
) -> None:
    """`progresscast emulator slack` beside a real Slack adapter and gateway: a line typed
    as `/progresscast …` is a signed slash command to the app, a plain line a person's
    message (an event to the app), and what the channel shows is printed."""
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.05")
    sock, app_url = app_socket()
    proc = await emulator("slack", "--app", app_url)
    assert proc.stdout is not None
    seen: list[str] = []
    tasks: list[asyncio.Task[Any]] = []
    try:
        base = (await read_until(proc.stdout, r'apiBaseUrl = "(http://127\.0\.0\.1:\d+/api/)"', seen)).group(1)
        text = "".join(seen)
        token = re.search(r'token = "(xoxb-[^"]+)"', text)
        secret = re.search(r'signingSecret = "([^"]+)"', text)
        assert token and secret, text
        await read_until(proc.stdout, r"Type as a person in channel C0TEST0001", seen)
        settings = Settings.model_validate({"channels": {"slack": {
            "token": token.group(1), "signingSecret": secret.group(1), "apiBaseUrl": base,
            "allowedChannels": ["C0TEST0001"],  # granted every session (else a pairing code answers)
        }}})
        adapter = SlackAdapter(settings, redis, options=SlackOptions(
            worker=WorkerOptions(group="slack", consumer="test", settle=1.0)))
        started = asyncio.Event()
        tasks.append(asyncio.create_task(serve_app(create_app(settings, redis, routes=adapter.routes()), sock,
                                                   started=started)))
        tasks.append(asyncio.create_task(adapter.run()))
        await asyncio.wait_for(adapter.started.wait(), 10)
        await type_line(proc, "/progresscast follow t1")
        await read_until(proc.stdout, r"app → Following agent:main:t1", seen)
        await CardStore(redis).put(Owner("main", "t1"), CardInput.parse({"plan": [{"step": "Fix", "status": "in_progress"}]}))
        await read_until(proc.stdout, r"the app posts message [\d.]+:\n    │ main · t1", seen)
        await type_line(proc, "hello from a person")
        await read_until(proc.stdout, r"you → hello from a person", seen)
        # An ask's buttons are shown; `press N` presses one, and the app's answer, seen only
        # by the presser, is printed.
        await CardStore(redis).asks.open(Owner("main", "t1"), AskInput.parse({"kind": "approval", "prompt": "Go?"}))
        await read_until(proc.stdout, r"\[1: Allow\]  \[2: Deny\]", seen)
        await type_line(proc, "press 1")
        await read_until(proc.stdout, r"app \(only you see it\) → Answered: Allow", seen)
        # `reply TEXT` answers a question in its thread: named as a press names the
        # person, and told to them alone.
        await CardStore(redis).asks.open(Owner("main", "t1"), AskInput.parse({"kind": "text", "prompt": "Why?"}))
        await read_until(proc.stdout, r"Why\?", seen)
        await type_line(proc, "reply not now")
        await read_until(proc.stdout, r"you reply in the thread of message [\d.]+ → not now", seen)
        for shown in (r"app \(only you see it\) → Answered: not now", r"tester answered: not now"):  # either first
            if not re.search(shown, "".join(seen)):
                await read_until(proc.stdout, shown, seen)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        proc.kill()
        await proc.wait()


async def test_emulator_discord_presses_a_button_and_types_an_answer(redis: Any, monkeypatch: Any) -> None:
    """`progresscast emulator discord` beside a real Discord adapter and gateway: `press N`
    presses the N-th button of the newest message with buttons and prints the message as
    the app's answer updated it; `reply TEXT` answers the newest ask through its "Type an
    answer…" button and the modal it opens."""
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.05")
    sock, app = app_socket()
    url = f"{app}/discord/interactions"
    proc = await emulator("discord", "--interactions", url)
    assert proc.stdout is not None
    seen: list[str] = []
    tasks: list[asyncio.Task[Any]] = []

    try:
        await read_until(proc.stdout, r"Type /progresscast commands as a member of channel (\d+)", seen)
        text = "".join(seen)
        found = {key: re.search(rf'{key} = "([^"]+)"', text) for key in
                 ("token", "applicationId", "publicKey", "apiBaseUrl")}
        guild = re.search(r"--guild (\d+)", text)
        assert all(found.values()) and guild, text
        settings = Settings.model_validate({"channels": {"discord": {
            **{key: m.group(1) for key, m in found.items() if m},
            "channels": [{"id": "200000000000000001", "sessions": ["*"]}],
        }}})
        assert settings.channels.discord is not None
        await register(settings.channels.discord, guild.group(1))
        adapter = DiscordAdapter(settings, redis, options=DiscordOptions(
            worker=WorkerOptions(group="discord", consumer="test", settle=1.0)))
        tasks.append(asyncio.create_task(serve_app(create_app(settings, redis, routes=adapter.routes()), sock,
                                                   started=asyncio.Event())))
        tasks.append(asyncio.create_task(adapter.run()))
        await asyncio.wait_for(adapter.started.wait(), 10)
        await type_line(proc, "follow t1")
        await read_until(proc.stdout, r"ⓘ Following agent:main:t1", seen)
        asks = CardStore(redis).asks
        owner = Owner("main", "t1")
        chosen = await asks.open(owner, AskInput.parse({"kind": "choice", "prompt": "Deploy?", "options": ["Now", "Later"]}))
        await read_until(proc.stdout, r"\[1: Now\]  \[2: Later\]", seen)
        await type_line(proc, "press 2")
        await read_until(proc.stdout, pressed(r"you press \[Later\] on message (\d+)", r"✅ Deploy\? — Tester answered: Later"),
                         seen)
        answered = await asks.wait(owner, chosen.ask_id, 10)
        assert answered is not None and answered.answer is not None and answered.answer.options == ("Later",)
        typed = await asks.open(owner, AskInput.parse({"kind": "text", "prompt": "Why?"}))
        await read_until(proc.stdout, r"\[1: Type an answer…\]", seen)
        await type_line(proc, "reply not now")
        await read_until(proc.stdout, pressed(r"you answer message (\d+) → not now", r"✅ Why\? — Tester answered: not now"),
                         seen)
        answered = await asks.wait(owner, typed.ask_id, 10)
        assert answered is not None and answered.answer is not None and answered.answer.text == "not now"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        proc.kill()
        await proc.wait()
