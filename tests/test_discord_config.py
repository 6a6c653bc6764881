"""`[channels.discord]`: what it takes, and the one-line errors for what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from progresscast.config.base import Access
from progresscast.config.errors import ConfigError
from progresscast.config.load import load_settings

KEY = "ab" * 32


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
