"""A persistent embedding cache shared by trials, processes and runs.

Vectors are keyed by (model identity, sha256 of the text), so a text is embedded once
per model, ever. The store is one SQLite file in WAL mode: readers never block, and
concurrent writers from several worker processes wait for each other (busy timeout)
instead of failing; inserts are ``INSERT OR IGNORE``, so two processes that embed the
same text race harmlessly.

The cache folder is created 0700 and the database (with its ``-wal`` and ``-shm``
files) 0600: cached vectors and their keys derive from private documents. A cache that
cannot be opened or written (a full disk, a read-only folder, a damaged file) is an
:class:`EmbeddingCacheError` naming the file and the way out (free space, another cache
file, or no cache).

Only finite vectors enter a cache, and a stored vector with a NaN or infinity (written by an
older version from a misbehaving endpoint) reads as missing, so it is embedded again instead
of poisoning every later run.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .._io.cachedir import BUSY_TIMEOUT_S, cache_dir
from .._io.files import private_dir, private_file
from ..errors import EmbeddingCacheError, option

#: Host parameters per SELECT ... IN (...) statement (SQLite's limit is 32766).
_LOOKUP_BATCH = 900


def _no_cache() -> str:
    """How a message says "run without a cache": ``cache=None`` from Python, ``--no-cache`` on the command line."""
    return option("no_cache", True, python="cache=None")


def usable(vector: np.ndarray) -> bool:
    """Whether a vector may be cached or served from a cache: non-empty and every value finite."""
    return vector.size > 0 and bool(np.isfinite(vector).all())


def default_cache_path() -> Path:
    """``embeddings.sqlite3`` in the cache folder (:func:`tuner._io.cachedir.cache_dir`)."""
    return cache_dir() / "embeddings.sqlite3"


def text_key(text: str) -> bytes:
    """Cache key of a text: the sha256 of its UTF-8 bytes."""
    return hashlib.sha256(text.encode("utf-8")).digest()


class EmbeddingCache:
    """Vectors by (model, text hash) in a SQLite file; safe across processes.

    The connection is opened lazily and reopened after a fork, so one instance may be
    shipped to worker processes.
    """

    def __init__(self, path: str | Path | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()
        self._conn: sqlite3.Connection | None = None
        self._pid: int | None = None

    def __getstate__(self) -> dict:
        return {"path": self.path}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["path"])

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None or self._pid != os.getpid():
            conn = None
            try:
                private_dir(self.path.parent)
                private_file(self.path)  # SQLite gives the -wal and -shm files the same mode
                conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
                conn.execute("PRAGMA journal_mode=WAL")
                conn.execute("PRAGMA synchronous=NORMAL")
                conn.execute(
                    "CREATE TABLE IF NOT EXISTS embeddings ("
                    " model TEXT NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL,"
                    " PRIMARY KEY (model, key)) WITHOUT ROWID"
                )
            except (sqlite3.Error, OSError) as exc:
                if conn is not None:
                    conn.close()
                raise self._error(exc) from None
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def _error(self, exc: sqlite3.Error | OSError) -> EmbeddingCacheError:
        """One clear message for a cache that cannot be used, saying what to do."""
        code = getattr(exc, "sqlite_errorcode", None)
        if code == sqlite3.SQLITE_FULL or getattr(exc, "errno", None) in (errno.ENOSPC, errno.EDQUOT):
            error = EmbeddingCacheError(
                f"the embedding cache {self.path} cannot grow: the disk is full. Free some space there, "
                f"give {option('cache', 'FILE')} on another disk, or run without a cache ({_no_cache()})")
            error.fatal = True
            return error
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return EmbeddingCacheError(
            f"cannot use the embedding cache {self.path}: {reason}. Give {option('cache', 'FILE')} elsewhere, "
            f"or run without a cache ({_no_cache()})")

    def get_many(self, model: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Cached vectors of ``keys`` under ``model``; missing keys are absent."""
        conn = self._connection()
        found: dict[bytes, np.ndarray] = {}
        poisoned: list[bytes] = []
        try:
            for i in range(0, len(keys), _LOOKUP_BATCH):
                batch = list(keys[i : i + _LOOKUP_BATCH])
                marks = ",".join("?" * len(batch))
                rows = conn.execute(
                    f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})",
                    [model, *batch],
                )
                for key, blob in rows:
                    vector = np.frombuffer(blob, dtype=np.float32)
                    if usable(vector):
                        found[key] = vector
                    else:
                        poisoned.append(key)
        except sqlite3.Error as exc:
            raise self._error(exc) from None
        if poisoned:  # let the fresh vectors in (best effort: a read-only cache just re-embeds them)
            with contextlib.suppress(sqlite3.Error):
                conn.executemany("DELETE FROM embeddings WHERE model = ? AND key = ?", [(model, k) for k in poisoned])
        return found

    def put_many(self, model: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store vectors (one transaction; existing entries are kept); a non-finite vector is
        never stored."""
        rows = [(model, key, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for key, v in zip(keys, vectors) if usable(np.asarray(v, dtype=np.float32))]
        if not rows:
            return
        conn = self._connection()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", rows)
                conn.execute("COMMIT")
            except BaseException:
                # SQLite may have rolled back already (it does on a full disk).
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):
                        conn.execute("ROLLBACK")
                raise
        except (sqlite3.Error, OSError) as exc:
            raise self._error(exc) from None

    def count(self, model: str | None = None) -> int:
        """Number of cached vectors (for one model, or all)."""
        conn = self._connection()
        try:
            if model is None:
                return conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
            return conn.execute("SELECT COUNT(*) FROM embeddings WHERE model = ?", (model,)).fetchone()[0]
        except sqlite3.Error as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None
