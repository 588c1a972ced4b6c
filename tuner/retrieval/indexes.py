"""Dense retrieval's vector indexes: exact numpy search or a chromadb collection (HNSW).

Vectors are L2-normalised, so the dot product is the cosine similarity.
"""

from __future__ import annotations

import contextlib
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..schema import invalid
from .ranking import RESCORE_MARGIN, Ranked, rescored, top_rows

#: Where dense vectors are searched: exact numpy search, or chromadb (HNSW).
INDEX_BACKENDS = ("numpy", "chroma")


class VectorIndex(ABC):
    """Nearest-neighbour search over a fixed set of unit vectors."""

    @abstractmethod
    def search_scored(self, queries: np.ndarray, k: int) -> Ranked:
        """The ``k`` nearest rows per query with their cosine similarities, best first
        (padded with ``-1`` when the index holds fewer than ``k`` vectors)."""

    def search(self, queries: np.ndarray, k: int) -> np.ndarray:
        """Row indices of the ``k`` nearest vectors per query, best first.

        Returns an int64 array of shape ``(len(queries), k)``; rows are padded with
        ``-1`` when the index holds fewer than ``k`` vectors.
        """
        return self.search_scored(queries, k).rows

    def close(self) -> None:
        """Release resources (a chromadb collection)."""


class NumpyIndex(VectorIndex):
    """Exact cosine similarity (dot products of unit vectors); ties go to the lower row.

    A float32 matrix product picks each query's candidates (a margin beyond ``k``), and
    :func:`~tuner.retrieval.ranking.exact_cosines` ranks them, as every dense search does.
    """

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def search_scored(self, queries: np.ndarray, k: int) -> Ranked:
        if len(self.vectors) == 0 or len(queries) == 0:
            return Ranked.empty(len(queries), k)
        queries = np.asarray(queries, dtype=np.float32)
        coarse = top_rows(queries @ self.vectors.T, min(k + RESCORE_MARGIN, len(self.vectors)))
        candidates = [row[row >= 0] for row in coarse.rows]
        return rescored(queries, candidates, lambda _, rows: self.vectors[rows], k)


class CollectionIndex(VectorIndex):
    """Search in a chromadb collection (cosine space) whose items map to rows.

    ``row_of(id, metadata)`` gives an item's row. chromadb picks each query's candidates (a
    margin beyond ``k``); their stored vectors are rescored with
    :func:`~tuner.retrieval.ranking.exact_cosines`, as every dense search ranks, so a collection
    orders near ties as the evaluation did.
    """

    def __init__(self, collection: Any, size: int, row_of: Callable[[str, dict | None], int]) -> None:
        self.collection = collection
        self.size = size
        self.row_of = row_of
        #: The chromadb id of every row a search returned (production fetches texts by id).
        self.ids: dict[int, str] = {}

    def search_scored(self, queries: np.ndarray, k: int) -> Ranked:
        if self.size == 0 or len(queries) == 0:
            return Ranked.empty(len(queries), k)
        queries = np.asarray(queries, dtype=np.float32)
        result = self.collection.query(query_embeddings=queries, n_results=min(k + RESCORE_MARGIN, self.size),
                                       include=["metadatas", "embeddings"])
        candidates, vectors = [], []
        for ids, metadatas, embeddings in zip(result["ids"], result["metadatas"], result["embeddings"]):
            found = [self.row_of(i, m) for i, m in zip(ids, metadatas)]
            self.ids.update(zip(found, ids))
            candidates.append(np.asarray(found, dtype=np.int64))
            vectors.append(np.asarray(embeddings, dtype=np.float32).reshape(len(found), -1))
        return rescored(queries, candidates, lambda q, _: vectors[q], k)


class ChromaIndex(CollectionIndex):
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
        created = self.client.create_collection(
            self.name,
            configuration={"hnsw": {"space": "cosine", "ef_search": ef_search}},
            embedding_function=None,
        )
        super().__init__(created, len(vectors), lambda item, _: int(item))
        batch = self.client.get_max_batch_size()
        for start in range(0, self.size, batch):
            block = np.asarray(vectors[start : start + batch], dtype=np.float32)
            self.collection.add(ids=[str(i) for i in range(start, start + len(block))],
                                embeddings=block)
        self._persistent = path is not None

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
    raise invalid("backend", backend, ", ".join(INDEX_BACKENDS))
