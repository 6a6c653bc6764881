"""Which store each running `serve` of this user uses, so that any other command can
tell when it uses another one (a shell without the same PROGRESSCAST_HOME, --redis or
config would otherwise write, quietly, where nothing serves).

A `serve` leaves a small file in this user's private runtime directory (private.py)
while it runs — `serve-<pid>.json`: its pid, its store's URL and its config — and removes
it when it ends; a file whose process is gone is stale and ignored (and removed).
Standard library only."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..private import UnsafeDirectory, runtime_dir


@dataclass(frozen=True)
class Serving:
    pid: int
    store: str
    config: str | None


def _record(pid: int) -> Path:
    return runtime_dir(create=True) / f"serve-{pid}.json"


@contextlib.contextmanager
def announced(store: str, config: str | None) -> Iterator[None]:
    """This process serves `store` for the block (an unusable runtime directory only
    means other commands cannot tell)."""
    pid = os.getpid()
    path: Path | None
    try:
        path = _record(pid)
        temporary = path.with_suffix(".tmp")
        temporary.write_text(json.dumps({"pid": pid, "store": store, "config": config}))
        temporary.replace(path)
    except (OSError, UnsafeDirectory):
        path = None
    try:
        yield
    finally:
        if path is not None:
            path.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process took the pid over
        return False
    return True


def running() -> list[Serving]:
    """Every `serve` of this user that runs now, oldest pid first."""
    try:
        found = sorted(runtime_dir(create=False).glob("serve-*.json"))
    except (OSError, UnsafeDirectory):
        return []
    out: list[Serving] = []
    for path in found:
        try:
            data = json.loads(path.read_text())
            serving = Serving(int(data["pid"]), str(data["store"]), data.get("config"))
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if _alive(serving.pid):
            out.append(serving)
        else:
            path.unlink(missing_ok=True)
    return sorted(out, key=lambda s: s.pid)


__all__ = ["Serving", "announced", "running"]
