"""The questions file as a file: what tells one version of it from another (:func:`file_identity`),
and the temporary files a killed save left beside it (:func:`remove_leftovers`)."""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path


def file_identity(path: Path) -> tuple[int, ...] | None:
    """The file's :func:`status_identity` now; None when nothing is there (or it cannot be read)."""
    try:
        return status_identity(os.stat(path))
    except OSError:
        return None


def status_identity(status: os.stat_result) -> tuple[int, ...]:
    """What tells one version of the file from another: a save replaces the file (a new inode),
    an editor that writes in place changes its size or times."""
    return status.st_dev, status.st_ino, status.st_size, status.st_mtime_ns, status.st_ctime_ns


def remove_leftovers(path: Path) -> tuple[str, ...]:
    """Remove the temporary files a killed save of this file left beside it: regular files
    named as :func:`tuner._io.files.write_atomically` names its own (``.NAME.8 hex.tmp``, beside
    the file a link leads to), and nothing else. Called under the folder's lock, which every
    review's save holds: none of these is being written now."""
    target = Path(os.path.realpath(path))
    pattern = re.compile(rf"\.{re.escape(target.name)}\.[0-9a-f]{{8}}\.tmp")
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return ()
    for entry in entries:
        if pattern.fullmatch(entry.name) and entry.is_file(follow_symlinks=False):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(entry.path)
                removed.append(entry.name)
    return tuple(sorted(removed))

