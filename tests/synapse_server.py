"""The session's Synapse homeserver for the Matrix tests (`progresscast.testing.synapse`),
started once per test session.

If Synapse cannot be imported or does not come up, the tests that need it are
skipped with the reason (or fail, with PROGRESSCAST_REQUIRE_SYNAPSE set).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from progresscast.testing.synapse import SERVER_NAME, Account, Synapse

REQUIRE_ENV = "PROGRESSCAST_REQUIRE_SYNAPSE"
"""Set (CI does): a Synapse that cannot start fails the tests instead of skipping them."""


@pytest.fixture(scope="session")
def synapse() -> Iterator[Synapse]:
    server = Synapse()
    try:
        server.start()
    except Synapse.Unavailable as exc:
        server.stop()
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"Synapse cannot run: {exc}")
        pytest.skip(f"Synapse cannot run here: {exc}")
    print(f"\nSynapse {server.url} answered {server.started_in:.1f} s after its start")
    yield server
    server.stop()


__all__ = ["SERVER_NAME", "Account", "Synapse", "synapse"]
