"""Where chunkwise keeps what it caches: embeddings, LLM replies, converted documents and the
embedding model's measured throughput, all in one folder.

``$CHUNKWISE_CACHE_DIR``, else ``chunkwise`` under ``$XDG_CACHE_HOME`` or ``~/.cache``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Seconds a writer of a cache's SQLite file waits for another process's transaction before failing.
BUSY_TIMEOUT_S = 120


def cache_dir() -> Path:
    """The cache folder (not created here: each cache creates it, private, when it writes)."""
    base = os.environ.get("CHUNKWISE_CACHE_DIR")
    if base is None:
        xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        base = str(Path(xdg) / "chunkwise")
    return Path(base)
