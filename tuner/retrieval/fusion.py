"""Fusing two rankings: reciprocal-rank fusion and weighted score fusion.

``rrf`` scores a row ``Σ 1 / (rrf_k + rank)`` over the rankings that hold it (ranks from 1);
``weighted`` adds ``alpha · dense + (1 - alpha) · bm25``, each score min-max normalised over its
retriever's candidates for that query (a candidate absent from one list gets 0 there). Each
retriever contributes its top ``max(k, FUSION_DEPTH)`` candidates.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .ranking import Ranked

#: How ``hybrid`` fuses its two rankings, and the one parameter each fusion takes.
FUSION_PARAMETERS = {"rrf": "rrf_k", "weighted": "alpha"}
FUSIONS = tuple(FUSION_PARAMETERS)
#: The fusion a hybrid uses unless told otherwise.
DEFAULT_FUSION = "rrf"
#: Defaults of the fusion parameters (60 is the constant of Cormack et al., 2009).
DEFAULT_RRF_K = 60
DEFAULT_ALPHA = 0.5
FUSION_DEFAULTS = {"rrf_k": DEFAULT_RRF_K, "alpha": DEFAULT_ALPHA}
#: Candidates each retriever contributes to a fusion (at least ``k``).
FUSION_DEPTH = 100


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
