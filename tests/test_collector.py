"""The collector's policy: for long-running processes, start-up frozen, young cycles
collected less often, cycles still collected; for a command, no walks while it imports."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from progresscast import collector
from progresscast.store.embedded import stop_embedded


@pytest.fixture
def restored() -> Iterator[None]:
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


class Node:
    def __init__(self) -> None:
        self.other: Node | None = None


def test_settle_freezes_start_up_and_widens_the_young_generation(restored: None) -> None:
    made_at_start = [Node() for _ in range(100)]
    collector.settle()
    walked = {id(o) for o in gc.get_objects()}  # every generation the collector walks
    assert not any(id(n) in walked for n in made_at_start)
    assert gc.get_threshold()[0] == collector.YOUNG


def test_a_cycle_made_after_settle_is_still_collected(restored: None) -> None:
    collector.settle()
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None


def test_settle_collects_what_was_frozen_before_it(restored: None) -> None:
    """The command line freezes its start-up before the command runs; `serve` settles
    after: start-up's garbage (a cycle) still goes then."""
    a, b = Node(), Node()
    a.other, b.other = b, a
    gone = weakref.ref(a)
    del a, b
    gc.freeze()
    collector.settle()
    assert gone() is None


COUNTED = """
import atexit, gc, sys
walks = [0]
gc.callbacks.append(lambda phase, info: walks.__setitem__(0, walks[0] + (phase == "start")))
atexit.register(lambda: print(walks[0], file=sys.stderr))
sys.argv = ["progresscast", *sys.argv[1:]]
from progresscast.cli import main
main()
"""


def test_a_command_runs_no_collection_while_it_imports(tmp_path: Path) -> None:
    """A short command spends most of its CPU importing: the collector stays off until
    the command runs (124 walks of a `card get` with it on, against 9)."""
    home = tmp_path / "home"
    env = {**os.environ, "PROGRESSCAST_HOME": str(home)}
    done = subprocess.run(
        [sys.executable, "-c", COUNTED, "card", "get", "--session", "nobody"],
        env=env, capture_output=True, text=True, timeout=60,
    )
    try:
        assert (done.returncode, done.stdout) == (0, "null\n"), done.stderr  # no such card
        walks = int(done.stderr.strip().splitlines()[-1])
        assert walks < 30, done.stderr
    finally:
        stop_embedded(home)
