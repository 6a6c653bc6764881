"""The collector's policy for long-running processes: start-up frozen, young cycles
collected less often, cycles still collected."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from progresscast import collector


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
