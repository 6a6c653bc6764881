"""`progresscast doctor` as an operator runs it, against the Bot API and Slack emulators:
one line per check with what to do, exit 0 when all hold (warnings included), 1 when
one fails, naming the setting."""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import httpx
import pytest

from progresscast.store.embedded import ensure_embedded, stop_embedded
from progresscast.testing import BotAPIEmulator, SlackAPIEmulator

GOOD = "a-gateway-token-of-32-characters"
CHANNEL = "C0TEST0001"


async def doctor(tmp_path: Path, config: str | None, **env: str) -> tuple[int, list[str]]:
    args = ["doctor"]
    if config is not None:
        path = tmp_path / "progresscast.toml"
        path.write_text(config)
        args += ["--config", str(path)]
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("PROGRESSCAST_", "TELEGRAM_", "SLACK_"))}
    # As after `make install`: agents find `progresscast` on PATH (the venv's, here).
    clean["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{clean.get('PATH', '')}"
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "progresscast.cli", *args, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE, env={**clean, "PROGRESSCAST_HOME": str(tmp_path / "home"), **env},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert err == b"", err.decode()
    return proc.returncode or 0, out.decode().splitlines()


def line(lines: list[str], setting: str) -> str:
    found = [one for one in lines if one[6:].startswith(f"{setting}:")]
    assert len(found) == 1, (setting, lines)
    return found[0]


@pytest.fixture
async def services() -> AsyncIterator[tuple[BotAPIEmulator, SlackAPIEmulator]]:
    async with BotAPIEmulator() as api, SlackAPIEmulator(channels=[CHANNEL]) as slack:
        yield api, slack


def config(api: BotAPIEmulator, slack: SlackAPIEmulator, redis_url: str, *, listen: str = "127.0.0.1:8787",
           token: str = GOOD, telegram: str = "", extra: str = "") -> str:
    return f"""
[store]
url = "{redis_url}"
[gateway]
listen = "{listen}"
[[gateway.tokens]]
token = "{token}"
scopes = ["operator.read", "operator.write"]
sessions = ["shop-*"]
[channels.telegram]
token = "env:TELEGRAM_BOT_TOKEN"
apiBaseUrl = "{api.base_url}"
allowedChats = [4242]
{telegram}
[channels.slack]
token = "env:SLACK_BOT_TOKEN"
signingSecret = "s3cret"
apiBaseUrl = "{slack.base_url}"
allowedChannels = ["{CHANNEL}"]
{extra}
"""


@pytest.fixture
def redis_url(tmp_path: Path) -> Iterator[str]:
    home = tmp_path / "redis-home"
    yield ensure_embedded(home)
    stop_embedded(home)


async def test_all_good_is_exit_0_with_a_line_per_check(
    tmp_path: Path, services: tuple[BotAPIEmulator, SlackAPIEmulator], redis_url: str
) -> None:
    api, slack = services
    code, lines = await doctor(tmp_path, config(api, slack, redis_url), TELEGRAM_BOT_TOKEN=api.token,
                               SLACK_BOT_TOKEN=slack.token)
    assert code == 0, lines
    assert all(one.startswith("ok    ") for one in lines), lines
    assert line(lines, "config").endswith("progresscast.toml loads")
    assert f"Redis at {redis_url} answers" in line(lines, "store.url")
    assert "bot @progresscast_test_bot (id 123456)" in line(lines, "channels.telegram.token")
    assert "no webhook: updates by long polling" in line(lines, "channels.telegram.webhook.url")
    assert "workspace" in line(lines, "channels.slack.token")
    assert line(lines, "gateway.tokens[0].token").endswith(
        "32 characters; operator.read and operator.write on sessions shop-*")
    assert "allowlist (not set: what the config implies): only the 1 destinations of channels.telegram.allowedChats" \
        in line(lines, "channels.telegram.access")
    assert "channels.slack.access" in "\n".join(lines)


async def test_refused_tokens_fail_naming_their_settings(
    tmp_path: Path, services: tuple[BotAPIEmulator, SlackAPIEmulator], redis_url: str
) -> None:
    api, slack = services
    code, lines = await doctor(tmp_path, config(api, slack, redis_url), TELEGRAM_BOT_TOKEN="123456:wrong",
                               SLACK_BOT_TOKEN="xoxb-wrong")
    assert code == 1, lines
    telegram = line(lines, "channels.telegram.token")
    assert telegram.startswith("FAIL") and "the Bot API refused the token (Unauthorized)" in telegram, telegram
    assert "@BotFather" in telegram and "123456:wrong" not in "\n".join(lines)  # never the token itself
    assert line(lines, "channels.slack.token").startswith("FAIL  channels.slack.token: Slack says invalid_auth")


async def test_a_webhook_elsewhere_fails_and_one_not_set_yet_warns(
    tmp_path: Path, services: tuple[BotAPIEmulator, SlackAPIEmulator], redis_url: str
) -> None:
    api, slack = services
    ours = "https://progresscast.example.org/telegram/hook-1"
    hooked = config(api, slack, redis_url, telegram=f'[channels.telegram.webhook]\nurl = "{ours}"\nsecretToken = "s"\n')
    env = {"TELEGRAM_BOT_TOKEN": api.token, "SLACK_BOT_TOKEN": slack.token}
    code, lines = await doctor(tmp_path, hooked, **env)
    assert code == 0 and line(lines, "channels.telegram.webhook.url").startswith("warn"), lines
    async with httpx.AsyncClient() as http:  # another deployment took the bot
        await http.post(f"{api.base_url}{api.token}/setWebhook", json={"url": "https://elsewhere.example.com/hook"})
    code, lines = await doctor(tmp_path, hooked, **env)
    found = line(lines, "channels.telegram.webhook.url")
    assert code == 1 and found.startswith("FAIL") and "https://elsewhere.example.com/hook, not " + ours in found
    code, lines = await doctor(tmp_path, config(api, slack, redis_url), **env)  # this config polls
    assert code == 1 and "the config polls, but Telegram posts" in line(lines, "channels.telegram.webhook.url")


async def test_a_short_gateway_token_warns_on_loopback_and_fails_beyond_it(
    tmp_path: Path, services: tuple[BotAPIEmulator, SlackAPIEmulator], redis_url: str
) -> None:
    api, slack = services
    env = {"TELEGRAM_BOT_TOKEN": api.token, "SLACK_BOT_TOKEN": slack.token}
    code, lines = await doctor(tmp_path, config(api, slack, redis_url, token="short-token"), **env)
    assert code == 0 and line(lines, "gateway.tokens[0].token").startswith("warn  gateway.tokens[0].token: 11 characters")
    code, lines = await doctor(tmp_path, config(api, slack, redis_url, token="short-token", listen="0.0.0.0:8787"), **env)
    found = line(lines, "gateway.tokens[0].token")
    assert code == 1 and found.startswith("FAIL") and "listens on 0.0.0.0:8787" in found and "16 or more" in found


async def test_open_access_warns_and_no_list_means_pairing(
    tmp_path: Path, services: tuple[BotAPIEmulator, SlackAPIEmulator], redis_url: str
) -> None:
    api, slack = services
    env = {"TELEGRAM_BOT_TOKEN": api.token, "SLACK_BOT_TOKEN": slack.token}
    text = config(api, slack, redis_url).replace("allowedChats = [4242]\n", 'access = "open"\n')
    code, lines = await doctor(tmp_path, text, **env)
    found = line(lines, "channels.telegram.access")
    assert code == 0 and found.startswith("warn  channels.telegram.access: open: any destination may follow"), found
    code, lines = await doctor(tmp_path, config(api, slack, redis_url).replace("allowedChats = [4242]\n", ""), **env)
    found = line(lines, "channels.telegram.access")
    assert code == 0 and found.startswith("ok    channels.telegram.access: pairing (not set"), found


async def test_a_config_that_does_not_load_is_a_failed_check(tmp_path: Path) -> None:
    code, lines = await doctor(tmp_path, "[gateway]\nlisten = 8787\n")
    assert code == 1 and len(lines) == 1 and lines[0].startswith("FAIL  config: config "), lines
    assert "gateway.listen" in lines[0]


async def test_an_unset_secret_and_an_unreachable_redis_fail(tmp_path: Path) -> None:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, lines = await doctor(tmp_path, f'[store]\nurl = "redis://:pw@127.0.0.1:{port}"\n[[gateway.tokens]]\n'
                               'token = "env:PROGRESSCAST_TOKEN"\n')
    assert code == 1, lines
    assert line(lines, "gateway.tokens[0].token").startswith(
        "FAIL  gateway.tokens[0].token: the environment variable PROGRESSCAST_TOKEN is not set")
    redis = line(lines, "store.url")
    assert redis.startswith(f"FAIL  store.url: Redis at redis://:***@127.0.0.1:{port} does not answer"), redis


async def test_the_embedded_home_is_checked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    ensure_embedded(home)
    try:
        code, lines = await doctor(tmp_path, None)
        assert code == 0 and line(lines, "PROGRESSCAST_HOME") == f"ok    PROGRESSCAST_HOME: {home} is private to this user"
        assert "answers" in line(lines, "store")
        (home / "redis.log").chmod(0o644)
        code, lines = await doctor(tmp_path, None)
        assert code == 1 and "others may read redis.log" in line(lines, "PROGRESSCAST_HOME"), lines
        home.chmod(0o777)
        code, lines = await doctor(tmp_path, None)
        assert code == 1 and "others may write to" in line(lines, "PROGRESSCAST_HOME"), lines
    finally:
        home.chmod(0o700)
        stop_embedded(home)


async def test_a_command_agents_cannot_find_is_said(tmp_path: Path) -> None:
    bare = tmp_path / "bin"
    bare.mkdir()
    code, lines = await doctor(tmp_path, None, PATH=str(bare))
    venv = Path(sys.executable).parent / "progresscast"
    assert code == 0 and line(lines, "command") == (
        "warn  command: agents' hooks and MCP entries run `progresscast`; it is not on PATH: "
        f"run make install or use {os.path.abspath(venv)}"
    )
    code, lines = await doctor(tmp_path, None, PATH=f"{bare}:{venv.parent}")
    assert line(lines, "command") == f"ok    command: progresscast is {venv} (what agents' hooks and MCP entries run)"
