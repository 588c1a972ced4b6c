"""Chroma's ClusterSemanticChunker, with an exact token bound and an O(n x m) DP."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.document import Document
from ..schema import invalid, param
from .base import Chunk, Chunker
from .registry import register
from .semantic import group_chunks, piece_units, unit_token_ranges, unit_vectors


def optimal_segmentation(similarity: np.ndarray, token_starts: np.ndarray, token_ends: np.ndarray,
                         size: int) -> list[list[int]]:
    """Consecutive groups maximising the sum of within-group similarities, each group
    spanning at most ``size`` document tokens.

    With 2-D prefix sums a group's reward is O(1), so the DP costs O(n x m) for n pieces
    and at most m pieces per group, instead of summing a sub-matrix each time.
    """
    n = len(similarity)
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = similarity.cumsum(axis=0).cumsum(axis=1)
    best = np.zeros(n + 1)
    start_of = np.zeros(n, dtype=np.int64)
    for i in range(n):
        # Earliest start j whose group j..i stays within size tokens (at least piece i alone).
        first = min(int(np.searchsorted(token_starts, token_ends[i] - size, side="left")), i)
        starts = np.arange(first, i + 1)
        reward = prefix[i + 1, i + 1] - prefix[starts, i + 1] - prefix[i + 1, starts] + prefix[starts, starts]
        totals = best[starts] + reward
        pick = int(np.argmax(totals))
        best[i + 1] = totals[pick]
        start_of[i] = starts[pick]
    groups: list[list[int]] = []
    end = n - 1
    while end >= 0:
        groups.append(list(range(int(start_of[end]), end + 1)))
        end = int(start_of[end]) - 1
    return groups[::-1]


@register
@dataclass(frozen=True)
class ClusterChunker(Chunker):
    """Pieces of at most ``piece_size`` tokens grouped into chunks of at most ``size``
    tokens so that the sum of pairwise similarities within chunks is maximal.

    Similarities are cosine similarities of the pieces' embeddings minus their mean
    (off-diagonal), so grouping dissimilar pieces costs reward; dynamic programming finds
    the best segmentation. Unlike Chroma's ClusterSemanticChunker, the bound is in
    tokens, not in pieces.
    """

    name = "cluster"
    needs_embedder = True
    size: int = param(400, int, low=8, help="maximum tokens per chunk")
    piece_size: int = param(50, int, low=4, help="maximum tokens per piece")

    def _check(self) -> None:
        if self.piece_size > self.size:
            raise invalid("piece_size", self.piece_size, f"an integer from 4 to {self.size} (at most size={self.size})",
                          owner="cluster")

    def split(self, document: Document) -> list[Chunk]:
        pieces = piece_units(document, self.piece_size)
        if len(pieces) <= 1:
            return group_chunks(document, pieces, [list(range(len(pieces)))], self.size) if pieces else []
        vectors = unit_vectors(self.embedder, document, pieces)
        similarity = vectors @ vectors.T
        similarity -= similarity[np.triu_indices(len(pieces), k=1)].mean()
        np.fill_diagonal(similarity, 0.0)
        starts, ends = unit_token_ranges(document, pieces)
        return group_chunks(document, pieces, optimal_segmentation(similarity, starts, ends, self.size), self.size)
