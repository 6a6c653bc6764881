"""`[channels.discord]`: what it takes, and the one-line errors for what it refuses."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from progresscast.config.base import Access
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings

KEY = "ab" * 32
DOCS = Path(__file__).resolve().parent.parent / "docs" / "discord.md"


def load(tmp_path: Path, text: str):  # type: ignore[no-untyped-def]
    path = tmp_path / "pc.toml"
    path.write_text(text)
    return load_settings(path)


def test_a_full_discord_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "tok")
    monkeypatch.setenv("DISCORD_PUBLIC_KEY", KEY)
    settings = load(
        tmp_path,
        '[channels.discord]\ntoken = "env:DISCORD_BOT_TOKEN"\napplicationId = 123456789012345678\n'
        'publicKey = "env:DISCORD_PUBLIC_KEY"\naccess = "open"\nrichMessages = false\n'
        "[channels.discord.streaming]\nmode = \"partial\"\n"
        '[[channels.discord.channels]]\nid = 200000000000000001\nsessions = ["shop-*"]\nfollow = ["shop-1"]\n'
        'mode = "block"\n',
    )
    discord = settings.channels.discord
    assert discord is not None
    assert (discord.token, discord.applicationId, discord.publicKey) == ("tok", "123456789012345678", KEY)
    assert discord.apiBaseUrl == "https://discord.com/api/v10" and discord.access is Access.open
    table = discord.table_of("200000000000000001")
    assert table is not None and table.sessions == ["shop-*"] and table.follow == ["shop-1"]


def test_access_pairs_by_default_and_an_allow_list_means_allowlist(tmp_path: Path) -> None:
    plain = load(tmp_path, '[channels.discord]\n[[channels.discord.channels]]\nid = "200000000000000001"\n')
    assert plain.channels.discord is not None and plain.channels.discord.access_mode is Access.pairing
    listed = load(tmp_path, "[channels.discord]\nallowedChannels = [200000000000000001]\n")
    assert listed.channels.discord is not None and listed.channels.discord.access_mode is Access.allowlist
    assert listed.channels.discord.allow_list == {"200000000000000001"}


def test_every_config_example_in_the_discord_page_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_BOT_TOKEN", "tok")
    monkeypatch.setenv("DISCORD_PUBLIC_KEY", KEY)
    blocks = [m.group(2) for m in re.finditer(r"(?ms)^( *)```toml\n(.*?)^\1```", DOCS.read_text())]
    assert len(blocks) >= 2
    loaded = [load(tmp_path, textwrap.dedent(block)).channels.discord for block in blocks]
    # The settings example says `access = "pairing"`, as the tables' default is.
    assert any(d is not None and d.access is Access.pairing for d in loaded)


def test_access_pairing_is_taken_as_written(tmp_path: Path) -> None:
    paired = load(tmp_path, '[channels.discord]\naccess = "pairing"\nallowedChannels = ["200000000000000001"]\n')
    assert paired.channels.discord is not None and paired.channels.discord.access_mode is Access.pairing


@pytest.mark.parametrize(
    ("table", "says"),
    [
        ('token = "t"\npublicKey = "' + KEY + '"', "channels.discord: applicationId is required when token is set"),
        ('token = "t"\napplicationId = "123456789012345678"', "publicKey is required when token is set"),
        ('publicKey = "xyz"', "channels.discord.publicKey: must be the application's public key: 64 hex digits"),
        ('access = "everyone"', "channels.discord.access"),
        ('allowedChannels = ["general"]', "channels.discord.allowedChannels"),
        ('[[channels.discord.channels]]\nid = "general"', "channels.discord.channels[0].id"),
        ('apiBaseUrl = "discord.com"', "channels.discord.apiBaseUrl: must be an http(s) URL"),
    ],
)
def test_refused_settings_name_the_field(tmp_path: Path, table: str, says: str) -> None:
    with pytest.raises(ConfigError) as refused:
        load(tmp_path, "[channels.discord]\n" + table + "\n")
    assert says in str(refused.value) and "\n" not in str(refused.value)
