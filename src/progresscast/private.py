"""Directories only this user may enter: where sockets of ours live.

A socket in a shared directory under a predictable name can be put there first by
someone else, and whatever answers on it would be trusted. So a socket of ours (the
warm hook server's, the embedded Redis' when its home's path is too long for one)
lives in `$XDG_RUNTIME_DIR/progresscast`, else `/tmp/progresscast-<uid>`: made with
mode 0700, and used only while it is a real directory owned by this user that nobody
else may enter. Standard library only (every agent hook imports it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path


class UnsafeDirectory(Exception):
    """A directory that should be private to this user is not (one line for the user)."""


def runtime_path() -> Path:
    """Where this user's private runtime directory is (unchecked: see `runtime_dir`)."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    return Path(runtime) / "progresscast" if runtime else Path(f"/tmp/progresscast-{os.getuid()}")


def runtime_dir(*, create: bool) -> Path:
    """This user's private runtime directory, checked (see the module); `create` makes it
    when missing. Raises OSError, UnsafeDirectory."""
    path = runtime_path()
    if create:
        os.makedirs(path, mode=0o700, exist_ok=True)
    check_private(path)
    return path


def check_private(path: Path) -> None:
    """Raise UnsafeDirectory unless `path` itself (not a symbolic link to one) is a
    directory owned by this user that no one else may enter."""
    found = os.lstat(path)
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.getuid() or found.st_mode & 0o077:
        raise UnsafeDirectory(
            f"{path} is not a directory private to this user (mode {stat.filemode(found.st_mode)}, "
            f"owner uid {found.st_uid})"
        )


__all__ = ["UnsafeDirectory", "check_private", "runtime_dir", "runtime_path"]
