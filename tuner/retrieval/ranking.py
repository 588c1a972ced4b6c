"""Rankings: each query's rows best first, with their scores, ties always to the lower row.

Every retriever returns a :class:`Ranked`; a ranking at the largest ``k`` serves every smaller
``k`` (its prefix), so a study scores many ``k`` from one search.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Ranked:
    """Per query, rows best first and their scores: ``rows`` int64 ``(queries, depth)``
    padded with ``-1``; ``scores`` float64, padded with NaN. A reranked ranking keeps the
    first stage's candidates (``first_stage``) so that their recall can be scored apart."""

    rows: np.ndarray
    scores: np.ndarray
    first_stage: Ranked | None = None

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


#: Candidates a float32 search keeps beyond the depth asked for, so that rescoring them exactly
#: (:func:`exact_cosines`) still finds the true top ``depth`` when float32 rounding moved a row
#: across the cut.
RESCORE_MARGIN = 16


def exact_cosines(query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """The dot products of one query with each row of ``vectors``, in float64 and summed in the
    same order for every row whatever its position or the search that fetched it.

    Every dense search ranks its candidates by these, so an evaluation (a float32 matrix
    product over every chunk) and a production collection (chromadb's own float32 distances)
    order the same vectors identically: their float32 scores differ in the last digits, and a
    near tie would otherwise fall differently on each side (and a hybrid's fusion magnifies a
    swapped rank into a different candidate list). Identical vectors score identically.
    """
    return (np.asarray(vectors, dtype=np.float64) * np.asarray(query, dtype=np.float64)).sum(axis=1)


def rescored(queries: np.ndarray, candidates: Sequence[np.ndarray], vectors_of: Callable[[int, np.ndarray], np.ndarray],
             depth: int) -> Ranked:
    """The ``depth`` best of each query's ``candidates`` (rows) by :func:`exact_cosines`, ties to
    the lower row; ``vectors_of(query, rows)`` gives the candidates' vectors."""
    scores = [exact_cosines(queries[q], vectors_of(q, rows)) if len(rows) else np.zeros(0)
              for q, rows in enumerate(candidates)]
    return sorted_candidates([np.asarray(r, dtype=np.int64) for r in candidates], scores, depth)


def sorted_candidates(rows: list[np.ndarray], scores: list[np.ndarray], depth: int) -> Ranked:
    """Candidates from a search that returns them per query (chromadb), re-sorted by score then
    row, so exact ties are ordered as :func:`top_rows` orders them."""
    out = Ranked.empty(len(rows), depth)
    for q, (r, s) in enumerate(zip(rows, scores)):
        order = np.lexsort((r, -s))[:depth]
        out.rows[q, : len(order)], out.scores[q, : len(order)] = r[order], s[order]
    return out
