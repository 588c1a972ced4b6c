"""A persistent embedding cache shared by trials, processes and runs.

Vectors are keyed by (model identity, sha256 of the text), so a text is embedded once
per model, ever. The store is one SQLite file in WAL mode: readers never block, and
concurrent writers from several worker processes wait for each other (busy timeout)
instead of failing; inserts are ``INSERT OR IGNORE``, so two processes that embed the
same text race harmlessly.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import numpy as np

#: Seconds a writer waits for another process's transaction before failing.
BUSY_TIMEOUT_S = 120
#: Host parameters per SELECT ... IN (...) statement (SQLite's limit is 32766).
_LOOKUP_BATCH = 900


def default_cache_path() -> Path:
    """``$CHUNKWISE_CACHE_DIR/embeddings.sqlite3``, else under ``$XDG_CACHE_HOME`` or ``~/.cache``."""
    base = os.environ.get("CHUNKWISE_CACHE_DIR")
    if base is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "chunkwise")
    return Path(base) / "embeddings.sqlite3"


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
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(
                "CREATE TABLE IF NOT EXISTS embeddings ("
                " model TEXT NOT NULL, key BLOB NOT NULL, vector BLOB NOT NULL,"
                " PRIMARY KEY (model, key)) WITHOUT ROWID"
            )
            self._conn, self._pid = conn, os.getpid()
        return self._conn

    def get_many(self, model: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Cached vectors of ``keys`` under ``model``; missing keys are absent."""
        conn = self._connection()
        found: dict[bytes, np.ndarray] = {}
        for i in range(0, len(keys), _LOOKUP_BATCH):
            batch = list(keys[i : i + _LOOKUP_BATCH])
            marks = ",".join("?" * len(batch))
            rows = conn.execute(
                f"SELECT key, vector FROM embeddings WHERE model = ? AND key IN ({marks})",
                [model, *batch],
            )
            for key, blob in rows:
                found[key] = np.frombuffer(blob, dtype=np.float32)
        return found

    def put_many(self, model: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store vectors (one transaction; existing entries are kept)."""
        if not len(keys):
            return
        rows = [(model, key, np.ascontiguousarray(v, dtype=np.float32).tobytes())
                for key, v in zip(keys, vectors)]
        conn = self._connection()
        conn.execute("BEGIN IMMEDIATE")
        try:
            conn.executemany("INSERT OR IGNORE INTO embeddings VALUES (?, ?, ?)", rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def count(self, model: str | None = None) -> int:
        """Number of cached vectors (for one model, or all)."""
        conn = self._connection()
        if model is None:
            return conn.execute("SELECT COUNT(*) FROM embeddings").fetchone()[0]
        return conn.execute("SELECT COUNT(*) FROM embeddings WHERE model = ?", (model,)).fetchone()[0]

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None
