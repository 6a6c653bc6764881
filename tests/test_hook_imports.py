"""What an agent hook call imports, and the shortcuts that keep it small.

A hook is a new process on every agent event and most of its time is Python importing,
so the hook path must not pull in the server side (web framework, channels, renderers,
metrics) nor, without a config file, build the settings models; and a call served by
the warm hook server imports only the standard library. Checked here on what the
process really imported, not by timing it (bench/hook_bench.py times it).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agent_fixtures as fx
from conftest import HookServers
from progresscast.agents.hooks.context import HookSettings, hook_settings
from progresscast.config.settings import Settings
from progresscast.model.owners import Owner
from progresscast.store.embedded import ensure_embedded, is_running, socket_path, stop_embedded

# What the console script `progresscast` does (`from progresscast.cli import main;
# sys.exit(main())`), then the names of every module the process imported.
CONSOLE_SCRIPT = """
import json, os, sys
from progresscast.cli import main
try:
    main()
finally:
    with open(os.environ["IMPORTED_TO"], "w") as out:
        json.dump(sorted(sys.modules), out)
"""

NOT_ON_THE_HOOK_PATH = [
    "starlette", "uvicorn", "mcp", "a2a", "markdown_it", "jinja2", "bleach", "telegram", "slack_sdk",
    "httpx", "aiohttp", "prometheus_client",
    "progresscast.config.settings", "progresscast.gateway", "progresscast.render", "progresscast.channels",
    "progresscast.telegram", "progresscast.slack", "progresscast.agents.a2a", "progresscast.metrics",
    "progresscast.serve", "progresscast.agents.mcp_server", "progresscast.store.events",
]


def run_hook(tmp_path: Path, stdin: bytes, *args: str, env: dict[str, str] | None = None) -> tuple[list[str], str]:
    imported_to = tmp_path / "imported.json"
    done = subprocess.run(
        [sys.executable, "-c", CONSOLE_SCRIPT, "hook", *args],
        input=stdin, capture_output=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "PROGRESSCAST_CONFIG"} | {"IMPORTED_TO": str(imported_to)}
        | (env or {}),
    )
    assert done.returncode == 0, done.stderr
    return json.loads(imported_to.read_text()), done.stderr.decode()


def heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == name or m.startswith(name + ".") for name in NOT_ON_THE_HOOK_PATH)]


@pytest.mark.parametrize(
    ("harness", "events"),
    [
        ("claude-code", [fx.CLAUDE_TODOWRITE_SESSION[1]]),
        ("gemini", [fx.GEMINI_SESSION[2]]),
        ("codex", fx.CODEX_TRANSCRIPT),
    ],
)
def test_a_hook_call_imports_only_what_a_hook_needs(
    harness: str, events: list[dict[str, Any]], redis_url: str, tmp_path: Path
) -> None:
    stdin = b"".join(json.dumps(e).encode() + b"\n" for e in events)
    modules, err = run_hook(tmp_path, stdin, harness, "--redis", redis_url)
    assert err == ""  # the hook did its work (a failure would be said on stderr)
    assert "progresscast.store.cards" in modules  # it did reach the store
    assert heavy(modules) == []


def test_a_served_call_imports_neither_redis_nor_pydantic_nor_asyncio(
    hook_servers: HookServers, redis_url: str, tmp_path: Path
) -> None:
    # What a call costs once this user's warm hook server runs: the standard library.
    from test_hook_server import hook, warm
    from test_hooks import plan_of, view_of

    warm(hook_servers, tmp_path, redis_url)
    for harness, event in [("claude-code", fx.CLAUDE_TODOWRITE_SESSION[1]), ("gemini", fx.GEMINI_SESSION[2])]:
        call = hook(tmp_path, harness, event, "--redis", redis_url)
        assert call.status == 0 and call.err == b""
        loaded = [m for m in call.modules if m.split(".")[0] in ("redis", "pydantic", "asyncio")]
        assert loaded == [] and "progresscast.store" not in call.modules
    assert plan_of(view_of(redis_url, Owner("main", fx.CLAUDE_SESSION))) is not None  # the server did the work


def test_with_a_config_file_the_hook_reads_it(redis_url: str, tmp_path: Path) -> None:
    config = tmp_path / "progresscast.toml"
    config.write_text('[agents]\ndefault = "research"\nknown = ["research"]\n')
    stdin = json.dumps(fx.CLAUDE_TODOWRITE_SESSION[1]).encode()
    modules, err = run_hook(tmp_path, stdin, "claude-code", "--redis", redis_url, env={"PROGRESSCAST_CONFIG": str(config)})
    assert err == "" and "progresscast.config" in modules
    _, err = run_hook(tmp_path, stdin, "claude-code", "--redis", redis_url, "--agent", "main",
                      env={"PROGRESSCAST_CONFIG": str(config)})
    assert "--agent: 'main' is not a configured agent" in err


def test_the_hooks_defaults_are_the_configs_defaults() -> None:
    defaults = Settings()
    assert hook_settings(None) == HookSettings(
        defaults.store.url, defaults.store.shards, defaults.agents.known_set, defaults.agents.default
    )


def test_the_embedded_redis_is_started_again_over_a_stale_socket(tmp_path: Path) -> None:
    # A server that died leaves its socket file: the liveness probe (a bare PING) must
    # see that nobody answers there and start a new server.
    home = tmp_path / "home"
    home.mkdir()
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(socket_path(home)))
    assert socket_path(home).exists() and not is_running(home)
    try:
        url = ensure_embedded(home)
        assert is_running(home) and ensure_embedded(home) == url
    finally:
        stop_embedded(home)
    assert not is_running(home)
