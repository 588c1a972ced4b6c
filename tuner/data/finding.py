"""Finding a corpus's files: a glob searched one component at a time below its fixed leading folder
(hidden entries skipped, links to folders not entered), and the ``include``/``exclude`` patterns
a file's relative path is matched against."""

from __future__ import annotations

import fnmatch
import glob as globlib
import os
from collections.abc import Sequence
from pathlib import Path

from ..errors import CorpusError


def matches(relative: str, pattern: str) -> bool:
    """Whether a file's relative path matches an ``include``/``exclude`` glob pattern: a
    pattern without ``/`` is matched against the file name, one with ``/`` against the whole
    relative path (``*`` may cross ``/`` there); a leading ``./`` or ``**/`` is ignored.

    >>> matches("reports/2024/q1.pdf", "*.pdf"), matches("reports/2024/q1.pdf", "reports/*")
    (True, True)
    >>> matches("reports/2024/q1.pdf", "drafts/*"), matches("notes.md", "**/notes.md")
    (False, True)
    """
    pattern = pattern.removeprefix("./")
    while pattern.startswith("**/"):
        pattern = pattern[3:]
    if "/" not in pattern:
        return fnmatch.fnmatchcase(relative.rsplit("/", 1)[-1], pattern)
    return fnmatch.fnmatchcase(relative, pattern)


def find_files(root: Path, pattern: Sequence[str]) -> set[Path]:
    """Files below ``root`` whose relative path matches ``pattern``, one glob component per
    item (``"**"``: any number of folders, none included).

    Hidden entries are skipped and links to folders are not entered, so the search stays
    inside ``root`` and sees each file once; links to files are returned.
    """
    found: set[Path] = set()
    if pattern:
        _search(root, tuple(pattern), found)
    return found


def _search(folder: Path, pattern: tuple[str, ...], found: set[Path]) -> None:
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        if rest:
            _search(folder, rest, found)
        for entry in _entries(folder):
            if not rest and entry.is_file():
                found.add(Path(entry.path))
            if entry.is_dir(follow_symlinks=False):
                _search(Path(entry.path), pattern, found)
        return
    for entry in _entries(folder):
        if not fnmatch.fnmatchcase(entry.name, head):
            continue
        if rest:
            if entry.is_dir(follow_symlinks=False):
                _search(Path(entry.path), rest, found)
        elif entry.is_file():
            found.add(Path(entry.path))


def _entries(folder: Path) -> list[os.DirEntry]:
    """The folder's entries, hidden ones left out; an unreadable folder is an error."""
    try:
        with os.scandir(folder) as entries:
            return [e for e in entries if not e.name.startswith(".")]
    except OSError as exc:
        raise CorpusError(f"cannot read folder {folder}: {exc.strerror}") from None


def glob_root(pattern: str) -> Path:
    """The longest leading folder of ``pattern`` without glob magic."""
    parts = Path(pattern).parts
    fixed = []
    for part in parts[:-1]:
        if globlib.has_magic(part):
            break
        fixed.append(part)
    return Path(*fixed) if fixed else Path(".")
