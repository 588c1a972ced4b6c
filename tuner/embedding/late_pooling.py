"""Late chunking's pooling: a chunk's vector from its document's token embeddings, and the
windows a long document is read in.

This module is pure numpy; :mod:`.late` computes the token embeddings and :mod:`.late_cache` keeps
them.

**Windows.** A document longer than the model's input window (``max_seq_length`` less its
special tokens: 254 word pieces for all-MiniLM-L6-v2) is read in windows of that many tokens,
each wrapped in the model's special tokens (``[CLS] ... [SEP]``). Windows start every
``window - overlap`` tokens; the last one ends at the document's end (it starts
``window`` tokens before it, so it may overlap its neighbour by more). Each token's embedding
comes from the window where it has the most context on its nearer side
(``min(tokens before it, tokens after it)`` inside the window); a tie goes to the earlier
window. With regular windows that splits each overlap in two: its first ``ceil(overlap / 2)``
tokens keep the earlier window's embeddings, the rest the later one's. All windows of a
document have the same length (no padding), and a document's windows are batched alone, so a
document's token embeddings do not depend on what else is embedded with it: evaluation and
production compute the same vectors.

**Pooling.** The tokens of a span are those whose character offsets (the tokenizer's offset
mapping) overlap it: a word piece cut by a chunk boundary counts in both chunks. A multi-span
chunk pools the tokens of all its spans. A span that covers no token (whitespace only) takes
the token after it (the last token at the document's end). Token embeddings are kept as
float16 (what the cache stores) and pooled in float32, cached or not, so a cached and a fresh
pass give the same chunk vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..schema import invalid


@dataclass(frozen=True)
class DocumentTokens:
    """One document's token embeddings: ``vectors`` (``(n, dim)`` float16) and the character
    ``offsets`` of each token (``(n, 2)``, ``[start, end)``), in document order."""

    vectors: np.ndarray
    offsets: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.vectors.nbytes + self.offsets.nbytes

    def rows(self, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """The tokens of ``spans`` (see the module docstring), in order, each once."""
        return span_rows(self.offsets, spans)

    def pool(self, spans: Sequence[tuple[int, int]]) -> np.ndarray:
        """The unit vector of a chunk whose character spans are ``spans``: the mean of its
        tokens' embeddings, L2-normalised (float32)."""
        return self.pool_chunks([spans])[0]

    def pool_chunks(self, chunk_spans: Sequence[Sequence[tuple[int, int]]],
                    limits: Sequence[int] | int | None = None) -> np.ndarray:
        """:meth:`pool` for many chunks of this document at once, one row each (``limits``: see
        :meth:`sum_chunks`)."""
        sums, counts = self.sum_chunks(chunk_spans, limits)
        return unit_rows(sums / np.maximum(counts, 1).astype(np.float32)[:, None])

    def sum_chunks(self, chunk_spans: Sequence[Sequence[tuple[int, int]]],
                   limits: Sequence[int] | int | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Per chunk, the sum of its tokens' embeddings (float32) and how many there are; with
        ``limits`` (one per chunk, or one for all), of its first ``limit`` tokens only, in document
        order (what a model that reads that many word pieces reads of it). The document's vectors
        are converted to float32 once, and a one-span chunk (the usual case) sums a slice of them:
        the same rows in the same order as gathering them, so the same sum."""
        sums = np.zeros((len(chunk_spans), self.vectors.shape[1]), dtype=np.float32)
        counts = np.zeros(len(chunk_spans), dtype=np.int64)
        if len(self.offsets) == 0 or not chunk_spans:
            return sums, counts
        if limits is None:
            cap = [len(self.offsets)] * len(chunk_spans)
        elif isinstance(limits, (int, np.integer)):
            cap = [max(0, int(limits))] * len(chunk_spans)
        else:
            cap = [max(0, int(limit)) for limit in limits]
        vectors = self.vectors.astype(np.float32)
        single = [i for i, spans in enumerate(chunk_spans) if len(spans) == 1]
        if single:
            bounds = np.array([chunk_spans[i][0] for i in single], dtype=np.int64)
            firsts, stops = token_runs(self.offsets, bounds[:, 0], bounds[:, 1])
            for i, first, stop in zip(single, firsts.tolist(), stops.tolist()):
                stop = min(stop, first + cap[i])
                sums[i], counts[i] = vectors[first:stop].sum(axis=0), stop - first
        for i, spans in enumerate(chunk_spans):
            if len(spans) != 1:
                rows = self.rows(spans)[:cap[i]]
                sums[i], counts[i] = vectors[rows].sum(axis=0), len(rows)
        return sums, counts


def unit_rows(vectors: np.ndarray) -> np.ndarray:
    """Each row L2-normalised (a zero row stays zero)."""
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return np.divide(vectors, norms, out=vectors, where=norms > 0)


def token_runs(offsets: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each character span ``[starts[i], ends[i])``, the run ``[first, stop)`` of the tokens whose
    offsets overlap it; a span that overlaps none takes the token after it (the last one at the end)."""
    n = len(offsets)
    first = np.searchsorted(offsets[:, 1], starts, side="right")  # the first token ending after the span starts
    stop = np.searchsorted(offsets[:, 0], ends, side="left")  # past the last token starting before it ends
    empty = stop <= first
    first = np.where(empty, np.minimum(first, n - 1), first)
    return first, np.where(empty, first + 1, stop)


def span_rows(offsets: np.ndarray, spans: Sequence[tuple[int, int]]) -> np.ndarray:
    """Indices of the tokens of ``spans`` (each span's :func:`token_runs`), in order, each once."""
    if len(offsets) == 0:
        return np.zeros(0, dtype=np.int64)
    bounds = np.asarray(spans, dtype=np.int64).reshape(-1, 2)
    firsts, stops = token_runs(offsets, bounds[:, 0], bounds[:, 1])
    return np.unique(np.concatenate([np.arange(a, b) for a, b in zip(firsts.tolist(), stops.tolist())]))


def window_starts(tokens: int, window: int, overlap: int) -> list[int]:
    """Where each window of ``window`` tokens starts in a document of ``tokens`` tokens: every
    ``window - overlap`` tokens, the last one ending at the document's end."""
    if not 0 <= overlap < window:
        raise invalid("overlap", overlap, f"an integer from 0 to {window - 1} (smaller than window={window})")
    if tokens <= window:
        return [0]
    starts = list(range(0, tokens - window + 1, window - overlap))
    if starts[-1] + window < tokens:
        starts.append(tokens - window)
    return starts


def owning_window(tokens: int, starts: Sequence[int], window: int) -> np.ndarray:
    """For each token, the window (index into ``starts``) whose embedding it keeps: where it has
    the most context on its nearer side; a tie goes to the earlier window."""
    best = np.full(tokens, -1, dtype=np.int64)
    owner = np.zeros(tokens, dtype=np.int64)
    for number, start in enumerate(starts):
        end = min(start + window, tokens)
        position = np.arange(start, end)
        context = np.minimum(position - start, end - 1 - position)
        better = context > best[start:end]
        best[start:end][better] = context[better]
        owner[start:end][better] = number
    return owner

