"""An embedding cache in a database server, shared by every machine working on a study.

When a study lives in PostgreSQL and several machines run its workers, a chunk one machine
embedded must not be embedded again by another. :class:`SharedEmbeddingCache` keeps vectors in
the study's own database (table ``chunkwise_embeddings``), with the same interface and keys as
the local :class:`~tuner.embedding.cache.EmbeddingCache` (model identity, sha256 of the text):
inserts are insert-if-absent, so two workers that embed one text at the same time race
harmlessly. SQLite studies keep the local file cache (a SQLite study is on one machine). As in
the local cache, a non-finite vector is never stored, and one stored earlier reads as missing.

The URL's password is never shown: errors name the database with ``user:***@host``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence

import numpy as np
import sqlalchemy as sa

from .._io.secrets import hide_password, redact
from .._io.sqltables import create_tables
from ..errors import option
from .cache import EmbeddingCacheError, usable

_metadata = sa.MetaData()
EMBEDDINGS = sa.Table(
    "chunkwise_embeddings", _metadata,
    sa.Column("model", sa.String(512), primary_key=True),
    sa.Column("key", sa.LargeBinary(32), primary_key=True),
    sa.Column("vector", sa.LargeBinary, nullable=False),
)
#: Keys per SELECT ... IN (...) statement.
_LOOKUP_BATCH = 1000


class SharedEmbeddingCache:
    """Vectors by (model, text hash) in a SQL database (PostgreSQL), safe across machines.

    The engine is created lazily and again after a fork, so an instance may be shipped to
    worker processes; ``path`` is the URL with its password hidden (it names the cache in
    messages and in the per-process embedder registry).
    """

    def __init__(self, url: str) -> None:
        self.url = url
        self.path = hide_password(url)
        self._engine: sa.Engine | None = None
        self._pid: int | None = None

    def __getstate__(self) -> dict:
        return {"url": self.url}

    def __setstate__(self, state: dict) -> None:
        self.__init__(state["url"])

    def _error(self, exc: Exception) -> EmbeddingCacheError:
        detail = redact(str(getattr(exc, "orig", None) or exc).splitlines()[0] if str(exc) else type(exc).__name__)
        return EmbeddingCacheError(f"cannot use the shared embedding cache in {self.path}: {detail}. Give "
                                   f"{option('cache', 'FILE')} for a local cache on this machine")

    def engine(self) -> sa.Engine:
        if self._engine is None or self._pid != os.getpid():
            try:
                engine = sa.create_engine(self.url, pool_pre_ping=True)
                create_tables(_metadata, engine)
            except sa.exc.SQLAlchemyError as exc:
                raise self._error(exc) from None
            self._engine, self._pid = engine, os.getpid()
        return self._engine

    def get_many(self, model: str, keys: Sequence[bytes]) -> dict[bytes, np.ndarray]:
        """Cached vectors of ``keys`` under ``model``; missing keys are absent."""
        found: dict[bytes, np.ndarray] = {}
        poisoned: list[bytes] = []
        try:
            with self.engine().connect() as conn:
                for i in range(0, len(keys), _LOOKUP_BATCH):
                    batch = list(keys[i : i + _LOOKUP_BATCH])
                    rows = conn.execute(sa.select(EMBEDDINGS.c.key, EMBEDDINGS.c.vector).where(
                        EMBEDDINGS.c.model == model, EMBEDDINGS.c.key.in_(batch)))
                    for key, blob in rows:
                        vector = np.frombuffer(bytes(blob), dtype=np.float32)
                        if usable(vector):
                            found[bytes(key)] = vector
                        else:
                            poisoned.append(bytes(key))
        except sa.exc.SQLAlchemyError as exc:
            raise self._error(exc) from None
        if poisoned:  # let the fresh vectors in (best effort)
            with contextlib.suppress(sa.exc.SQLAlchemyError), self.engine().begin() as conn:
                conn.execute(EMBEDDINGS.delete().where(EMBEDDINGS.c.model == model, EMBEDDINGS.c.key.in_(poisoned)))
        return found

    def put_many(self, model: str, keys: Sequence[bytes], vectors: np.ndarray) -> None:
        """Store vectors (one transaction; entries another worker stored first are kept)."""
        rows = [{"model": model, "key": key, "vector": np.ascontiguousarray(v, dtype=np.float32).tobytes()}
                for key, v in zip(keys, vectors) if usable(np.asarray(v, dtype=np.float32))]
        if not rows:
            return
        engine = self.engine()
        if engine.dialect.name == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        else:  # SQLite (tests, single machine): the same statement exists
            from sqlalchemy.dialects.sqlite import insert
        try:
            with engine.begin() as conn:
                conn.execute(insert(EMBEDDINGS).on_conflict_do_nothing(), rows)
        except sa.exc.SQLAlchemyError as exc:
            raise self._error(exc) from None

    def count(self, model: str | None = None) -> int:
        """Number of cached vectors (for one model, or all)."""
        query = sa.select(sa.func.count()).select_from(EMBEDDINGS)
        if model is not None:
            query = query.where(EMBEDDINGS.c.model == model)
        try:
            with self.engine().connect() as conn:
                return int(conn.execute(query).scalar_one())
        except sa.exc.SQLAlchemyError as exc:
            raise self._error(exc) from None

    def close(self) -> None:
        if self._engine is not None and self._pid == os.getpid():
            self._engine.dispose()
        self._engine = None


def cache_for_study(storage_url: str, cache: str | None = None):
    """The embedding cache a study's worker uses: ``cache`` (a file) when given; the shared
    cache in the study's database when that is a server (PostgreSQL); else the local default."""
    from .cache import EmbeddingCache

    if cache:
        return EmbeddingCache(cache)
    if not storage_url.startswith("sqlite"):
        return SharedEmbeddingCache(storage_url)
    return EmbeddingCache()
