"""The config's errors on their own, for the modules every agent hook imports (the embedded
Redis, the connections): importing config/settings.py builds every settings model, which is
a tenth of a hook call."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config or environment mistake: reported on one line, exit status 2."""


class SettingError(ValueError):
    """A rule broken by a setting below the one being validated (`bots[1].token`)."""

    def __init__(self, where: str, rule: str) -> None:
        super().__init__(f"{where}: {rule}")
        self.where = where
        self.rule = rule
