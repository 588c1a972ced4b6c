"""Late chunking: a chunk's vector pooled from its document's contextual token embeddings.

Günther et al., "Late Chunking: Contextual Chunk Embeddings Using Long-Context Embedding
Models" (2024). The transformer reads each *document* once; a chunk's vector is the model's
own pooling (for a mean-pooling model such as all-MiniLM-L6-v2: the mean of the token
embeddings, then L2-normalised) over the tokens that fall in the chunk's character span. Every
token so carries the context around it, whatever the chunk boundaries, and another chunking of
the same corpus costs no transformer pass at all: its vectors are pooled from the same token
embeddings, cached per document.

The pieces: :mod:`.late_pooling` (the windows a long document is read in, and a chunk's vector
pooled from its tokens' embeddings), :mod:`.late_cache` (the token embeddings kept per document on
disk, and the claims that share one pass among processes) and this module, the embedder that
computes them through the model's public interface
(:meth:`~.sentence_transformers.SentenceTransformerEmbedder.token_embeddings`) and pools chunks.

**As a proxy** (``embed_chunks(..., as_read=True)``, the first rung of a study behind
``fidelity: {proxy: late}``), a chunk's vector stands for the vector the model gives the chunk
embedded alone, and the model reads only the first :attr:`~.sentence_transformers.SentenceTransformerEmbedder.window`
word pieces of a text (254 for all-MiniLM-L6-v2) and drops the rest. So the proxy pools only
those: the chunk's first ``window`` tokens in document order, after its context header's, which
the model reads first (a header's tokens count against the window). Late chunking itself, the
configuration, pools every token of its chunk: its vectors do not come from the model reading the
chunk alone.

**What a model needs.** Token embeddings with character offsets and a mean-pooling sentence
embedding: a sentence-transformers model whose modules are a Transformer, a mean Pooling and
optionally Normalize, with a fast tokenizer (``tokenizer.json``). A model pooled otherwise (CLS,
max, a Dense layer after pooling) is refused, and so is a hosted OpenAI-compatible API, which
returns one vector per text (:attr:`~tuner.embedding.registry.Provider.token_embeddings`).
Questions are embedded as usual, by the model itself.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from typing import Any

import numpy as np

from ..errors import EmbeddingError
from ..text.tokens import count_span, count_tokens
from .base import DocumentSource, Embedder, LocatedText
from .cache import text_key
from .late_cache import TokenEmbeddingCache, token_cache_for
from .late_pooling import DocumentTokens, owning_window, unit_rows, window_starts
from .sentence_transformers import SentenceTransformerEmbedder

#: Share of a window its neighbour repeats (see the module docstring), when none is given.
OVERLAP_SHARE = 0.25
#: Version of the cache's file layout (part of the model key: a new layout never reads an old file).
FORMAT = 1
#: Windows per transformer call (all of one document's: a document's batches never mix with another's).
WINDOWS_PER_CALL = 32
#: Seconds between two looks at a document another process is computing.
CLAIM_POLL_S = 0.5


class LateChunkingEmbedder(Embedder):
    """Texts embedded by ``base`` (questions, a semantic chunker's units), chunks pooled from
    their document's token embeddings (:meth:`embed_chunks`); see the module docstring.

    Args:
        base: the sentence-transformers model (its precision and device apply).
        tokens: where per-document token embeddings persist (None: computed on every call).
        overlap: tokens a window repeats of the one before; default a quarter of the window.
    """

    def __init__(self, base: SentenceTransformerEmbedder, *, tokens: TokenEmbeddingCache | None = None,
                 overlap: int | None = None) -> None:
        super().__init__(cache=None)
        if not isinstance(base, SentenceTransformerEmbedder):
            raise EmbeddingError(f"late chunking needs a local sentence-transformers model, which gives each token "
                                 f"its embedding; {base.identity} returns one vector per text")
        self.base = base
        self.tokens = tokens
        self.stats = base.stats  # one set of counters: questions and documents alike are the model's work
        #: Of ``stats.computed_tokens``: the documents' tokens this embedder read for their token embeddings
        #: (the pass over a corpus; a proxy's headers and questions are the rest).
        self.pass_tokens = 0
        #: The same pass in the model's own tokens, every window it read (``stats.own_tokens``' share).
        self.pass_own_tokens = 0
        self._overlap = overlap
        self._pooling_checked = False

    @property
    def identity(self) -> str:
        """The base model's: a text (a question) is embedded as the model embeds it."""
        return self.base.identity

    @property
    def max_input_tokens(self) -> int | None:  # type: ignore[override]
        return self.base.max_input_tokens

    @cached_property
    def window(self) -> int:
        """Document tokens per window, and the most of a chunk a proxy pools: what the model reads of
        a text (:attr:`~.sentence_transformers.SentenceTransformerEmbedder.window`, its input window less
        its special tokens)."""
        room = self.base.window
        if room is None:
            raise EmbeddingError(f"late chunking needs the model's input window (max_seq_length in "
                                 f"{self.base.path / 'sentence_bert_config.json'})")
        if room < 2:
            raise EmbeddingError(f"the input window of {self.base.path} ({self.base.max_input_tokens} tokens) is "
                                 "too small for late chunking")
        return room

    @cached_property
    def overlap(self) -> int:
        """Tokens each window repeats of the one before."""
        overlap = int(self.window * OVERLAP_SHARE) if self._overlap is None else self._overlap
        if not 0 <= overlap < self.window:
            raise EmbeddingError(f"late chunking overlap={overlap} must be >= 0 and < the window "
                                 f"({self.window} tokens)")
        return overlap

    @cached_property
    def model_key(self) -> str:
        """Names this model's token embeddings in the cache: identity, precision, window, overlap."""
        return hashlib.sha256(json.dumps(self.describe(), sort_keys=True).encode()).hexdigest()[:16]

    def pending_tokens(self, texts: Iterable[str]) -> float:
        """What the pass over documents ``texts`` still costs, in cl100k tokens (the calibration's unit,
        counted as the evaluator counts them): those of the documents whose token embeddings are not
        cached, times what the windows' overlap repeats (``window / (window - overlap)``)."""
        cached = set(self.tokens.documents(self.model_key)) if self.tokens is not None else set()
        missing = sum(count_span(text, 0, len(text)) for text in texts if text_key(text).hex() not in cached)
        return missing * self.window / (self.window - self.overlap)

    def describe(self) -> dict[str, Any]:
        """What :attr:`model_key` stands for (``model.json`` in the cache)."""
        return {"identity": self.base.identity, "precision": self.base.precision, "window": self.window,
                "overlap": self.overlap, "format": FORMAT}

    def _check_pooling(self) -> None:
        """Refuse a model that does not pool by the mean (fatal: every later trial would fail the same
        way); loads the model. Checked once per embedder."""
        if self._pooling_checked:
            return
        modules, modes = self.base.modules, self.base.pooling_modes
        if (len(modules) < 2 or modules[0] != "Transformer" or modules[1] != "Pooling" or modes != ("mean",)
                or any(name != "Normalize" for name in modules[2:])):
            error = EmbeddingError(
                f"late chunking needs a mean-pooling model (Transformer, mean Pooling, optionally Normalize); "
                f"{self.base.path} is {' -> '.join(modules)}{f' pooled by {modes}' if modes else ''}")
            error.fatal = True
            raise error
        self._pooling_checked = True

    def _embed(self, texts: list[str]) -> np.ndarray:
        return self.base._embed(texts)

    def embed(self, texts, progress=None) -> np.ndarray:
        """Texts as the base model embeds them (through its cache)."""
        return self.base.embed(texts, progress=progress)

    @property
    def dimension(self) -> int:
        return self.base.dimension

    def unread_characters(self, texts) -> np.ndarray:
        """Nothing of a chunk goes unread: its tokens come from windows that cover the document."""
        return np.zeros(len(list(texts)), dtype=np.int64)

    def document_tokens(self, text: str) -> DocumentTokens:
        """A document's token embeddings, from the cache or computed (and cached)."""
        key = text_key(text).hex()
        if self.tokens is not None and (found := self.tokens.get(self.model_key, key)) is not None:
            return found
        started = time.perf_counter()
        computed = self._compute(text)
        self.stats.model_seconds += time.perf_counter() - started
        self.stats.computed += 1
        tokens = count_tokens(text)
        self.stats.computed_tokens += tokens
        self.stats.read_tokens += tokens
        if self.tokens is not None:
            self.tokens.put(self.model_key, key, computed, self.describe())
        return computed

    def read_documents(self, texts: Iterable[str], ready: Callable[[str], None] | None = None) -> int:
        """The pass: compute and cache the token embeddings of every document of ``texts`` not cached
        yet, sharing the work with the other processes that read them now (module docstring, *Shared
        work*): a document another live process holds is left to it, then waited for after the
        others, and computed here only if that process is gone. ``ready`` is called with each text
        once its token embeddings are stored (a progress report). Returns the tokens computed here.
        Without a cache nothing is shared, and each document is computed as its chunks are pooled."""
        before = self.stats.computed_tokens
        if self.tokens is None:
            return 0
        pending = {text_key(text).hex(): text for text in texts}
        held_elsewhere = []
        for key, text in pending.items():
            if not self._read_claimed(key, text):
                held_elsewhere.append(key)
            elif ready is not None:
                ready(text)
        for key in held_elsewhere:
            while not self.tokens.has(self.model_key, key) and self.tokens.claim_alive(self.model_key, key):
                time.sleep(CLAIM_POLL_S)
            if not self.tokens.has(self.model_key, key):
                self._read_claimed(key, pending[key], wait=True)
            if ready is not None:
                ready(pending[key])
        return self.stats.computed_tokens - before

    def _read_claimed(self, key: str, text: str, *, wait: bool = False) -> bool:
        """Compute one document under its claim unless cached: False when another live process holds
        it (and ``wait`` is off; with ``wait``, this process computes it whatever the claim)."""
        if self.tokens.has(self.model_key, key):
            return True
        claimed = self.tokens.claim(self.model_key, key)
        if not claimed and not wait:
            return False
        try:
            # Stored meanwhile: its holder wrote it and let go between the look above and the claim.
            if not self.tokens.has(self.model_key, key):
                self.document_tokens(text)
        finally:
            if claimed:
                self.tokens.release(self.model_key, key)
        return True

    def _compute(self, text: str) -> DocumentTokens:
        ids, offsets = self.base.word_pieces(text)
        self._check_pooling()
        dimension = self.dimension
        if len(ids) == 0:
            return DocumentTokens(np.zeros((0, dimension), dtype=np.float16), offsets)
        starts = window_starts(len(ids), self.window, self.overlap)
        owner = owning_window(len(ids), starts, self.window)
        length = min(self.window, len(ids))
        prefix, suffix = self.base.special_tokens
        rows = np.stack([np.concatenate([prefix, ids[s:s + length], suffix]) for s in starts])
        self.stats.own_tokens += len(starts) * length  # every window, its overlap with the last read again
        out = np.zeros((len(ids), dimension), dtype=np.float16)
        for first in range(0, len(starts), WINDOWS_PER_CALL):
            embedded = self.base.token_embeddings(rows[first:first + WINDOWS_PER_CALL])
            if not np.isfinite(embedded).all():
                raise EmbeddingError(f"the model {self.identity} returned non-finite token embeddings")
            for row, start in enumerate(starts[first:first + WINDOWS_PER_CALL]):
                mine = np.flatnonzero(owner[start:start + length] == first + row)
                out[start + mine] = embedded[row, len(prefix) + mine]
        return DocumentTokens(out, offsets)

    def embed_chunks(self, documents: DocumentSource, chunks: Sequence[LocatedText],
                     progress: Callable[[int], None] | None = None, headers: Sequence[str] | None = None,
                     as_read: bool = False) -> np.ndarray:
        """One unit vector per chunk, pooled from its document's token embeddings (each document
        read once, or served by the cache).

        ``headers`` (one per chunk, empty for none) serve a proxy of a configuration whose chunks are
        indexed after a context header, which late chunking cannot read: a chunk's mean then also
        counts its header's tokens, as the model embeds the header alone (cached as a document is).
        ``as_read`` (a proxy's): only the tokens the model reads of the chunk embedded alone, its
        header's first and then the chunk's, :attr:`window` in all (see the module docstring)."""
        called = time.perf_counter()
        chunks = list(chunks)
        by_document: dict[str, list[int]] = {}
        for row, chunk in enumerate(chunks):
            by_document.setdefault(chunk.document, []).append(row)
        out = np.zeros((len(chunks), self.dimension), dtype=np.float32)
        header_sums: dict[str, tuple[np.ndarray, int]] = {}
        window = self.window if as_read else None

        def header_sum(header: str) -> tuple[np.ndarray, int]:
            if header not in header_sums:
                own = self.document_tokens(header).vectors.astype(np.float32)[:window]
                header_sums[header] = own.sum(axis=0), len(own)
            return header_sums[header]

        # Progress counts a document's chunks once its token embeddings are ready (the pass is the slow
        # part; pooling them takes a moment), or, without a cache, once they are pooled.
        rows_of: dict[str, int] = {}
        for document, rows in by_document.items():
            key = documents.document(document).text
            rows_of[key] = rows_of.get(key, 0) + len(rows)

        def ready(text: str) -> None:
            if progress is not None:
                progress(rows_of[text])

        own_before = self.stats.own_tokens
        self.pass_tokens += self.read_documents(rows_of, ready)
        self.pass_own_tokens += self.stats.own_tokens - own_before
        shared = self.tokens is not None
        for document, rows in by_document.items():
            before, own_before = self.stats.computed_tokens, self.stats.own_tokens
            tokens = self.document_tokens(documents.document(document).text)
            self.pass_tokens += self.stats.computed_tokens - before
            self.pass_own_tokens += self.stats.own_tokens - own_before
            given = [headers[row] if headers is not None else "" for row in rows]
            limits = None if window is None else [window - header_sum(header)[1] if header else window
                                                  for header in given]
            sums, counts = tokens.sum_chunks([chunks[row].all_spans for row in rows], limits)
            for position, header in enumerate(given):
                if header:
                    extra, count = header_sum(header)
                    sums[position] += extra
                    counts[position] += count
            out[rows] = unit_rows(sums / np.maximum(counts, 1).astype(np.float32)[:, None])
            if progress is not None and not shared:
                progress(len(rows))
        self.stats.texts += len(chunks)
        self.stats.tokens += sum(chunk.token_count for chunk in chunks)
        self.stats.seconds += time.perf_counter() - called
        return out


def late_chunking_embedder(base: Embedder, cache: Any = None, *, overlap: int | None = None) -> LateChunkingEmbedder:
    """``base`` with late chunking, its token embeddings kept beside ``cache`` (:func:`token_cache_for`)."""
    return LateChunkingEmbedder(base, tokens=token_cache_for(cache), overlap=overlap)
