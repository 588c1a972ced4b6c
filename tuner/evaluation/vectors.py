"""How an evaluation embeds: late-chunked vectors corpus by corpus, what the embedder counted while it
worked (texts, tokens, cache hits, seconds), and the progress bar."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..chunkers import Chunk
from ..data.corpus import Corpus
from ..embedding import Embedder
from ..embedding.late import LateChunkingEmbedder
from ..errors import EmbeddingError


def late_vectors(model: Embedder, corpora: list[Corpus], chunks: list[Chunk], chunk_corpora: list[str],
                 progress: Callable[[int], None] | None, headers: list[str] | None = None, *,
                 as_read: bool = False) -> np.ndarray:
    """Late-chunked vectors of ``chunks`` (see :mod:`tuner.embedding.late`), corpus by corpus; ``headers``
    (a proxy's, one per chunk) are pooled with their chunks; ``as_read`` (a proxy's): only what the model
    reads of each chunk embedded alone, its first window of word pieces, the header's first."""
    if not isinstance(model, LateChunkingEmbedder):
        raise EmbeddingError(f"the configuration asks for late chunking, but the embedder given ({model.identity}) "
                             "embeds texts alone: pass the configuration's embedder (config.embedder.build())")
    vectors = np.zeros((len(chunks), model.dimension), dtype=np.float32)
    labels = np.asarray(chunk_corpora)
    for corpus in corpora:
        rows = np.flatnonzero(labels == corpus.name)
        if len(rows):
            vectors[rows] = model.embed_chunks(corpus, [chunks[i] for i in rows], progress=progress,
                                               headers=None if headers is None else [headers[i] for i in rows],
                                               as_read=as_read)
    return vectors


def stats_snapshot(model: Embedder) -> tuple[int, int, int, int, float, float]:
    s = model.stats
    return s.texts, s.tokens, s.computed, s.computed_tokens, s.model_seconds, s.seconds


def stats_delta(model: Embedder, before: tuple) -> dict[str, Any]:
    texts, tokens, computed, computed_tokens, model_seconds, seconds = (
        a - b for a, b in zip(stats_snapshot(model), before))
    return {
        "model": model.identity,
        "texts": texts,
        "tokens": tokens,
        "computed_texts": computed,
        "computed_tokens": computed_tokens,
        "model_seconds": model_seconds,
        "seconds": seconds,
        "cache_hit_rate": 1.0 if texts == 0 else 1.0 - computed / texts,
    }


class progress_bar:
    """A tqdm bar on stderr when asked for and stderr is a terminal; else a no-op."""

    def __init__(self, enabled: bool, total: int) -> None:
        self.bar = None
        if enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, desc="embedding", unit="text", leave=False, disable=None)

    def __enter__(self):
        return None if self.bar is None else self.bar.update

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
