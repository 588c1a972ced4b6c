"""Sentences clustered by meaning and position: chunks may be several spans."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.document import Document
from ..schema import invalid, param
from .base import Chunk, Chunker
from .registry import register
from .semantic import group_chunks, sentence_units, unit_token_ranges, unit_vectors

CLUSTERING_METHODS = ("single_linkage", "dbscan")


def clustering_distances(vectors: np.ndarray, positional_weight: float) -> np.ndarray:
    """``lambda * |a - b| / n + (1 - lambda) * (1 - max(cos(a, b), 0))`` for all pairs."""
    n = len(vectors)
    position = np.arange(n)
    positional = np.abs(position[:, None] - position[None, :]) / n
    semantic = 1.0 - np.maximum(vectors @ vectors.T, 0.0)
    distances = positional_weight * positional + (1 - positional_weight) * semantic
    np.fill_diagonal(distances, 0.0)
    return distances


def bounded_single_linkage(distances: np.ndarray, tokens: np.ndarray, size: int, stop: float) -> list[list[int]]:
    """Single-linkage clustering: merge the closest pair of clusters (union-find over
    pairs in order of distance) while the distance is at most ``stop`` and the merged
    cluster holds at most ``size`` tokens."""
    n = len(distances)
    parent = np.arange(n)
    weight = tokens.astype(np.int64).copy()

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    rows, cols = np.triu_indices(n, k=1)
    values = distances[rows, cols]
    keep = values <= stop
    rows, cols, values = rows[keep], cols[keep], values[keep]
    for k in np.argsort(values, kind="stable"):
        a, b = root(int(rows[k])), root(int(cols[k]))
        if a != b and weight[a] + weight[b] <= size:
            parent[b] = a
            weight[a] += weight[b]
    clusters: dict[int, list[int]] = {}
    for i in range(n):
        clusters.setdefault(root(i), []).append(i)
    return list(clusters.values())


@register
@dataclass(frozen=True)
class ClusteringChunker(Chunker):
    """Cluster sentences by meaning and closeness, with distance
    ``positional_weight * |a - b| / n + (1 - positional_weight) * (1 - max(cos, 0))``.

    ``method="single_linkage"`` merges the closest clusters while their distance is at
    most ``stop_distance`` and the cluster holds at most ``size`` tokens;
    ``method="dbscan"`` runs DBSCAN (``eps``, ``min_samples``; noise sentences stand
    alone; no size bound). Sentences of a cluster need not be adjacent: a chunk is then
    several spans, joined by a blank line in its text.
    """

    name = "clustering"
    needs_embedder = True
    method: str = param("single_linkage", str, choices=CLUSTERING_METHODS, help="clustering algorithm")
    positional_weight: float = param(0.5, float, low=0.0, high=1.0, help="lambda: weight of position")
    size: int = param(400, int, low=8, help="maximum tokens per chunk (single_linkage)")
    stop_distance: float = param(0.5, float, low=0.0, high=2.0, help="largest merge distance (single_linkage)")
    eps: float = param(0.3, float, low=1e-6, high=2.0, help="DBSCAN neighbourhood radius")
    min_samples: int = param(2, int, low=1, help="DBSCAN core-point neighbours")

    def _check(self) -> None:
        if self.method == "dbscan" and self.min_samples < 1:
            raise invalid("min_samples", self.min_samples, "an integer >= 1", owner="clustering")

    def split(self, document: Document) -> list[Chunk]:
        units = sentence_units(document, max_tokens=self.size)
        if len(units) <= 1:
            return group_chunks(document, units, [list(range(len(units)))]) if units else []
        vectors = unit_vectors(self.embedder, document, units)
        distances = clustering_distances(vectors, self.positional_weight)
        if self.method == "dbscan":
            from sklearn.cluster import DBSCAN

            labels = DBSCAN(eps=self.eps, min_samples=self.min_samples, metric="precomputed").fit(distances).labels_
            clusters: dict[int, list[int]] = {}
            for i, label in enumerate(labels):
                clusters.setdefault(int(label) if label >= 0 else -(i + 1), []).append(i)
            return group_chunks(document, units, list(clusters.values()))
        starts, ends = unit_token_ranges(document, units)
        groups = bounded_single_linkage(distances, ends - starts, self.size, self.stop_distance)
        return group_chunks(document, units, groups, self.size)
