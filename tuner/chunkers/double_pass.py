"""Semantic double-pass merging."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..data.document import Document
from ..schema import param
from .base import Chunk, Chunker
from .registry import register
from .semantic import group_chunks, normalise, sentence_units, unit_token_ranges, unit_vectors


@register
@dataclass(frozen=True)
class DoublePassChunker(Chunker):
    """Grow chunks from similar sentences, then merge similar neighbouring chunks.

    First pass: a new chunk takes its next sentence when the two are at least
    ``initial_threshold`` similar (else the sentence stands alone), then keeps taking
    sentences at least ``appending_threshold`` similar to the chunk. Second pass: a
    chunk absorbs the next chunk when they are at least ``merging_threshold`` similar,
    or the next two when it is that similar to the one after next, so a formula, quote
    or code block between two related passages stays with them. A chunk's vector is
    the normalised mean of its sentences' vectors; no chunk exceeds ``size`` tokens.
    """

    name = "double_pass"
    needs_embedder = True
    initial_threshold: float = param(0.4, float, low=-1.0, high=1.0, help="similarity to start a chunk")
    appending_threshold: float = param(0.3, float, low=-1.0, high=1.0, help="similarity to add a sentence")
    merging_threshold: float = param(0.4, float, low=-1.0, high=1.0, help="similarity to merge chunks")
    size: int = param(400, int, low=8, help="maximum tokens per chunk")

    def split(self, document: Document) -> list[Chunk]:
        units = sentence_units(document, max_tokens=self.size)
        if not units:
            return []
        vectors = unit_vectors(self.embedder, document, units)
        token_starts, token_ends = unit_token_ranges(document, units)

        def fits(first: int, last: int) -> bool:
            return token_ends[last] - token_starts[first] <= self.size

        def vector(group: list[int]) -> np.ndarray:
            return normalise(vectors[group].mean(axis=0))

        chunks: list[list[int]] = [[0]]
        fresh = True
        for i in range(1, len(units)):
            current = chunks[-1]
            threshold = self.initial_threshold if fresh else self.appending_threshold
            if fits(current[0], i) and float(vector(current) @ vectors[i]) >= threshold:
                current.append(i)
                fresh = False
            else:
                chunks.append([i])
                fresh = True

        merged: list[list[int]] = []
        i = 0
        while i < len(chunks):
            current = list(chunks[i])
            while True:
                if (i + 1 < len(chunks) and fits(current[0], chunks[i + 1][-1])
                        and float(vector(current) @ vector(chunks[i + 1])) >= self.merging_threshold):
                    current += chunks[i + 1]
                    i += 1
                elif (i + 2 < len(chunks) and fits(current[0], chunks[i + 2][-1])
                        and float(vector(current) @ vector(chunks[i + 2])) >= self.merging_threshold):
                    current += chunks[i + 1] + chunks[i + 2]
                    i += 2
                else:
                    break
            merged.append(current)
            i += 1
        return group_chunks(document, units, merged, self.size)
