"""Rankings: each query's rows best first, with their scores, ties always to the lower row.

Every retriever returns a :class:`Ranked`; a ranking at the largest ``k`` serves every smaller
``k`` (its prefix), so a study scores many ``k`` from one search.
"""

from __future__ import annotations

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


def sorted_candidates(rows: list[np.ndarray], scores: list[np.ndarray], depth: int) -> Ranked:
    """Candidates from a search that returns them per query (chromadb), re-sorted by score then
    row, so exact ties are ordered as :func:`top_rows` orders them."""
    out = Ranked.empty(len(rows), depth)
    for q, (r, s) in enumerate(zip(rows, scores)):
        order = np.lexsort((r, -s))[:depth]
        out.rows[q, : len(order)], out.scores[q, : len(order)] = r[order], s[order]
    return out
