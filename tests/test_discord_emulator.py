"""The Discord emulator behaves like Discord where the adapter relies on it: its errors,
its Components V2 checks, its buckets and headers, its signed interactions — and
`progresscast emulator discord` / `progresscast discord register` on the command line."""

from __future__ import annotations

import asyncio
import io
import json
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from nacl.signing import VerifyKey
from starlette.applications import Starlette

from progresscast.backoff import Backoff
from progresscast.channels.chat.commands import Invocation
from progresscast.discord.breaker import Breaker, BreakerSettings
from progresscast.discord.interactions import DiscordInteractions
from progresscast.discord.rest import DiscordHTTPError, DiscordREST, RateLimited
from progresscast.gateway.server import serve_app
from progresscast.testing import DiscordAPIEmulator
from progresscast.testing._discord_state import DiscordCall
from progresscast.testing.discord_console import DiscordConsole

C = "200000000000000001"


def v2(*texts: str, accent: int = 0x5865F2) -> dict[str, Any]:
    return {
        "flags": 1 << 15,
        "components": [{"type": 17, "accent_color": accent, "components": [{"type": 10, "content": t} for t in texts]}],
        "allowed_mentions": {"parse": []},
    }


async def call(rest: DiscordREST, method: str, path: str, body: Any = None) -> Any:
    return await rest.request(method, path, major=C, path=path, json=body)


@pytest.fixture
async def emulator():
    async with DiscordAPIEmulator(channels=[C], time_scale=0.05) as discord:
        rest = DiscordREST(discord.base_url, discord.token)
        yield discord, rest
        await rest.close()


async def test_messages_errors_and_components_v2_checks(emulator) -> None:
    discord, rest = emulator
    discord.limits.message_limit = None  # many calls to one channel in this test
    made = await call(rest, "POST", f"/channels/{C}/messages", v2("hello @everyone"))
    assert made["flags"] & (1 << 15) and made["components"][0]["components"][0]["id"] == 2
    assert discord.calls[-1].mentions == ["everyone"] and discord.calls[-1].pings == []
    cases = [
        ("POST", f"/channels/{C}/messages", v2(*["x"] * 40), 50035),  # 41 components
        ("POST", f"/channels/{C}/messages", v2("x" * 2001, "y" * 2000), 50035),  # 4,001 characters
        ("POST", f"/channels/{C}/messages", {**v2("x"), "content": "also"}, 50035),
        ("POST", f"/channels/{C}/messages", {"content": "x" * 2001}, 50035),
        ("POST", f"/channels/{C}/messages", {"content": " "}, 50006),
        ("PATCH", f"/channels/{C}/messages/{made['id']}", {"content": "x", "flags": 0}, 50035),  # the flag stays
        ("PATCH", f"/channels/{C}/messages/1", {"content": "x"}, 10008),
        ("POST", "/channels/999999999999999999/messages", {"content": "x"}, 10003),
    ]
    for method, path, body, code in cases:
        with pytest.raises(DiscordHTTPError) as refused:
            await rest.request(method, path, path=path, json=body)
        assert refused.value.code == code, (body, refused.value)
    discord.make_old(C, made["id"])
    with pytest.raises(DiscordHTTPError) as old:
        await call(rest, "PATCH", f"/channels/{C}/messages/{made['id']}", v2("edit"))
    assert (old.value.status, old.value.code) == (400, 30046)
    discord.channel(C).access = False
    with pytest.raises(DiscordHTTPError) as hidden:
        await call(rest, "GET", f"/channels/{C}/messages")
    assert (hidden.value.status, hidden.value.code) == (403, 50001)
    bad = DiscordREST(discord.base_url, "wrong")
    with pytest.raises(DiscordHTTPError) as unauthorized:
        await bad.request("GET", "/users/@me")
    await bad.close()
    assert unauthorized.value.status == 401 and discord.invalid_requests == 2


async def test_a_channel_takes_five_message_calls_per_window_and_says_so() -> None:
    async with DiscordAPIEmulator(channels=[C], time_scale=0.4) as discord:  # a 2 s window
        rest = DiscordREST(discord.base_url, discord.token)
        try:
            await five_calls_then_429(discord, rest)
        finally:
            await rest.close()


async def five_calls_then_429(discord: DiscordAPIEmulator, rest: DiscordREST) -> None:
    made = await call(rest, "POST", f"/channels/{C}/messages", {"content": "0"})
    for i in range(1, 5):
        await call(rest, "PATCH", f"/channels/{C}/messages/{made['id']}", {"content": str(i)})
    headers = discord.calls[-1].headers
    assert headers["X-RateLimit-Limit"] == "5" and headers["X-RateLimit-Remaining"] == "0"
    assert 0 < float(headers["X-RateLimit-Reset-After"]) <= 2.0 and headers["X-RateLimit-Bucket"]
    with pytest.raises(RateLimited) as held:  # the client's own bucket, from the headers
        await call(rest, "PATCH", f"/channels/{C}/messages/{made['id']}", {"content": "5"})
    assert not held.value.sent and 0 < held.value.retry_after <= 2.0
    fresh = DiscordREST(discord.base_url, discord.token)  # knows no bucket: Discord answers 429
    with pytest.raises(RateLimited) as refused:
        await fresh.request("PATCH", "/m", major=C, path=f"/channels/{C}/messages/{made['id']}", json={"content": "5"})
    await fresh.close()
    assert refused.value.sent and not refused.value.is_global and isinstance(refused.value.retry_after, float)
    assert discord.calls[-1].status == 429
    await asyncio.sleep(held.value.retry_after)
    await call(rest, "PATCH", f"/channels/{C}/messages/{made['id']}", {"content": "6"})
    assert discord.channel(C).messages[made["id"]].content == "6"


async def test_the_global_limit_and_injected_429s() -> None:
    async with DiscordAPIEmulator(channels=[C], time_scale=1.0) as discord:  # 50 calls in a second
        rest = DiscordREST(discord.base_url, discord.token)
        try:
            await global_limits(discord, rest)
        finally:
            await rest.close()


async def global_limits(discord: DiscordAPIEmulator, rest: DiscordREST) -> None:
    discord.fail_next("get_messages", 429, retry_after=0.5, is_global=True)
    with pytest.raises(RateLimited) as injected:
        await call(rest, "GET", f"/channels/{C}/messages")
    assert injected.value.is_global and injected.value.retry_after == 0.5
    with pytest.raises(RateLimited) as flooded:
        for _ in range(60):
            await rest.request("GET", "/users/@me")
    assert flooded.value.is_global and flooded.value.sent
    assert sum(1 for c in discord.calls if c.route == "me" and c.status == 200) == 50  # an injected 429 takes none


async def test_interactions_are_signed_with_the_emulators_key(emulator) -> None:
    discord, _ = emulator
    stamp_body = discord.sign(b'{"type":1}', "1700000000")
    key = VerifyKey(bytes.fromhex(discord.public_key))
    key.verify(b'1700000000{"type":1}', bytes.fromhex(stamp_body["X-Signature-Ed25519"]))
    with pytest.raises(ValueError, match="not registered"):
        await discord.slash_command("http://127.0.0.1:9/x", "follow t1")


def test_breaker_trips_on_a_storm() -> None:
    # A channel that refuses the bot is the shared worker's to pause (test_discord_access.py).
    now = [0.0]
    breaker = Breaker(BreakerSettings(limit=3, window=10, pause=Backoff(5, 600), scale=1.0), clock=lambda: now[0])
    for _ in range(2):
        breaker.answered(403)
    breaker.answered(200)
    assert breaker.paused_for() == 0
    breaker.answered(429)
    assert breaker.paused_for() == 5
    now[0] = 5.0
    assert breaker.paused_for() == 0
    for _ in range(3):
        breaker.answered(401)
    assert breaker.paused_for() == 10  # tripping again doubles the pause
    now[0] = 40.0
    breaker.hold(2.5)
    assert breaker.paused_for() == 2.5


# --- the command line -------------------------------------------------------------------


async def read_until(stream: asyncio.StreamReader, pattern: str, seen: list[str], timeout: float = 30) -> re.Match[str]:
    async def read() -> re.Match[str]:
        while line := await stream.readline():
            seen.append(line.decode())
            if found := re.search(pattern, "".join(seen)):
                return found
        raise AssertionError("".join(seen))

    return await asyncio.wait_for(read(), timeout)


def free_socket() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    sock.setblocking(False)
    return sock


async def run_cli(*args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_emulator_discord_types_slash_commands_signed_for_the_app(tmp_path: Path) -> None:
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/discord/interactions"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", "emulator", "discord", "--interactions", url,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    seen: list[str] = []
    server = None
    try:
        base = (await read_until(proc.stdout, r'apiBaseUrl = "(http://127\.0\.0\.1:\d+/api/v10)"', seen)).group(1)
        text = "".join(seen)
        token = re.search(r'token = "([^"]+)"', text).group(1)  # type: ignore[union-attr]
        key = re.search(r'publicKey = "([0-9a-f]{64})"', text).group(1)  # type: ignore[union-attr]
        app_id = re.search(r'applicationId = "(\d+)"', text).group(1)  # type: ignore[union-attr]
        config = tmp_path / "pc.toml"
        config.write_text(
            f'[channels.discord]\ntoken = "{token}"\napplicationId = "{app_id}"\npublicKey = "{key}"\n'
            f'apiBaseUrl = "{base}"\n'
        )
        status, out, err = await run_cli("discord", "register", "--config", str(config), "--guild", "100000000000000001")
        assert status == 0 and out.strip() == "registered /progresscast in server 100000000000000001", err
        typed: list[Invocation] = []

        async def handler(inv: Invocation) -> str | None:
            typed.append(inv)
            return f"Following {inv.args[0]} @everyone" if inv.args else None

        app = Starlette(routes=DiscordInteractions(key, handler).routes())
        started = asyncio.Event()
        server = asyncio.create_task(serve_app(app, sock, started=started))
        await started.wait()
        await read_until(proc.stdout, r"Type /progresscast commands", seen)
        proc.stdin.write(b"/progresscast follow ticket-4821\n")
        await proc.stdin.drain()
        await read_until(proc.stdout, r"ⓘ Following ticket-4821 @everyone", seen)
        assert typed == [
            Invocation(
                platform="discord", destination=C, thread="0", user="400000000000000001", word="follow",
                args=("ticket-4821",), group=True,
            )
        ]
        assert await typed[0].may_change()  # the emulator's member holds every permission
        proc.stdin.write(b"help\n")
        await proc.stdin.drain()
        await read_until(proc.stdout, r"\(the app said nothing\)", seen)
        proc.stdin.write(b"nosuch thing\n")
        await proc.stdin.drain()
        await read_until(proc.stdout, r"has no subcommand 'nosuch'", seen)
    finally:
        proc.kill()
        await proc.wait()
        if server is not None:
            server.cancel()


async def test_discord_register_without_settings_fails_in_one_line(tmp_path: Path) -> None:
    config = tmp_path / "pc.toml"
    config.write_text("")
    status, _, err = await run_cli("discord", "register", "--config", str(config))
    assert status == 2 and err.count("\n") == 1 and "channels.discord is not configured" in err
    config.write_text('[channels.discord]\ntoken = "t"\napplicationId = "123"\npublicKey = "' + "a" * 64 + '"\n')
    status, _, err = await run_cli("discord", "register", "--config", str(config))
    assert status == 2 and "applicationId" in err and "15-21 digits" in err


async def test_render_channel_discord_prints_the_payload_and_what_a_person_reads(tmp_path: Path) -> None:
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"plan": [{"step": "Ping @everyone", "status": "in_progress"}]}))
    status, out, _ = await run_cli("render", str(card), "--channel", "discord", "--format", "json")
    payload = json.loads(out)
    assert status == 0 and payload["params"]["flags"] == (1 << 15) | (1 << 12)
    assert payload["params"]["allowed_mentions"] == {"parse": []} and payload["fallback"]["params"]["content"]
    status, out, _ = await run_cli("render", str(card), "--channel", "discord", "--format", "text")
    assert status == 0 and "▶️ Ping @everyone" in out


async def test_the_console_prints_each_call_once_answered_in_arrival_order(emulator) -> None:
    """A call is recorded as it arrives, before its body is read: the console waits for
    it to be answered, and prints nothing after it until then."""
    discord, rest = emulator
    out = io.StringIO()
    console = DiscordConsole(discord, C, out)
    arriving = DiscordCall("create_message", C, {})
    discord.calls.append(arriving)  # arrived, its body not read yet
    made = await call(rest, "POST", f"/channels/{C}/messages", v2("hello"))
    console.catch_up()
    assert out.getvalue() == ""  # the newer call waits for the older one
    arriving.status, arriving.answered = 499, True  # its client went away: never applied
    console.catch_up()
    assert out.getvalue() == f"  ＋ the bot sends message {made['id']}:\n    │ hello\n"
