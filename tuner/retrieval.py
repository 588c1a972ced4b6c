"""Vector indexes: exact cosine top-k over numpy, or chromadb.

Both take L2-normalised vectors and return, per query, the row indices of the ``k``
most similar vectors, best first. A ranking computed at the largest ``k`` serves every
smaller ``k`` (its prefix), so a study scores many ``k`` from one search.
"""

from __future__ import annotations

import contextlib
import uuid
from abc import ABC, abstractmethod
from pathlib import Path

import numpy as np

from .errors import InvalidParameterError

BACKENDS = ("numpy", "chroma")


class VectorIndex(ABC):
    """Nearest-neighbour search over a fixed set of unit vectors."""

    @abstractmethod
    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Row indices of the ``k`` nearest vectors per query, best first.

        Returns an int64 array of shape ``(len(queries), k)``; rows are padded with
        ``-1`` when the index holds fewer than ``k`` vectors.
        """

    def close(self) -> None:
        """Release resources (a chromadb collection)."""


class NumpyIndex(VectorIndex):
    """Exact cosine similarity (dot products of unit vectors); ties go to the lower row."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        n = len(self.vectors)
        out = np.full((len(queries), k), -1, dtype=np.int64)
        if n == 0 or len(queries) == 0:
            return out
        take = min(k, n)
        scores = np.asarray(queries, dtype=np.float32) @ self.vectors.T
        if take < n:
            part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        else:
            part = np.broadcast_to(np.arange(n), (len(queries), n))
        part_scores = np.take_along_axis(scores, part, axis=1)
        # Sort by descending score, then ascending row for a deterministic order.
        order = np.lexsort((part, -part_scores), axis=1)
        out[:, :take] = np.take_along_axis(part, order, axis=1)
        return out


class ChromaIndex(VectorIndex):
    """A chromadb collection (HNSW, cosine space), in memory or persistent.

    Args:
        vectors: unit vectors to index.
        path: folder of a persistent chromadb database; ``None`` keeps it in memory.
        collection: collection name (default: a fresh unique name). An existing
            collection of that name is replaced.
        ef_search: HNSW search breadth; higher is slower and closer to exact.
    """

    def __init__(self, vectors: np.ndarray, *, path: str | Path | None = None,
                 collection: str | None = None, ef_search: int = 100) -> None:
        import chromadb

        self.client = (chromadb.PersistentClient(path=str(path)) if path is not None
                       else chromadb.EphemeralClient())
        self.name = collection or f"chunkwise-{uuid.uuid4().hex[:12]}"
        # chromadb raises different exception types for "does not exist".
        with contextlib.suppress(Exception):
            self.client.delete_collection(self.name)
        self.collection = self.client.create_collection(
            self.name,
            configuration={"hnsw": {"space": "cosine", "ef_search": ef_search}},
            embedding_function=None,
        )
        self.size = len(vectors)
        batch = self.client.get_max_batch_size()
        for start in range(0, self.size, batch):
            block = np.asarray(vectors[start : start + batch], dtype=np.float32)
            self.collection.add(ids=[str(i) for i in range(start, start + len(block))],
                                embeddings=block)
        self._persistent = path is not None

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        out = np.full((len(queries), k), -1, dtype=np.int64)
        if self.size == 0 or len(queries) == 0:
            return out
        result = self.collection.query(query_embeddings=np.asarray(queries, dtype=np.float32),
                                       n_results=min(k, self.size), include=[])
        for row, ids in enumerate(result["ids"]):
            out[row, : len(ids)] = [int(i) for i in ids]
        return out

    def close(self) -> None:
        if not self._persistent:
            with contextlib.suppress(Exception):
                self.client.delete_collection(self.name)


def make_index(vectors: np.ndarray, backend: str = "numpy", *, path: str | Path | None = None,
               collection: str | None = None) -> VectorIndex:
    """Build a :class:`NumpyIndex` or :class:`ChromaIndex` over ``vectors``."""
    if backend == "numpy":
        return NumpyIndex(vectors)
    if backend == "chroma":
        return ChromaIndex(vectors, path=path, collection=collection)
    raise InvalidParameterError(f"unknown index backend {backend!r}; available: {', '.join(BACKENDS)}")
