"""One line on stderr when a command's store is not the one a running `serve` uses, nor
the one of the config in the current directory it did not read: a shell without the
same PROGRESSCAST_HOME, --redis or --config would otherwise write, quietly, where
nothing serves or reads."""

from __future__ import annotations

import sys
from pathlib import Path

from ..config.errors import ConfigError
from ..config.load import load_settings
from ..config.settings import Settings
from ..store.connections import redis_url
from ..store.serving import running

LOCAL_CONFIG = "progresscast.toml"
"""A config in the current directory by this name is one the user may have meant."""


def other_store(url: str, settings: Settings) -> str | None:
    """Why `url` may not be the store meant, or None."""
    serves = running()
    if serves and all(serve.store != url for serve in serves):
        serve = serves[0]
        config = f", config {serve.config}" if serve.config else ""
        return (
            f"this command used the store {url}, but the running `serve` (pid {serve.pid}{config}) uses {serve.store}"
        )
    local = Path(LOCAL_CONFIG)
    read = settings._source
    if not local.is_file() or (read is not None and Path(read).resolve() == local.resolve()):
        return None
    try:
        theirs = redis_url(None, load_settings(local), start=False)
    except ConfigError:
        return None  # not a config we can read: nothing to compare
    if theirs == url:
        return None
    return f"this command used the store {url}, but ./{LOCAL_CONFIG} (not read: no --config) uses {theirs}"


def say_other_store(url: str, settings: Settings) -> None:
    why = other_store(url, settings)
    if why is not None:
        print(f"progresscast: note: {why}", file=sys.stderr)


__all__ = ["LOCAL_CONFIG", "other_store", "say_other_store"]
