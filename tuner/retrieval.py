"""Retrieval: dense vector search, BM25, and their fusion, behind one function.

:func:`retrieve` is the one ranking path. Evaluation (:func:`tuner.evaluate`) and production
(:meth:`tuner.production.Collection.query`) both call it, with the indexes they hold, so a
configuration is ranked the same way where it was scored and where it is served.

* ``dense``: cosine similarity of L2-normalised vectors, in a :class:`VectorIndex`: exact
  numpy search (:class:`NumpyIndex`) or a chromadb collection (:class:`ChromaIndex`, HNSW).
* ``bm25``: Okapi BM25 over the chunks' texts (:class:`BM25Index`, built with `bm25s`_):
  Lucene's variant, ``k1 = 1.5``, ``b = 0.75``, ``idf = ln(1 + (N - df + 0.5) / (df + 0.5))``.
  Texts are lower-cased, split into words of two or more letters or digits
  (``(?u)\\b\\w\\w+\\b``), Lucene's 33 English stopwords removed (``the``, ``and``, ``of``,
  ...; bm25s's ``"en"`` list) and stemmed with the Snowball English stemmer (PyStemmer).
  A query term repeated in the question counts again, as in Lucene. A chunk sharing no term with the
  question scores 0 and is never retrieved, so a query may get fewer than ``k`` chunks.
* ``hybrid``: each retriever contributes its top ``max(k, FUSION_DEPTH)`` candidates, fused
  by reciprocal-rank fusion (``rrf``: ``Σ 1 / (rrf_k + rank)``, ranks from 1) or by weighted
  score fusion (``weighted``: ``alpha · dense + (1 - alpha) · bm25``, each score min-max
  normalised over its retriever's candidates for that query; a candidate absent from one
  list gets 0 there).

Every ranking breaks ties by the lower row (the chunk that comes first), so rankings are
deterministic. A ranking computed at the largest ``k`` serves every smaller ``k`` (its
prefix), so a study scores many ``k`` from one search.

.. _bm25s: https://github.com/xhluca/bm25s
"""

from __future__ import annotations

import contextlib
import json
import uuid
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from .errors import ChunkwiseError, InvalidParameterError

if TYPE_CHECKING:
    from .config import RetrievalConfig

BACKENDS = ("numpy", "chroma")
#: Retrieval methods: vectors, BM25, or both fused.
METHODS = ("dense", "bm25", "hybrid")
#: How ``hybrid`` fuses its two rankings.
FUSIONS = ("rrf", "weighted")
#: Defaults of the fusion parameters (60 is the constant of Cormack et al., 2009).
DEFAULT_RRF_K = 60
DEFAULT_ALPHA = 0.5
#: Candidates each retriever contributes to a fusion (at least ``k``).
FUSION_DEPTH = 100
#: How BM25 reads text (recorded with a persisted index, which refuses another reading).
BM25_TOKENIZER = {"lower": True, "token_pattern": r"(?u)\b\w\w+\b", "stopwords": "en", "stemmer": "snowball-english"}
BM25_PARAMS = {"method": "lucene", "k1": 1.5, "b": 0.75}


@dataclass(frozen=True)
class Ranked:
    """Per query, rows best first and their scores: ``rows`` int64 ``(queries, depth)``
    padded with ``-1``; ``scores`` float64, padded with NaN."""

    rows: np.ndarray
    scores: np.ndarray

    @classmethod
    def empty(cls, queries: int, depth: int) -> Ranked:
        return cls(np.full((queries, depth), -1, dtype=np.int64), np.full((queries, depth), np.nan))


def top_rows(scores: np.ndarray, depth: int, *, positive: bool = False) -> Ranked:
    """The ``depth`` best rows of each row of a ``(queries, n)`` score matrix, best first, ties
    to the lower row (exactly, also across the cut); with ``positive``, only scores > 0."""
    scores = np.asarray(scores, dtype=np.float64)
    queries, n = scores.shape
    out = Ranked.empty(queries, depth)
    take = min(depth, n)
    if take == 0 or queries == 0:
        return out
    if take < n:
        kth = np.partition(scores, n - take, axis=1)[:, n - take : n - take + 1]
        above = scores > kth
        tied = scores == kth
        room = take - above.sum(axis=1, keepdims=True)
        chosen = above | (tied & (np.cumsum(tied, axis=1) <= room))  # the lowest tied rows fill the cut
        part = np.nonzero(chosen)[1].reshape(queries, take)
    else:
        part = np.broadcast_to(np.arange(n), (queries, n))
    part_scores = np.take_along_axis(scores, part, axis=1)
    order = np.lexsort((part, -part_scores), axis=1)
    rows = np.take_along_axis(part, order, axis=1)
    values = np.take_along_axis(part_scores, order, axis=1)
    if positive:
        keep = values > 0
        rows, values = np.where(keep, rows, -1), np.where(keep, values, np.nan)
    out.rows[:, :take], out.scores[:, :take] = rows, values
    return out


def _sorted_candidates(rows: list[np.ndarray], scores: list[np.ndarray], depth: int) -> Ranked:
    """Candidates from a search that returns them per query (chromadb), re-sorted by score then
    row, so exact ties are ordered as :func:`top_rows` orders them."""
    out = Ranked.empty(len(rows), depth)
    for q, (r, s) in enumerate(zip(rows, scores)):
        order = np.lexsort((r, -s))[:depth]
        out.rows[q, : len(order)], out.scores[q, : len(order)] = r[order], s[order]
    return out


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
    """Exact cosine similarity (dot products of unit vectors); ties go to the lower row."""

    def __init__(self, vectors: np.ndarray) -> None:
        self.vectors = np.ascontiguousarray(vectors, dtype=np.float32)

    def search_scored(self, queries: np.ndarray, k: int) -> Ranked:
        if len(self.vectors) == 0 or len(queries) == 0:
            return Ranked.empty(len(queries), k)
        return top_rows(np.asarray(queries, dtype=np.float32) @ self.vectors.T, k)


class CollectionIndex(VectorIndex):
    """Search in a chromadb collection (cosine space) whose items map to rows.

    ``row_of(id, metadata)`` gives an item's row; the collection's distance ``d`` becomes the
    similarity ``1 - d``.
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
        result = self.collection.query(query_embeddings=np.asarray(queries, dtype=np.float32),
                                       n_results=min(k, self.size), include=["metadatas", "distances"])
        rows, scores = [], []
        for ids, metadatas, distances in zip(result["ids"], result["metadatas"], result["distances"]):
            found = [self.row_of(i, m) for i, m in zip(ids, metadatas)]
            self.ids.update(zip(found, ids))
            rows.append(np.asarray(found, dtype=np.int64))
            scores.append(1.0 - np.asarray(distances, dtype=np.float64))
        return _sorted_candidates(rows, scores, k)


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
    raise InvalidParameterError(f"unknown index backend {backend!r}; available: {', '.join(BACKENDS)}")


# ---------------------------------------------------------------------------------------- BM25

@lru_cache(maxsize=1)
def _stemmer():
    import Stemmer

    return Stemmer.Stemmer("english")


def bm25_tokenize(texts: Sequence[str]) -> list[list[str]]:
    """BM25's terms of each text (see the module docstring for the choices)."""
    import bm25s

    if not texts:
        return []
    return bm25s.tokenize(list(texts), lower=True, token_pattern=BM25_TOKENIZER["token_pattern"], stopwords="en",
                          stemmer=_stemmer(), return_ids=False, show_progress=False)


class BM25Index:
    """A BM25 index of texts (row ``i`` is ``texts[i]``), built with bm25s."""

    #: Files of a persisted index beside bm25s's own: the tokenizer and parameters it was built with.
    MANIFEST = "chunkwise-bm25.json"

    def __init__(self, texts: Sequence[str] | None = None, *, model: Any = None, size: int = 0) -> None:
        import bm25s

        if model is not None:
            self.model, self.size = model, size
            return
        texts = list(texts or [])
        self.size = len(texts)
        self.model = bm25s.BM25(**BM25_PARAMS)
        if self.size:
            self.model.index(bm25_tokenize(texts), show_progress=False)

    def scores(self, questions: Sequence[str]) -> np.ndarray:
        """BM25 score of every row for every question, shape ``(len(questions), size)``."""
        out = np.zeros((len(questions), self.size), dtype=np.float64)
        if self.size == 0:
            return out
        for q, terms in enumerate(bm25_tokenize(questions)):
            known = self.model.get_tokens_ids(terms)
            if known:
                out[q] = self.model.get_scores_from_ids(known)
        return out

    def search_scored(self, questions: Sequence[str], k: int) -> Ranked:
        """The ``k`` best rows per question (score > 0 only), best first."""
        return top_rows(self.scores(questions), k, positive=True)

    def save(self, folder: str | Path) -> None:
        """Write the index into ``folder`` (which the caller makes visible atomically)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        if self.size:
            self.model.save(folder, show_progress=False)
        manifest = {"size": self.size, "tokenizer": BM25_TOKENIZER, "params": BM25_PARAMS}
        (folder / self.MANIFEST).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")

    @classmethod
    def load(cls, folder: str | Path) -> BM25Index:
        """Read an index written by :meth:`save`; one built another way is refused."""
        import bm25s

        folder = Path(folder)
        try:
            manifest = json.loads((folder / cls.MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ChunkwiseError(f"the BM25 index in {folder} cannot be read ({exc}): rebuild the collection "
                                 "(chunkwise chunk ... --replace)") from None
        if manifest.get("tokenizer") != BM25_TOKENIZER or manifest.get("params") != BM25_PARAMS:
            raise ChunkwiseError(f"the BM25 index in {folder} was built with another tokenizer or parameters "
                                 f"({manifest.get('tokenizer')}, {manifest.get('params')}): rebuild the collection")
        size = int(manifest.get("size", 0))
        if size == 0:
            return cls([])
        try:
            model = bm25s.BM25.load(folder, show_progress=False)
        except (OSError, ValueError) as exc:
            raise ChunkwiseError(f"the BM25 index in {folder} cannot be read ({exc}): rebuild the collection "
                                 "(chunkwise chunk ... --replace)") from None
        return cls(model=model, size=size)


# -------------------------------------------------------------------------------------- fusion

def fuse_rrf(rankings: Sequence[Ranked], rrf_k: int, k: int) -> Ranked:
    """Reciprocal-rank fusion: each row scores ``Σ 1 / (rrf_k + rank)`` over the rankings that
    hold it (ranks from 1); the ``k`` best, ties to the lower row."""
    parts = [(r.rows, np.broadcast_to(1.0 / (rrf_k + np.arange(1, r.rows.shape[1] + 1)), r.rows.shape))
             for r in rankings]
    return _fuse(parts, len(rankings[0].rows), k)


def fuse_weighted(dense: Ranked, sparse: Ranked, alpha: float, k: int) -> Ranked:
    """Weighted score fusion: ``alpha · dense + (1 - alpha) · bm25``, each score min-max
    normalised over its ranking's candidates for the query (all equal: 1), 0 where a row is
    not a candidate; the ``k`` best, ties to the lower row."""
    parts = []
    for ranking, weight in ((dense, alpha), (sparse, 1.0 - alpha)):
        valid = ranking.rows >= 0
        scores = np.where(valid, ranking.scores, np.nan)
        with np.errstate(invalid="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a query without candidates: all-NaN
            low = np.nanmin(scores, axis=1, keepdims=True)
            high = np.nanmax(scores, axis=1, keepdims=True)
            spread = high - low
            normalised = np.where(spread > 0, (scores - low) / np.where(spread > 0, spread, 1), 1.0)
        parts.append((ranking.rows, weight * normalised))
    return _fuse(parts, len(dense.rows), k)


def _fuse(parts: Sequence[tuple[np.ndarray, np.ndarray]], queries: int, k: int) -> Ranked:
    """Sum each (query, row)'s contributions over ``parts`` (rows ``-1`` contribute nothing) and
    keep each query's ``k`` best, ties to the lower row. Contributions are added in the order of
    ``parts``, as a loop over the rankings would."""
    out = Ranked.empty(queries, k)
    query = np.concatenate([np.broadcast_to(np.arange(queries)[:, None], rows.shape)[rows >= 0] for rows, _ in parts])
    rows = np.concatenate([rows[rows >= 0] for rows, _ in parts])
    values = np.concatenate([np.asarray(v, dtype=np.float64)[rows_ >= 0] for rows_, v in parts])
    if not len(rows):
        return out
    width = int(rows.max()) + 1
    keys, inverse = np.unique(query * width + rows, return_inverse=True)
    fused = np.bincount(inverse.ravel(), weights=values, minlength=len(keys))
    query, rows = keys // width, keys % width
    order = np.lexsort((rows, -fused, query))
    query, rows, fused = query[order], rows[order], fused[order]
    first = np.searchsorted(query, query, side="left")
    slot = np.arange(len(query)) - first
    keep = slot < k
    out.rows[query[keep], slot[keep]] = rows[keep]
    out.scores[query[keep], slot[keep]] = fused[keep]
    return out


def retrieve(settings: RetrievalConfig, *, dense: VectorIndex | None = None, lexical: BM25Index | None = None,
             query_vectors: np.ndarray | None = None, questions: Sequence[str] | None = None,
             k: int | None = None) -> Ranked:
    """The top ``k`` (default ``settings.k``) rows per query by ``settings.method``.

    ``dense`` and ``query_vectors`` are needed by ``dense`` and ``hybrid``; ``lexical`` and
    ``questions`` by ``bm25`` and ``hybrid``. Scores are cosine similarities (``dense``),
    BM25 scores (``bm25``) or fused scores (``hybrid``).
    """
    k = settings.k if k is None else k
    method = settings.method
    if method in ("dense", "hybrid") and (dense is None or query_vectors is None):
        raise ValueError(f"{method} retrieval needs a vector index and query vectors")
    if method in ("bm25", "hybrid") and (lexical is None or questions is None):
        raise ValueError(f"{method} retrieval needs a BM25 index and the questions")
    if method == "dense":
        return dense.search_scored(query_vectors, k)
    if method == "bm25":
        return lexical.search_scored(questions, k)
    depth = max(k, FUSION_DEPTH)
    vectors, terms = dense.search_scored(query_vectors, depth), lexical.search_scored(questions, depth)
    if settings.fusion == "weighted":
        return fuse_weighted(vectors, terms, settings.alpha, k)
    return fuse_rrf([vectors, terms], settings.rrf_k, k)
