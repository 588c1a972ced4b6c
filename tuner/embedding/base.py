"""The embedder interface: normalised float32 vectors, batched, cached."""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..errors import EmbeddingError
from ..text.tokens import count_tokens_batch
from .cache import EmbeddingCache, text_key


@dataclass
class EmbeddingStats:
    """Counters of one embedder since its creation.

    ``texts``/``tokens`` count every text asked for, cached or not (what a cold index
    would embed); ``computed``/``computed_tokens`` count those the model really embedded.
    """

    texts: int = 0
    tokens: int = 0
    computed: int = 0
    computed_tokens: int = 0
    #: Of ``computed_tokens``, those the model read: each text's up to :attr:`Embedder.max_input_tokens`
    #: (a truncated text costs no more than its window, so a throughput is measured in these).
    read_tokens: int = 0
    model_seconds: float = 0.0
    seconds: float = 0.0  #: wall time inside embed(): cache lookups and model
    #: Tokens a hosted API reported using (``usage.total_tokens``), what it bills; 0 for local models.
    api_tokens: int = 0
    #: The model's own tokens it ran (:meth:`Embedder.tokens_run`: each text up to its window; late
    #: chunking, every window it read, overlaps each time): the work as the model does it.
    own_tokens: int = 0

    @property
    def hit_rate(self) -> float:
        """Share of requested texts served from the cache (1.0 when nothing was asked)."""
        return 1.0 if self.texts == 0 else 1.0 - self.computed / self.texts


#: Texts :meth:`Embedder.tokens_per_cl100k` tokenises at most (a ratio over a corpus shows in a sample).
RATIO_SAMPLE = 256


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors.

    Subclasses implement :meth:`_embed` (the model call on one batch) and
    :attr:`identity` (a string that changes whenever the vectors would). :meth:`embed`
    adds deduplication, the persistent cache and batching. Batches hold texts of similar
    length (see :meth:`_batch_lengths`): a model pads every text of a batch to the longest
    one, so batches in document order waste work on padding.

    Args:
        cache: where vectors persist; ``None`` disables caching.
        batch_size: texts per model call.
    """

    def __init__(self, *, cache: EmbeddingCache | None = None, batch_size: int = 64) -> None:
        self.cache = cache
        self.batch_size = batch_size
        self.stats = EmbeddingStats()

    @property
    @abstractmethod
    def identity(self) -> str:
        """Model identity for the cache key, e.g. ``"sentence-transformers:all-MiniLM-L6-v2:1a2b..."``."""

    #: The most tokens of its own the model reads from one text (None: unknown); the rest
    #: of a longer text is silently truncated, so a long chunk is judged on its first part.
    max_input_tokens: int | None = None

    #: List price of a hosted model, USD per million tokens (None: local, or not known).
    usd_per_mtok: float | None = None

    def unread_characters(self, texts: Sequence[str]) -> np.ndarray:
        """For each text, how many of its characters the model never reads (0 when it fits in
        :attr:`max_input_tokens`). This default counts cl100k tokens, as OpenAI's models do,
        and prorates the characters of a truncated text."""
        limit = self.max_input_tokens
        out = np.zeros(len(texts), dtype=np.int64)
        if limit is None:
            return out
        for i, (text, tokens) in enumerate(zip(texts, count_tokens_batch(list(texts)))):
            if tokens > limit:
                out[i] = round(len(text) * (tokens - limit) / tokens)
        return out

    def own_tokens(self, texts: Sequence[str]) -> list[int] | None:
        """How many tokens of its own the model counts in each text, special tokens left out;
        None where its tokens are cl100k's (OpenAI's models) or not known."""
        return None

    def tokens_run(self, texts: Sequence[str], cl100k: Sequence[int] | None = None) -> int:
        """The tokens of its own the model reads of ``texts`` embedded each alone: each text's
        :meth:`own_tokens` up to the window it reads (``window`` where the model declares one, else
        :attr:`max_input_tokens`), special tokens left out; cl100k tokens (``cl100k``, or counted)
        where the model's own are cl100k's or unknown.

        >>> class Words(Embedder):
        ...     identity, max_input_tokens = "words", 3
        ...     def own_tokens(self, texts): return [len(t.split()) for t in texts]
        ...     def _embed(self, texts): return np.ones((len(texts), 2))
        >>> Words().tokens_run(["a b", "a b c d e"])  # the second text read up to 3
        5
        """
        own = self.own_tokens(list(texts))
        if own is None:
            own = list(cl100k) if cl100k is not None else count_tokens_batch(list(texts))
        window = getattr(self, "window", None) or self.max_input_tokens
        return int(sum(own) if window is None else sum(min(n, window) for n in own))

    def _tokens_read(self, texts: list[str], cl100k: list[int], batch_lengths: list[int]) -> int:
        """:meth:`tokens_run` of texts just embedded, given their cl100k counts and :meth:`_batch_lengths`
        (a model whose batch lengths are its own tokens read spares a second tokenisation)."""
        return self.tokens_run(texts, cl100k)

    def tokens_per_cl100k(self, texts: Sequence[str]) -> float | None:
        """The model's own tokens per cl100k token over ``texts`` (at most :data:`RATIO_SAMPLE` of
        them, evenly spaced): what a chunk size, counted in cl100k tokens, is in the model's tokens.
        Near 1 for English and a word-piece model; several times more where its vocabulary knows
        a language poorly (Korean for all-MiniLM-L6-v2). None when the model does not say.
        """
        texts = list(texts)
        if not texts:
            return None
        sample = texts[::max(1, -(-len(texts) // RATIO_SAMPLE))]
        own = self.own_tokens(sample)
        if own is None:
            return None
        cl100k = sum(count_tokens_batch(sample))
        return sum(own) / cl100k if cl100k else None

    @abstractmethod
    def _embed(self, texts: list[str]) -> np.ndarray:
        """Embed one batch; returns an array of shape ``(len(texts), dim)``."""

    def _batch_lengths(self, texts: list[str]) -> list[int]:
        """Length of each text as the model will see it, to batch texts of similar length.

        Characters by default; a local model overrides this with its own tokenizer's
        (truncated) length, which predicts its padding best. Only the batching order
        depends on it, never a vector's cache key.
        """
        return [len(t) for t in texts]

    def _batches(self, texts: list[str]) -> list[list[int]]:
        """Positions in ``texts`` (missing texts, longest first) of each model call:
        :attr:`batch_size` at a time by default; a hosted API fills requests to its limits."""
        return [list(range(i, min(i + self.batch_size, len(texts)))) for i in range(0, len(texts), self.batch_size)]

    def _embed_batches(self, batches: list[list[str]]) -> Iterator[tuple[int, np.ndarray]]:
        """``(batch number, vectors)`` for each batch, in any order: one after the other here;
        a hosted API keeps several requests in flight."""
        for number, batch in enumerate(batches):
            yield number, self._embed(batch)

    def embed(self, texts: Sequence[str],
              progress: Callable[[int], None] | None = None) -> np.ndarray:
        """Vectors of ``texts``, shape ``(len(texts), dim)``, float32, unit norm.

        ``progress`` is called with the number of requested texts done so far each
        time some are: once for the cache hits, then after each model batch.
        """
        called = time.perf_counter()
        texts = list(texts)
        multiplicity = Counter(texts)
        unique = list(multiplicity)
        keys = [text_key(t) for t in unique]
        cached = self.cache.get_many(self.identity, keys) if self.cache is not None else {}
        missing = [i for i, key in enumerate(keys) if key not in cached]
        vectors: dict[bytes, np.ndarray] = dict(cached)
        if progress is not None:
            progress(len(texts) - sum(multiplicity[unique[j]] for j in missing))
        if missing:
            started = time.perf_counter()
            # Longest first (ties in request order): batches of similar length pad little, and
            # the largest batch comes first, so a memory limit shows at once.
            lengths = self._batch_lengths([unique[j] for j in missing])
            missing = [j for _, j in sorted(zip(lengths, missing), key=lambda pair: -pair[0])]
            batches = [[missing[p] for p in positions] for positions in self._batches([unique[j] for j in missing])]
            for number, raw in self._embed_batches([[unique[j] for j in batch] for batch in batches]):
                batch = batches[number]
                out = _normalise(np.asarray(raw, dtype=np.float32))
                if not np.isfinite(out).all():  # never cache, index or score a NaN (see cache.usable)
                    raise EmbeddingError(f"the model {self.identity} returned non-finite values (NaN or infinity) "
                                         f"for {int((~np.isfinite(out).all(axis=1)).sum())} of {len(batch)} texts")
                if self.cache is not None:
                    self.cache.put_many(self.identity, [keys[j] for j in batch], out)
                for j, vector in zip(batch, out):
                    vectors[keys[j]] = vector
                if progress is not None:
                    progress(sum(multiplicity[unique[j]] for j in batch))
            self.stats.model_seconds += time.perf_counter() - started
            self.stats.computed += len(missing)
            counts = count_tokens_batch([unique[j] for j in missing])
            self.stats.computed_tokens += sum(counts)
            window = self.max_input_tokens
            self.stats.read_tokens += sum(counts) if window is None else sum(min(c, window) for c in counts)
            self.stats.own_tokens += self._tokens_read([unique[j] for j in missing], counts, lengths)
        self.stats.texts += len(texts)
        self.stats.tokens += sum(count_tokens_batch(texts))
        if not texts:
            self.stats.seconds += time.perf_counter() - called
            return np.zeros((0, self.dimension), dtype=np.float32)
        by_text = {t: vectors[k] for t, k in zip(unique, keys)}
        out = np.stack([by_text[t] for t in texts])
        self.stats.seconds += time.perf_counter() - called
        return out

    def embed_uncached(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of ``texts`` straight from the model, shape ``(len(texts), dim)``, float32, unit
        norm: :attr:`batch_size` texts per model call in the order given, with no cache, no
        deduplication, no batching by length and no :attr:`stats` (what :meth:`embed` adds). For
        measuring the model itself: its throughput, or its vectors in document-order batches."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        return np.concatenate([_normalise(np.asarray(self._embed(texts[i:i + self.batch_size]), dtype=np.float32))
                               for i in range(0, len(texts), self.batch_size)])

    def embed_chunks(self, documents: DocumentSource, chunks: Sequence[LocatedText],
                     progress: Callable[[int], None] | None = None) -> np.ndarray:
        """One unit vector per chunk, shape ``(len(chunks), dim)``: here each chunk's text,
        embedded on its own (:meth:`embed`). A late-chunking embedder
        (:class:`~tuner.embedding.late.LateChunkingEmbedder`) pools it from its document's
        token embeddings instead, which is why the documents are given (a
        :class:`~tuner.data.corpus.Corpus` is one)."""
        return self.embed([chunk.text for chunk in chunks], progress=progress)

    @property
    def dimension(self) -> int:
        """Vector dimension (may embed a probe text to find out)."""
        return int(self._embed(["dimension probe"]).shape[1])


class HasText(Protocol):
    """A document: its text."""

    text: str


class DocumentSource(Protocol):
    """Documents by id (a :class:`~tuner.data.corpus.Corpus`: this package sits below ``data``)."""

    def document(self, document_id: str) -> HasText: ...


class LocatedText(Protocol):
    """A chunk (:class:`~tuner.chunkers.base.Chunk`): its document, exact character spans, text
    and cl100k token count."""

    document: str
    text: str
    token_count: int

    @property
    def all_spans(self) -> tuple[tuple[int, int], ...]: ...


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1, norms)
