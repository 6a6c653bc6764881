from __future__ import annotations

from pathlib import Path

import pytest

from progresscast.config.base import Access, Mode
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings

ROOT = Path(__file__).parents[1]


def test_example_config_loads_and_reads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PROGRESSCAST_TOKEN", "s3cret")
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:abc")
    settings = load_settings(ROOT / "config" / "progresscast.toml")
    assert settings.agents.known_set == {"main", "research"}
    assert settings.gateway.tokens[0].token == "s3cret"
    assert settings.gateway.host_port == ("127.0.0.1", 8787)
    telegram = settings.channels.telegram
    assert telegram.token == "123:abc" and telegram.streaming.mode is Mode.progress
    assert telegram.streaming.progress.maxLines == 8


def test_bad_config_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text("[channels.telegram.streaming]\nmode = 'loud'\n")
    with pytest.raises(ConfigError, match="channels.telegram.streaming.mode"):
        load_settings(path)
    path.write_text("[agents]\ndefault = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings(path)


@pytest.mark.parametrize("agent", ["re:search", "a}b", "", "x y"])
def test_agent_ids_that_would_break_keys_are_refused(tmp_path: Path, agent: str) -> None:
    path = tmp_path / "agents.toml"
    path.write_text(f'[agents]\nknown = ["main", "{agent}"]\n')
    with pytest.raises(ConfigError, match="agents.known"):
        load_settings(path)


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[channels.telegram]\nrichMessage = true\n",
         "unknown setting `channels.telegram.richMessage` — did you mean `richMessages`?"),
        ("[[gateway.tokens]]\ntokn = 'x'\n", "unknown setting `gateway.tokens[0].tokn` — did you mean `token`?"),
        ("[channels.telegram.streaming.progress]\nmaxLine = 5\n",
         "unknown setting `channels.telegram.streaming.progress.maxLine` — did you mean `maxLines`?"),
        ("[storage]\nurl = 'redis://x'\n", "unknown setting `storage`"),
        ("[[gateway.tokens]]\ntoken = 'x'\nscopes = ['read']\n",
         "gateway.tokens[0].scopes: 'read' is not a scope; the scopes are operator.read, operator.write, operator.answer, operator.admin"),
        ("[channels.telegram]\napiBaseUrl = 'https://api.telegram.org/'\n",
         "channels.telegram.apiBaseUrl: 'https://api.telegram.org/' must be the Bot API's URL ending in /bot"),
        ("[gateway]\nlisten = '8787'\n", "gateway.listen: '8787' must read host:port"),
        ("[[gateway.tokens]]\nscopes = []\n", "gateway.tokens[0].token: is required"),
    ],
)
def test_config_mistakes_are_named_in_a_users_words(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "progresscast.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError) as info:
        load_settings(path)
    assert str(info.value).startswith(f"config {path}: {message}"), str(info.value)


def test_unset_env_secrets_are_named_only_when_required(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PC_TEST_UNSET", raising=False)
    monkeypatch.setenv("PC_TEST_SET", "123:abc")
    path = tmp_path / "progresscast.toml"
    path.write_text("[[gateway.tokens]]\ntoken = 'env:PC_TEST_UNSET'\n[channels.telegram]\ntoken = 'env:PC_TEST_SET'\n")
    settings = load_settings(path)  # card commands do not need the secrets
    assert settings.env_name("channels.telegram.token") == "PC_TEST_SET"
    with pytest.raises(ConfigError, match=r"gateway.tokens\[0\].token: the environment variable PC_TEST_UNSET is not set"):
        settings.require_env()
    monkeypatch.setenv("PC_TEST_UNSET", "s3cret")
    load_settings(path).require_env()


def test_the_config_is_found_through_PROGRESSCAST_CONFIG(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "elsewhere.toml"
    path.write_text("[agents]\nknown = ['main', 'research']\n")
    monkeypatch.setenv("PROGRESSCAST_CONFIG", str(path))
    assert load_settings().agents.known_set == {"main", "research"}
    assert load_settings(ROOT / "config" / "progresscast.toml").gateway.listen == "127.0.0.1:8787"  # --config wins


def test_preview_checklist_lines_default_to_max_lines(tmp_path: Path) -> None:
    from progresscast.channels.chat.destinations import render_settings
    from progresscast.channels.state.prefs import ChatPrefs

    path = tmp_path / "c.toml"
    path.write_text(
        "[channels.telegram.streaming.progress]\nmaxLines = 5\n"
        "[channels.telegram.streaming.partial]\nchecklistLines = 2\n"
    )
    telegram = load_settings(path).channels.telegram
    assert telegram is not None
    streaming = telegram.streaming
    assert streaming.checklist_lines(Mode.partial) == 2
    assert streaming.checklist_lines(Mode.block) == 5  # unset: progress.maxLines
    assert streaming.checklist_lines(Mode.progress) == 5
    assert render_settings(telegram, 1, ChatPrefs(mode=Mode.partial)).checklistLines == 2
    assert render_settings(telegram, 1, ChatPrefs(mode=Mode.block)).checklistLines == 5


@pytest.mark.parametrize(
    "toml, field",
    [
        ("[channels.telegram.streaming.block]\nchecklistLines = 0\n", "channels.telegram.streaming.block.checklistLines"),
        ("[channels.telegram.streaming.progress]\nmaxLines = 0\n", "channels.telegram.streaming.progress.maxLines"),
        ("[channels.telegram.streaming.progress]\nmaxLineChars = 19\n", "channels.telegram.streaming.progress.maxLineChars"),
    ],
)
def test_line_limits_are_checked(tmp_path: Path, toml: str, field: str) -> None:
    path = tmp_path / "c.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=field):
        load_settings(path)
    path.write_text("[channels.telegram.streaming.progress]\nmaxLines = 1\n")
    assert load_settings(path).channels.telegram.streaming.progress.maxLines == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("toml", "message"),
    [
        ("[[channels.matrix.rooms]]\nid = '#shop:example.org'\n", r"channels.matrix.rooms\[0\].id: .*room id like !abcdef"),
        ("[channels.matrix]\nuserId = 'progresscast'\n", "channels.matrix.userId: .*Matrix user id"),
        ("[channels.matrix]\nhomeserver = 'matrix.example.org'\n", "channels.matrix.homeserver: must be an http"),
        ("[channels.matrix]\naccessToken = 'syt_x'\n", "channels.matrix: .*homeserver and userId are required"),
        ("[channels.matrix]\naccess = 'everyone'\n", "channels.matrix.access"),
        ("[channels.matrix]\ncallsPerSecond = 0\n", "channels.matrix.callsPerSecond"),
        ("[channels.matrix]\nrichMessages = true\n", "channels.matrix.richMessages: .*one look"),
        ("[[channels.matrix.rooms]]\nid = '!a:x'\nrichMessages = false\n", r"channels.matrix.rooms\[0\].richMessages"),
    ],
)
def test_matrix_mistakes_name_the_setting(tmp_path: Path, toml: str, message: str) -> None:
    path = tmp_path / "matrix.toml"
    path.write_text(toml)
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


def test_matrix_settings_read_the_token_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MATRIX_ACCESS_TOKEN", "syt_secret")
    path = tmp_path / "matrix.toml"
    path.write_text(
        "[channels.matrix]\nhomeserver = 'https://matrix.example.org/'\nuserId = '@progresscast:example.org'\n"
        "accessToken = 'env:MATRIX_ACCESS_TOKEN'\n[[channels.matrix.rooms]]\nid = '!abc:example.org'\n"
        "sessions = ['shop-*']\nfollow = ['shop-1']\nmode = 'partial'\n[[channels.matrix.rooms]]\nid = '!v12roomhash'\n"
    )
    matrix = load_settings(path).channels.matrix
    assert matrix is not None and matrix.accessToken == "syt_secret"
    assert matrix.homeserver == "https://matrix.example.org"
    assert matrix.access is None and matrix.access_mode is Access.pairing  # every platform's default
    table = matrix.table_of("!abc:example.org")
    assert table is not None and table.mode is Mode.partial and table.sessions == ["shop-*"]
