"""Shared machinery of the sentence-based and semantic chunkers.

Units (sentences, or small pieces) carry exact spans; groups of consecutive units become
chunks spanning from the first unit's start to the last unit's end, so offsets stay
exact. Unit embeddings go through the bound embedder and its persistent cache: a trial
pays only for its own segmentation and for embedding its new chunks.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..data.document import Document
from ..text.sentences import split_sentences
from ..text.tokens import MEMO_ENTRY_BYTES, count_span, memo_grew, text_memo
from .base import Chunk, make_chunk, make_multi_span_chunk

Span = tuple[int, int]


def sentence_units(document: Document, max_tokens: int | None = None) -> list[Span]:
    """Sentence spans; with ``max_tokens``, longer sentences are split by the recursive chunker.

    The sentences of a text are found once per process (memoised with the text), however
    many configurations ask.
    """
    memo = text_memo(document.text)
    spans = memo.get("sentences")
    if spans is None:
        spans = memo["sentences"] = split_sentences(document.text)
        memo_grew(document.text, MEMO_ENTRY_BYTES * len(spans))
    if max_tokens is None or not spans:
        return list(spans)  # a copy: the memo's list stays as found
    counts = [count_span(document.text, s, e) for s, e in spans]
    out: list[Span] = []
    for (start, end), count in zip(spans, counts):
        if count <= max_tokens:
            out.append((start, end))
        else:
            out.extend((c.start_index, c.end_index) for c in split_span(document, start, end, max_tokens))
    return out


def split_span(document: Document, start: int, end: int, size: int) -> list[Chunk]:
    """Recursive-chunker chunks of ``document.text[start:end]``, offsets into the document."""
    from .recursive import RecursiveChunker

    out: list[Chunk] = []
    chunker = RecursiveChunker(size=size)
    chunker._split(document, start, end, chunker.separators, out)
    return out


def piece_units(document: Document, piece_size: int) -> list[Span]:
    """Pieces of at most ``piece_size`` tokens (recursive chunker, no overlap)."""
    return [(c.start_index, c.end_index) for c in split_span(document, 0, len(document.text), piece_size)]


def unit_vectors(embedder, document: Document, units: Sequence[Span]) -> np.ndarray:
    """Unit-norm embeddings of the units' texts (cached by text)."""
    return embedder.embed([document.text[s:e] for s, e in units])


def unit_token_ranges(document: Document, units: Sequence[Span]) -> tuple[np.ndarray, np.ndarray]:
    """Document-token index ranges of the units: the tokens of units ``j..i`` number
    ``ends[i] - starts[j]`` (whitespace between them included)."""
    tokens = document.tokens
    bounds = np.array([tokens.token_range(s, e) for s, e in units], dtype=np.int64).reshape(-1, 2)
    return bounds[:, 0], bounds[:, 1]


def group_chunks(document: Document, units: Sequence[Span], groups: Sequence[Sequence[int]],
                 size: int | None = None) -> list[Chunk]:
    """Chunks of groups of unit indices; with ``size``, chunks over the bound are re-split.

    A group of consecutive units is one contiguous chunk; a group with gaps becomes a
    multi-span chunk (one span per run of consecutive units). Chunks come back sorted
    by their start.
    """
    chunks: list[Chunk] = []
    for group in groups:
        indices = sorted(group)
        runs: list[Span] = []
        for position, i in enumerate(indices):
            if position and i == indices[position - 1] + 1:
                runs[-1] = (runs[-1][0], units[i][1])
            else:
                runs.append(units[i])
        chunk = make_multi_span_chunk(document, runs) if len(runs) > 1 else make_chunk(document, *runs[0])
        if size is not None and chunk.token_count > size:
            for start, end in chunk.all_spans:
                piece = make_chunk(document, start, end)
                chunks.extend([piece] if piece.token_count <= size else split_span(document, start, end, size))
        else:
            chunks.append(chunk)
    return sorted(chunks, key=lambda c: (c.start_index, c.end_index))


def consecutive_groups(breaks: Sequence[bool]) -> list[list[int]]:
    """Groups of unit indices given ``breaks[i]``: a chunk ends after unit ``i``."""
    groups: list[list[int]] = [[0]]
    for i, cut in enumerate(breaks):
        if cut:
            groups.append([i + 1])
        else:
            groups[-1].append(i + 1)
    return groups


def normalise(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector
