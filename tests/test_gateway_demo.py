"""`progresscast demo`: the example played through the gateway's RPC."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import pytest
from redis.asyncio import Redis

from progresscast.config.gateway import GatewaySettings
from progresscast.config.settings import Settings
from progresscast.demo import CHAT, SESSION, _press, example_session, run_demo
from progresscast.model.owners import Owner
from progresscast.store.cards import CardStore
from progresscast.store.embedded import stop_embedded
from progresscast.telegram.bot import run_adapter
from progresscast.testing import DEFAULT_TOKEN, BotAPIEmulator
from progresscast.testing.console import ChatConsole


def demo_args(redis_url: str, *, serve: bool = False) -> argparse.Namespace:
    return argparse.Namespace(redis=redis_url, serve=serve, delay=0.0, config=None)


def settings() -> Settings:
    return Settings(gateway=GatewaySettings(listen="127.0.0.1:0"))


async def test_the_demos_press_is_printed_after_the_message_it_presses() -> None:
    """The chat's person presses as soon as the ask shows in the chat, while the console
    prints the calls in the order they came: one still arriving (here a request whose
    body is held back) holds back the lines of those after it. The press waits for the
    console, so it is printed after the line of the message it presses."""
    out = io.StringIO()
    async with BotAPIEmulator() as api, httpx.AsyncClient() as client:
        console = ChatConsole(api, CHAT, out)
        printing = asyncio.create_task(console.run())
        path = f"{api.base_url}{api.token}/sendMessage".removeprefix(api.url)
        body = json.dumps({"chat_id": CHAT, "text": "Working"}).encode()
        host, port = api.url.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(f"POST {path} HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
                     f"Content-Length: {len(body)}\r\n\r\n".encode())
        await writer.drain()
        await api.wait_for(lambda: api.calls, 10)  # listed, its body still to come
        keyboard = {"inline_keyboard": [[{"text": "Allow", "callback_data": "allow"}]]}
        sent = await client.post(f"{api.base_url}{api.token}/sendMessage", json={
            "chat_id": CHAT, "text": "Deploy?", "reply_markup": keyboard})
        assert sent.status_code == 200
        pressing = asyncio.create_task(_press(api, console, "Allow", out))
        with contextlib.suppress(TimeoutError):
            await api.wait_for(lambda: api.bot().callbacks, 0.5)
        assert not api.bot().callbacks, "pressed while the console could not print the message yet"
        writer.write(body)
        await writer.drain()
        query = await api.wait_for(lambda: next(iter(api.bot().callbacks.values()), None), 10)
        await client.post(f"{api.base_url}{api.token}/answerCallbackQuery", json={
            "callback_query_id": query.id, "text": "Answered: Allow"})
        await asyncio.wait_for(pressing, 10)
        assert b" 200 " in await reader.readline()
        writer.close()
        printing.cancel()
    text = out.getvalue()
    pressed = re.search(r"you press \[Allow\] on message (\d+)", text)
    assert pressed and f"＋ the bot sends message {pressed[1]}:\n    │ Deploy?" in text[: pressed.start()], text


async def test_demo_plays_the_example_to_a_real_adapter_and_prints_what_the_chat_shows(
    redis_url: str, redis: Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Pacing (one call a second per private chat) at a tenth of real time; steps 0.2 s
    # apart still leave the chat time to show several of them.
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.1")
    out = io.StringIO()
    args = demo_args(redis_url)
    args.delay = 0.2
    await asyncio.wait_for(run_demo(args, settings(), out=out, interactive=False), 90)
    text = out.getvalue()
    page = re.search(r"Watch the card live: (http://127\.0\.0\.1:\d+/sessions/agent:main:demo-ticket-4821\?token=\S+)", text)
    assert page, text
    # Every entry of the example is one numbered step.
    assert len(re.findall(r"^\[\d+\] agent: ", text, re.M)) == len(example_session())
    assert "progressCard.put → Progress card updated (rev 2, 0/4 done)" in text
    assert "agent: progressCard.reset → rev 1: a clean card to start from" in text  # what rev 1 was
    # The headline features at the demo's own pace: the blocked step's ping, and the
    # run's end line heading its answer.
    assert "    │ ⛔ Needs you — demo-ticket-4821: Fix and add a regression test" in text, text
    assert re.search(r"    │ ✅ demo-ticket-4821 · (4/4 )?done\n", text), text  # "4/4" when read before the clear
    # An approval answered from the chat: the ask's buttons, the press, the agent handed the answer.
    assert "asks: Run the index migration on production?" in text and "[1: Allow]  [2: Deny]" in text, text
    assert "you press [Allow]" in text and "bot → Answered: Allow" in text, text
    pressed = re.search(r"you press \[Allow\] on message (\d+)", text)
    assert pressed and f"＋ the bot sends message {pressed[1]}:" in text[: pressed.start()], text  # in that order
    assert "agent: progressCard.waitAnswer → answered: Allow (by Dana, from the chat)" in text, text
    assert "✅ Run the index migration on production? — Dana answered: Allow" in text, text
    assert "run.end → completed" in text and "progressCard.put → Progress card cleared" in text
    # What the chat shows, as a person reads it: the draft is sent, edited, deleted at the
    # run's end, and the answer is posted — never raw HTML.
    assert re.search(r"＋ the bot sends message (\d+):\n    │ main · demo-ticket-4821", text), text
    assert "✎ the bot edits message" in text and "✕ the bot deletes message" in text
    answer = next(e["activity"]["answer"] for e in example_session() if "answer" in e.get("activity", {}))
    assert "    │ Fixed: checkout for EU users was slow because orders_by_region scanned" in text
    assert "&gt;" not in text and "<b>" not in text and "<code>" not in text
    tail = text[text.rindex("✕ the bot deletes message"):]
    assert "the bot sends message" in tail and answer[:20] in tail  # the answer comes after the draft is gone
    assert "Demo done (stdin is not a terminal" in text
    # It ran on a store of its own: the one it was pointed at never saw it.
    store = CardStore(redis)
    assert await store.revision(Owner("main", SESSION)) == 0
    assert [key async for key, _ in store.owners()] == []
    # ...and the gateway is gone.
    async with httpx.AsyncClient() as client:
        try:
            await client.get(page.group(1), timeout=1)
        except httpx.TransportError:
            pass
        else:
            raise AssertionError("the demo's gateway still answers after it exited")


async def test_the_blocked_steps_ping_shows_however_fast_the_demo_plays(
    redis_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No delay between writes: the next write unblocks the step before the chat's pace
    # lets the ping leave, unless the demo waits for it.
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.1")
    out = io.StringIO()
    await asyncio.wait_for(run_demo(demo_args(redis_url), settings(), out=out, interactive=False), 90)
    text = out.getvalue()
    ping = text.index("    │ ⛔ Needs you — demo-ticket-4821: Fix and add a regression test")
    assert ping < text.index("agent: progressCard.put → Progress card updated (rev 5"), text  # before it unblocks


async def test_the_demo_keeps_to_itself_beside_a_running_serve_on_the_same_home(
    redis_url: str, redis: Redis, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A user tries the bot with `progresscast emulator telegram` (its default bot and chat)
    and a `serve` on their store whose chat follows the demo's session; then runs the
    demo on the same home. The demo uses its own temporary store, bot and chat: the
    user's chat and store see nothing of it, and it leaves nothing behind."""
    monkeypatch.setenv("PROGRESSCAST_TIME_SCALE", "0.1")
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    user_settings = Settings.model_validate({
        "gateway": {"listen": "127.0.0.1:0"},
        "channels": {"telegram": {"token": DEFAULT_TOKEN, "chats": [{"id": 4821, "follow": [SESSION]}]}},
    })
    async with BotAPIEmulator() as user_api:
        telegram = user_settings.channels.telegram
        assert telegram is not None
        telegram.apiBaseUrl = user_api.base_url
        serve = asyncio.create_task(run_adapter(user_settings, redis))
        try:
            await user_api.wait_for(lambda: any(c.method == "getUpdates" for c in user_api.calls), 30)
            out = io.StringIO()
            args = demo_args(redis_url)
            await asyncio.wait_for(run_demo(args, settings(), out=out, interactive=False), 90)
            await asyncio.sleep(1)
            assert user_api.chat(4821).visible() == []  # the user's chat got nothing
            assert "Demo done" in out.getvalue() and "its own temporary store" in out.getvalue()
        finally:
            serve.cancel()
            await asyncio.gather(serve, return_exceptions=True)
    store = CardStore(redis)
    assert await store.revision(Owner("main", SESSION)) == 0 and await store.get(Owner("main", SESSION)) is None
    assert list(temp.iterdir()) == []  # its temporary home is gone


async def test_demo_serve_keeps_the_page_up(redis_url: str) -> None:
    out = io.StringIO()
    demo = asyncio.create_task(run_demo(demo_args(redis_url, serve=True), settings(), out=out))
    try:
        async with asyncio.timeout(30):
            while "Still serving" not in out.getvalue():
                assert not demo.done(), out.getvalue()
                await asyncio.sleep(0.05)
        url = re.search(r"Watch the card live: (\S+)", out.getvalue())
        assert url
        async with httpx.AsyncClient(follow_redirects=True) as client:
            response = await client.get(url.group(1))
        assert response.status_code == 200 and 'data-session-key="demo-ticket-4821"' in response.text
        assert not demo.done()
    finally:
        demo.cancel()
        await asyncio.gather(demo, return_exceptions=True)


def test_progresscast_demo_command_exits_by_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    env = {**os.environ, "PROGRESSCAST_HOME": str(home), "PROGRESSCAST_TIME_SCALE": "0.1"}  # the chat's pacing
    env.pop("PROGRESSCAST_REDIS_URL", None)
    config = tmp_path / "pc.toml"
    config.write_text('[gateway]\nlisten = "127.0.0.1:0"\n')
    try:
        done = subprocess.run(
            [sys.executable, "-m", "progresscast.cli", "demo", "--config", str(config), "--delay", "0"],
            env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
        )
    finally:
        stop_embedded(home)
    assert done.returncode == 0, done.stderr
    assert "Watch the card live: http://127.0.0.1:" in done.stdout
    assert "Progress card cleared" in done.stdout and "Demo done" in done.stdout


def _running(pid: int) -> bool:
    """The process runs (a zombie, ended but not yet reaped by its parent, does not)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state != "Z"


def _ends(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while _running(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.parametrize(("sig", "status"), [(signal.SIGTERM, 0), (signal.SIGINT, 130)])
def test_demo_serve_stopped_by_a_signal_leaves_no_redis_and_no_home(
    tmp_path: Path, sig: signal.Signals, status: int
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "PROGRESSCAST_HOME": str(tmp_path / "home"), "TMPDIR": str(temp)}
    env.pop("PROGRESSCAST_REDIS_URL", None)
    config = tmp_path / "pc.toml"
    config.write_text('[gateway]\nlisten = "127.0.0.1:0"\n')
    demo = subprocess.Popen(
        [sys.executable, "-m", "progresscast.cli", "demo", "--serve", "--config", str(config), "--delay", "0"],
        env={**env, "PROGRESSCAST_TIME_SCALE": "0.1"}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert demo.stdout is not None
    redis_pid = None
    try:
        seen = b""
        deadline = time.monotonic() + 90
        while b"Still serving" not in seen:
            assert time.monotonic() < deadline and demo.poll() is None, seen.decode(errors="replace")
            ready, _, _ = select.select([demo.stdout], [], [], 1)
            if ready:
                seen += os.read(demo.stdout.fileno(), 65536)
        (home,) = temp.glob("progresscast-demo-*")
        redis_pid = int((home / "redis.pid").read_text())
        assert _running(redis_pid)
        demo.send_signal(sig)
        _, err = demo.communicate(timeout=60)
        assert demo.returncode == status, err.decode(errors="replace")
        assert "Traceback" not in err.decode(errors="replace")
        assert not home.exists() and list(temp.iterdir()) == []
        assert _ends(redis_pid)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
        if redis_pid is not None and _running(redis_pid):
            os.kill(redis_pid, signal.SIGKILL)


def test_at_a_terminal_the_demo_keeps_the_page_up_until_enter(tmp_path: Path) -> None:
    import pty

    home = tmp_path / "home"
    env = {**os.environ, "PROGRESSCAST_HOME": str(home), "PROGRESSCAST_TIME_SCALE": "0.1"}  # the chat's pacing
    env.pop("PROGRESSCAST_REDIS_URL", None)
    config = tmp_path / "pc.toml"
    config.write_text('[gateway]\nlisten = "127.0.0.1:0"\n')
    pid, fd = pty.fork()
    if pid == 0:  # the child: the demo, with the pty as its terminal
        os.execve(sys.executable, [sys.executable, "-m", "progresscast.cli", "demo", "--config", str(config), "--delay", "0"], env)
    try:
        seen = b""
        deadline = time.monotonic() + 90
        while b"Press Enter" not in seen:
            assert time.monotonic() < deadline, seen.decode(errors="replace")
            ready, _, _ = select.select([fd], [], [], 1)
            if ready:
                seen += os.read(fd, 65536)
        page = re.search(rb"The page stays up at (\S+)", seen)
        assert page, seen
        assert httpx.get(page.group(1).decode(), follow_redirects=True, timeout=10).status_code == 200
        os.write(fd, b"\n")
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
    finally:
        with contextlib.suppress(ProcessLookupError, ChildProcessError):
            os.kill(pid, 9)
            os.waitpid(pid, 0)
        os.close(fd)
        stop_embedded(home)
