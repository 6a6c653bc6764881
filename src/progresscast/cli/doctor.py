"""`progresscast doctor [--config FILE]`: is this installation fit to run, and safe?

One line per check — `ok`, `warn` or `FAIL`, the setting it is about, and what to do —
for: the config, the Redis in use (which one, and whether it answers), the embedded
Redis' home, whether `progresscast` (what agents' hooks and MCP entries run) is on
PATH, each Telegram bot token (`getMe`) and its webhook (`getWebhookInfo`), the
Slack token (`auth.test`), the Discord token (`/users/@me`), each gateway token's
strength and scope, and who may follow what in each channel. Exit status 0 when
nothing failed (warnings are printed but pass), 1 otherwise. Nothing is changed: the
embedded Redis is not started, no webhook is set.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import shutil
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

if TYPE_CHECKING:
    from ..config.settings import Settings
    from ..config.telegram import TelegramSettings

MIN_TOKEN = 16
"""Gateway tokens shorter than this are weak: a warning on loopback, a failure beyond it."""
TIMEOUT = 10.0
"""Seconds each service is given to answer."""


@dataclass(frozen=True)
class Finding:
    level: str
    """`ok`, `warn` or `FAIL`."""
    setting: str
    text: str

    def line(self) -> str:
        return f"{self.level:<4}  {self.setting}: {self.text}"


class Doctor:
    def __init__(self) -> None:
        self.findings: list[Finding] = []

    def say(self, level: str, setting: str, text: str) -> None:
        finding = Finding(level, setting, text)
        self.findings.append(finding)
        print(finding.line(), flush=True)

    @property
    def failed(self) -> bool:
        return any(f.level == "FAIL" for f in self.findings)


def add_doctor(commands: Any, common: argparse.ArgumentParser) -> None:
    from ..arguments import example

    commands.add_parser(
        "doctor", help="check the config, Redis, bot tokens, webhooks and access; changes nothing",
        parents=[common],
        description="One line per check, each with what to do. Exit status 0 when every check holds "
        "(warnings included), 1 otherwise.",
        epilog=example("progresscast doctor --config config/progresscast.toml"),
    )


def run_doctor(args: argparse.Namespace) -> int:
    """The exit status: 0 when nothing failed."""
    doctor = Doctor()
    settings = _config(doctor, args.config)
    if settings is not None:
        _command(doctor)
        asyncio.run(_checks(doctor, settings, args.redis))
    return 1 if doctor.failed else 0


def _config(doctor: Doctor, path: str | None) -> Settings | None:
    from ..config.errors import ConfigError
    from ..config.load import load_settings

    shown = path or os.environ.get("PROGRESSCAST_CONFIG")
    try:
        settings = load_settings(path)
    except ConfigError as exc:
        doctor.say("FAIL", "config", f"{exc} — fix it; nothing else can be checked until it loads")
        return None
    doctor.say("ok", "config", f"{shown} loads" if shown else "no config file: the built-in defaults")
    for setting, name in settings.unset_env():
        doctor.say("FAIL", setting, f"the environment variable {name} is not set — export {name}=…, or remove it")
    return settings


async def _checks(doctor: Doctor, settings: Settings, cli_url: str | None) -> None:
    await _redis(doctor, settings, cli_url)
    telegram = settings.channels.telegram
    if telegram is not None:
        for i, bot in enumerate(telegram.every_bot):
            where = "channels.telegram" if i == 0 else f"channels.telegram.bots[{i - 1}]"
            if bot.token:
                await _telegram(doctor, bot, where)
    slack = settings.channels.slack
    if slack is not None and slack.token:
        await _slack(doctor, slack.token, slack.apiBaseUrl)
    discord = settings.channels.discord
    if discord is not None and discord.token:
        await _discord(doctor, discord.token, discord.apiBaseUrl)
    _gateway(doctor, settings)
    _access(doctor, settings)


def _command(doctor: Doctor) -> None:
    """Agents start `progresscast` by name from their own environment: a hook or MCP
    entry whose command does not resolve fails there, out of sight."""
    found = shutil.which("progresscast")
    if found is not None:
        doctor.say("ok", "command", f"progresscast is {found} (what agents' hooks and MCP entries run)")
        return
    # The script beside this interpreter: the venv's, when run as .venv/bin/progresscast.
    here = os.path.abspath(os.path.join(os.path.dirname(sys.executable), "progresscast"))
    instead = here if os.access(here, os.X_OK) else "the absolute path of your progresscast"
    doctor.say(
        "warn", "command",
        f"agents' hooks and MCP entries run `progresscast`; it is not on PATH: run make install "
        f"or use {instead}",
    )


# --- Redis -------------------------------------------------------------------------------


def _redacted(url: str) -> str:
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.hostname or ""
    netloc = f"{parts.username or ''}:***@{host}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))


async def _redis(doctor: Doctor, settings: Settings, cli_url: str | None) -> None:
    from ..store.connections import URL_SCHEMES

    for source, url in (
        ("--redis", cli_url),
        ("PROGRESSCAST_REDIS_URL", os.environ.get("PROGRESSCAST_REDIS_URL")),
        ("store.url", settings.store.url),
    ):
        if not url:
            continue
        if not url.startswith(URL_SCHEMES):
            doctor.say("FAIL", source, f"{url!r} is not a Redis URL — it must start with {', '.join(URL_SCHEMES)}")
            return
        await _ping(doctor, source, url, settings)
        return
    await _embedded(doctor, settings)


async def _ping(doctor: Doctor, source: str, url: str, settings: Settings) -> None:
    from redis.exceptions import RedisError

    from ..store.connections import connect

    client = connect(url, settings)
    try:
        await asyncio.wait_for(client.ping(), TIMEOUT)
        info = await client.info("server")
        version = info.get("redis_version", "?") if isinstance(info, dict) else "?"
        doctor.say("ok", source, f"Redis at {_redacted(url)} answers (Redis {version})")
    except (RedisError, OSError, TimeoutError) as exc:
        doctor.say("FAIL", source, f"Redis at {_redacted(url)} does not answer ({type(exc).__name__}: {exc}) — "
                   "start it, or correct the URL")
    finally:
        await client.aclose()


async def _embedded(doctor: Doctor, settings: Settings) -> None:
    from ..config.errors import ConfigError
    from ..store.embedded import check_home, home_dir, is_running, socket_path

    home = home_dir()
    if not home.exists():
        doctor.say("ok", "PROGRESSCAST_HOME", f"the embedded Redis will live in {home} (made private, mode 0700, "
                   "by the first command that needs it)")
        return
    try:
        check_home(home)
    except ConfigError as exc:
        doctor.say("FAIL", "PROGRESSCAST_HOME", str(exc).removeprefix("PROGRESSCAST_HOME: "))
        return
    readable = [p.name for p in [home, *home.iterdir()] if p.lstat().st_mode & 0o077 and not p.is_symlink()]
    if readable:
        doctor.say("FAIL", "PROGRESSCAST_HOME", f"others may read {', '.join(sorted(readable))} in {home} — "
                   f"chmod -R go-rwx {home} (the next start of the embedded Redis does it too)")
    else:
        doctor.say("ok", "PROGRESSCAST_HOME", f"{home} is private to this user")
    try:
        running = is_running(home)
    except ConfigError as exc:
        doctor.say("FAIL", "PROGRESSCAST_HOME", str(exc).removeprefix("PROGRESSCAST_HOME: "))
        return
    if running:
        await _ping(doctor, "store", f"unix://{socket_path(home)}", settings)
    else:
        doctor.say("warn", "store", f"the embedded Redis of {home} is not running — any command starts it "
                   "(progresscast serve); or set store.url to a Redis server")


# --- chat services -----------------------------------------------------------------------


async def _telegram(doctor: Doctor, bot: TelegramSettings, where: str) -> None:
    import httpx

    assert bot.token is not None
    base = f"{bot.apiBaseUrl}{bot.token}"
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        try:
            me = (await http.post(f"{base}/getMe")).json()
            hook = (await http.post(f"{base}/getWebhookInfo")).json() if me.get("ok") else None
        except (httpx.HTTPError, ValueError) as exc:
            # (not the exception's text: it would show the URL, which holds the token)
            doctor.say("FAIL", f"{where}.token", f"cannot reach the Bot API at {bot.apiBaseUrl} "
                       f"({type(exc).__name__}) — check channels.telegram.apiBaseUrl and the network")
            return
    if not me.get("ok"):
        doctor.say("FAIL", f"{where}.token", f"the Bot API refused the token ({me.get('description', '?')}) — "
                   "copy the token @BotFather gave you")
        return
    user = me.get("result") or {}
    doctor.say("ok", f"{where}.token", f"bot @{user.get('username', '?')} (id {user.get('id', '?')})")
    info = (hook or {}).get("result") or {}
    _webhook(doctor, bot, where, str(info.get("url") or ""), info.get("last_error_message"))


def _webhook(doctor: Doctor, bot: TelegramSettings, where: str, current: str, error: object) -> None:
    wanted = bot.webhook.url if bot.webhook is not None else ""
    setting = f"{where}.webhook.url"
    if wanted and current == wanted:
        doctor.say("ok", setting, f"Telegram posts updates to {wanted}")
        if error:
            doctor.say("warn", setting, f"Telegram's last delivery failed: {error!s} — is the gateway reachable there?")
    elif wanted and not current:
        doctor.say("warn", setting, f"no webhook is set yet — progresscast serve sets {wanted} at start")
    elif wanted:
        doctor.say("FAIL", setting, f"Telegram posts this bot's updates to {current}, not {wanted} — another "
                   "deployment may use this bot; give each its own bot, or correct the URL")
    elif current:
        doctor.say("FAIL", setting, f"the config polls, but Telegram posts this bot's updates to {current} — another "
                   "deployment may use this bot (serve would delete its webhook); give each its own bot, or set "
                   f"[{where}.webhook]")
    else:
        doctor.say("ok", setting, "no webhook: updates by long polling, as the config says")


async def _slack(doctor: Doctor, token: str, base: str) -> None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            reply = (await http.post(f"{base}auth.test", headers={"Authorization": f"Bearer {token}"})).json()
    except (httpx.HTTPError, ValueError) as exc:
        doctor.say("FAIL", "channels.slack.token", f"cannot reach Slack at {base} ({type(exc).__name__}) — check "
                   "channels.slack.apiBaseUrl and the network")
        return
    if reply.get("ok"):
        doctor.say("ok", "channels.slack.token", f"app user {reply.get('user_id', '?')} in workspace "
                   f"{reply.get('team', '?')} ({reply.get('team_id', '?')})")
    else:
        doctor.say("FAIL", "channels.slack.token", f"Slack says {reply.get('error', '?')} — copy the Bot User OAuth "
                   "Token (xoxb-…) from the app's OAuth & Permissions page")


async def _discord(doctor: Doctor, token: str, base: str) -> None:
    import httpx

    try:
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            answer = await http.get(f"{base}/users/@me", headers={"Authorization": f"Bot {token}"})
    except httpx.HTTPError as exc:
        doctor.say("FAIL", "channels.discord.token", f"cannot reach Discord at {base} ({type(exc).__name__}) — check "
                   "channels.discord.apiBaseUrl and the network")
        return
    if answer.status_code == 200:
        doctor.say("ok", "channels.discord.token", f"bot {answer.json().get('username', '?')}")
    else:
        doctor.say("FAIL", "channels.discord.token", f"Discord answered {answer.status_code} — copy the bot token "
                   "from the developer portal's Bot page")


# --- the gateway and access --------------------------------------------------------------


def _loopback(listen: str) -> bool:
    host = listen.rpartition(":")[0].strip("[]") or "127.0.0.1"
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _gateway(doctor: Doctor, settings: Settings) -> None:
    gateway = settings.gateway
    local = _loopback(gateway.listen)
    if not gateway.tokens:
        doctor.say("warn", "gateway.tokens", "none: the gateway answers nothing that needs a token (no RPC, no "
                   "pages) — add a [[gateway.tokens]] table to the config, e.g. token = \"env:PROGRESSCAST_TOKEN\" "
                   "with PROGRESSCAST_TOKEN=$(openssl rand -hex 16) (config/progresscast.toml has one)")
    for i, token in enumerate(gateway.tokens):
        setting = f"gateway.tokens[{i}].token"
        if not token.token:
            continue  # unset variable: said with the config
        scope = f"{' and '.join(token.scopes)} on sessions {', '.join(token.sessions)}"
        if len(token.token) >= MIN_TOKEN:
            doctor.say("ok", setting, f"{len(token.token)} characters; {scope}")
        elif local:
            doctor.say("warn", setting, f"{len(token.token)} characters (fine on loopback, {gateway.listen}; "
                       f"too weak beyond it) — use {MIN_TOKEN} or more, e.g. openssl rand -hex 16; {scope}")
        else:
            doctor.say("FAIL", setting, f"{len(token.token)} characters, and the gateway listens on {gateway.listen}"
                       f" — use {MIN_TOKEN} or more, e.g. openssl rand -hex 16; {scope}")


def _access(doctor: Doctor, settings: Settings) -> None:
    from ..config.base import Access, PlatformSettings

    for name in ("telegram", "slack", "discord", "matrix"):
        platform = getattr(settings.channels, name, None)
        if not isinstance(platform, PlatformSettings):
            continue
        if not (getattr(platform, "token", None) or getattr(platform, "accessToken", None)):
            continue  # the adapter does not run
        setting = f"channels.{name}.access"
        implied = "" if platform.access is not None else " (not set: what the config implies)"
        mode = platform.access_mode
        if mode is Access.open:
            doctor.say("warn", setting, f"open{implied}: any destination may follow any session of any agent — use "
                       f"pairing, or an allowlist (channels.{name}.{platform.ALLOW_LIST}), on a bot others can reach")
        elif mode is Access.allowlist:
            doctor.say("ok", setting, f"allowlist{implied}: only the {len(platform.allow_list)} destinations of "
                       f"channels.{name}.{platform.ALLOW_LIST}, and the sessions its tables grant")
        else:
            doctor.say("ok", setting, f"pairing{implied}: a destination sees a session once granted it "
                       f"(progresscast pairing approve {name} CODE)")


def main_status(args: argparse.Namespace) -> None:
    status = run_doctor(args)
    sys.stdout.flush()
    raise SystemExit(status)


__all__ = ["add_doctor", "main_status", "run_doctor"]
