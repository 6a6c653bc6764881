"""How a long-running process of ours uses Python's cyclic garbage collector.

Everything we allocate is freed by reference counting as soon as it is dropped; the
cyclic collector is only for the rare cycle (an exception with its traceback, a task
and its callbacks). With CPython's default thresholds it runs after every 700 net
allocations and walks the young objects, every tenth run the middle generation, and
now and then everything: at 10,000 followed chats `serve` spent about a third of its
CPU in it (measured with `gc.callbacks`: 6.6 s of 23 s while the first drafts went
out), none of it finding garbage worth the walk. Two things cut that to under 5 %:

- what start-up built (modules, the config, templates) is frozen: the collector
  never walks it again;
- a young generation of `YOUNG` objects instead of 700: ten times fewer walks, each
  of objects that mostly died by reference counting before it came.

A cycle still goes at the next walk of its generation: at most `YOUNG` allocations
later, not never.
"""

from __future__ import annotations

import gc

YOUNG = 10_000
"""Net allocations between two walks of the young generation (CPython's default: 700)."""


def settle() -> None:
    """Start-up is over: freeze what it made and collect young cycles less often. Called
    once per process, after its imports and configuration, before it serves."""
    gc.unfreeze()  # what the command line froze (`cli.main`): walked once more, with the rest
    gc.collect()  # start-up's own garbage goes now, not frozen with the rest
    gc.freeze()
    _, middle, old = gc.get_threshold()
    gc.set_threshold(YOUNG, middle, old)


__all__ = ["YOUNG", "settle"]
