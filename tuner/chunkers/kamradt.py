"""Greg Kamradt's semantic breakpoints, plain and size-bounded."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.document import Document
from ..schema import invalid, param
from ..text.tokens import count_tokens_batch
from .base import Chunk, Chunker
from .registry import register
from .semantic import consecutive_groups, group_chunks, sentence_units

THRESHOLD_TYPES = ("percentile", "standard_deviation", "interquartile", "gradient", "absolute")
#: Allowed ``threshold`` per type: percentiles, multiples of a spread, or a cosine distance.
THRESHOLD_RANGES = {"percentile": (0.0, 100.0), "gradient": (0.0, 100.0), "standard_deviation": (0.0, 10.0),
                    "interquartile": (0.0, 10.0), "absolute": (0.0, 2.0)}


def window_distances(embedder, document: Document, units: list[tuple[int, int]], buffer_size: int) -> np.ndarray:
    """Cosine distance between consecutive buffered windows (sentence i with ``buffer_size``
    sentences either side, taken as the exact document text from first to last)."""
    n = len(units)
    windows = [document.text[units[max(0, i - buffer_size)][0] : units[min(n - 1, i + buffer_size)][1]]
               for i in range(n)]
    vectors = embedder.embed(windows)
    return 1.0 - np.einsum("ij,ij->i", vectors[:-1], vectors[1:])


def breakpoints(distances: np.ndarray, threshold_type: str, threshold: float) -> np.ndarray:
    """Boolean per gap: does a chunk end there?"""
    if len(distances) == 0:
        return np.zeros(0, dtype=bool)
    if threshold_type == "percentile":
        return distances > np.percentile(distances, threshold)
    if threshold_type == "standard_deviation":
        return distances > distances.mean() + threshold * distances.std()
    if threshold_type == "interquartile":
        q1, q3 = np.percentile(distances, [25, 75])
        return distances > distances.mean() + threshold * (q3 - q1)
    if threshold_type == "gradient":
        gradient = np.gradient(distances) if len(distances) > 1 else distances
        return gradient > np.percentile(gradient, threshold)
    return distances > threshold


@register
@dataclass(frozen=True)
class KamradtChunker(Chunker):
    """Split where consecutive sentence windows drift apart in meaning.

    Each sentence is embedded together with ``buffer_size`` sentences on either side;
    a chunk ends between sentences whose windows' cosine distance exceeds the threshold:
    a ``percentile`` of the distances, the mean plus ``threshold`` standard deviations or
    interquartile ranges, a percentile of the distances' ``gradient``, or an ``absolute``
    distance. No size bound (see ``kamradt_bounded``).
    """

    name = "kamradt"
    needs_embedder = True
    buffer_size: int = param(1, int, low=0, high=10, help="neighbouring sentences in each window")
    threshold_type: str = param("percentile", str, choices=THRESHOLD_TYPES, help="how the threshold is set")
    threshold: float = param(95.0, float, low=0.0, help="percentile, multiple of spread, or distance")

    def _check(self) -> None:
        low, high = THRESHOLD_RANGES[self.threshold_type]
        if not low <= self.threshold <= high:
            raise invalid("threshold", self.threshold, f"a number from {low:g} to {high:g} with "
                          f"threshold_type={self.threshold_type!r}", owner="kamradt")

    def split(self, document: Document) -> list[Chunk]:
        units = sentence_units(document)
        if len(units) <= 1:
            return group_chunks(document, units, [list(range(len(units)))]) if units else []
        distances = window_distances(self.embedder, document, units, self.buffer_size)
        cuts = breakpoints(distances, self.threshold_type, self.threshold)
        return group_chunks(document, units, consecutive_groups(cuts))


@register
@dataclass(frozen=True)
class KamradtBoundedChunker(Chunker):
    """Kamradt breakpoints with thresholds found by binary search, so that chunks
    average about ``size`` tokens and none exceeds it (after Chroma's
    KamradtModifiedChunker, which only targets the average).

    Sentences longer than ``size`` are first split by the recursive chunker. A first
    binary search over the threshold makes as many cuts as the document has ``size``
    tokens (Chroma's rule); then, inside every chunk still over ``size``, a second binary
    search finds the highest local threshold (fewest cuts) at which each of its pieces
    fits. One global threshold low enough for the worst region would cut everywhere.
    """

    name = "kamradt_bounded"
    needs_embedder = True
    size: int = param(400, int, low=8, help="maximum tokens per chunk")
    buffer_size: int = param(1, int, low=0, high=10, help="neighbouring sentences in each window")

    def split(self, document: Document) -> list[Chunk]:
        units = sentence_units(document, max_tokens=self.size)
        if len(units) <= 1:
            return group_chunks(document, units, [list(range(len(units)))], self.size) if units else []
        distances = window_distances(self.embedder, document, units, self.buffer_size)
        total = sum(count_tokens_batch([document.text[s:e] for s, e in units]))
        cuts = min(total // self.size, len(distances))
        # Chroma's rule: the threshold whose number of cuts matches total // size.
        threshold = np.sort(distances)[::-1][cuts - 1] if cuts else np.inf
        groups = []
        for group in consecutive_groups(distances >= threshold):
            groups.extend(self._fit(document, units, distances, group))
        return group_chunks(document, units, groups, self.size)

    def _fit(self, document: Document, units, distances: np.ndarray, group: list[int]) -> list[list[int]]:
        """Split ``group`` at the highest threshold over its own gaps at which every part fits."""
        def parts_at(threshold: float) -> list[list[int]]:
            return [[group[0] + i for i in part] for part in consecutive_groups(inner > threshold)]

        def fits(parts: list[list[int]]) -> bool:
            texts = [document.text[units[p[0]][0] : units[p[-1]][1]] for p in parts]
            return max(count_tokens_batch(texts)) <= self.size

        inner = distances[group[0] : group[-1]]  # the gaps between the group's units
        if fits([group]):
            return [group]
        candidates = np.concatenate(([-np.inf], np.unique(inner)))
        low, high = 0, len(candidates) - 1  # candidates[0] cuts every gap, which always fits
        while low < high:
            middle = (low + high + 1) // 2
            if fits(parts_at(candidates[middle])):
                low = middle
            else:
                high = middle - 1
        return parts_at(candidates[low])
