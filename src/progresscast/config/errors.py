"""`ConfigError` on its own, for the modules every agent hook imports (the embedded
Redis, the connections): importing config/settings.py builds every settings model, which is
a tenth of a hook call."""

from __future__ import annotations


class ConfigError(ValueError):
    """A config or environment mistake: reported on one line, exit status 2."""
