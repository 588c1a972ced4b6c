"""Late chunking: a chunk's vector pooled from its document's contextual token embeddings.

Günther et al., "Late Chunking: Contextual Chunk Embeddings Using Long-Context Embedding
Models" (2024). The transformer reads each *document* once; a chunk's vector is the model's
own pooling (for a mean-pooling model such as all-MiniLM-L6-v2: the mean of the token
embeddings, then L2-normalised) over the tokens that fall in the chunk's character span. Every
token so carries the context around it, whatever the chunk boundaries, and another chunking of
the same corpus costs no transformer pass at all: its vectors are pooled from the same token
embeddings, cached per document.

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

**As a proxy** (``embed_chunks(..., as_read=True)``, the first rung of a study behind
``fidelity: {proxy: late}``), a chunk's vector stands for the vector the model gives the chunk
embedded alone, and the model reads only the first :attr:`~.sentence_transformers.SentenceTransformerEmbedder.window`
word pieces of a text (254 for all-MiniLM-L6-v2) and drops the rest. So the proxy pools only
those: the chunk's first ``window`` tokens in document order, after its context header's, which
the model reads first (a header's tokens count against the window). Late chunking itself, the
configuration, pools every token of its chunk: its vectors do not come from the model reading the
chunk alone.

**The cache** (:class:`TokenEmbeddingCache`): one file per document,
``<folder>/<model key>/<sha256 of the document's text>.npz`` holding ``vectors`` (float16,
one row per token) and ``offsets`` (int32 character ``[start, end)`` per token), written
atomically and privately (0600 in a 0700 folder). The model key is the sha256 of the model's
identity (its folder's fingerprint), precision, window and overlap, so another model, precision
or window never reads these vectors, and a changed document has a new hash: only its own entry
is computed again. ``model.json`` in each model folder says which model it is. A damaged file
reads as missing and is computed again, and so does a file that does not prove it is the one asked
for: each file also holds ``document`` and ``model``, the keys it was written under, compared on
read (a file copied or renamed over another document's name would otherwise serve that
document's vectors). A temporary file a killed writer left behind is removed by the next cache
that opens the folder, once it is :data:`STALE_TEMP_S` old.

**Shared work.** Processes that read the same corpus at once (a study's workers, which all start
with a proxy trial) share the pass instead of each computing every document: a process computes a
document only under a claim, ``.<sha256>.claim`` in the model folder, created exclusively and
holding its host and process id (:meth:`TokenEmbeddingCache.claim`). A document another live process
holds is left to it and waited for after the others (:meth:`LateChunkingEmbedder.read_documents`); a
claim whose process is gone (killed) is taken over, as is one from another host after
:data:`STALE_CLAIM_S`.

**What a model needs.** Token embeddings with character offsets and a mean-pooling sentence
embedding: a sentence-transformers model whose modules are a Transformer, a mean Pooling and
optionally Normalize, with a fast tokenizer (``tokenizer.json``). A model pooled otherwise (CLS,
max, a Dense layer after pooling) is refused, and so is a hosted OpenAI-compatible API, which
returns one vector per text (:attr:`~tuner.embedding.registry.Provider.token_embeddings`).
Questions are embedded as usual, by the model itself.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import time
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from .._faults import fault_point
from .._io.cachedir import cache_dir
from .._io.files import atomic_writer, private_dir, write_atomically
from .._io.liveness import pid_alive, this_host
from ..errors import EmbeddingError
from ..text.tokens import count_span, count_tokens
from .base import DocumentSource, Embedder, LocatedText
from .cache import EmbeddingCache, EmbeddingCacheError, text_key
from .sentence_transformers import SentenceTransformerEmbedder

#: Share of a window its neighbour repeats (see the module docstring), when none is given.
OVERLAP_SHARE = 0.25
#: Version of the cache's file layout (part of the model key: a new layout never reads an old file).
FORMAT = 1
#: Folder of the token embeddings kept with the default cache (:func:`token_cache_for`).
FOLDER = "late-chunking"
#: Windows per transformer call (all of one document's: a document's batches never mix with another's).
WINDOWS_PER_CALL = 32
#: Age (seconds) after which a temporary file in a model folder is a killed writer's leftover: a
#: live writer replaces its file within seconds of creating it (one document's vectors, written at once).
STALE_TEMP_S = 3600
#: Age (seconds) after which a claim of another host is taken over: a process there cannot be asked
#: whether it lives, and no document takes hours to read.
STALE_CLAIM_S = 6 * 3600
#: Seconds between two looks at a document another process is computing.
CLAIM_POLL_S = 0.5


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
        raise ValueError(f"overlap={overlap} must be >= 0 and < window={window}")
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


class TokenEmbeddingCache:
    """Token embeddings per document on disk (layout in the module docstring); safe across
    processes (two writers of one document race harmlessly: each file is replaced atomically).

    Documents read or written by this process are also kept in memory, least recently used
    first out, up to ``memory_bytes`` (default a quarter of this machine's memory): a study pools
    every trial's chunks from the same documents, and reading them back costs more than pooling.
    """

    def __init__(self, folder: str | Path, *, memory_bytes: int | None = None) -> None:
        self.folder = Path(folder)
        self.memory_bytes = default_memory_bytes() if memory_bytes is None else memory_bytes
        self._memory: OrderedDict[tuple[str, str], DocumentTokens] = OrderedDict()
        self._held = 0
        self._swept: set[str] = set()

    def _remember(self, key: tuple[str, str], tokens: DocumentTokens) -> DocumentTokens:
        if key not in self._memory:
            self._memory[key] = tokens
            self._held += tokens.nbytes
        self._memory.move_to_end(key)
        while self._held > self.memory_bytes and self._memory:
            self._held -= self._memory.popitem(last=False)[1].nbytes
        return tokens

    def _path(self, model_key: str, document_key: str) -> Path:
        return self.folder / model_key / f"{document_key}.npz"

    def _model_folder(self, model_key: str) -> Path:
        """A model's folder, created private (0700) if need be."""
        try:
            return private_dir(self.folder / model_key)
        except OSError as exc:
            raise EmbeddingCacheError(f"cannot use the token-embedding cache {self.folder}: "
                                      f"{exc.strerror or exc}") from None

    def _sweep(self, model_key: str) -> None:
        """Once per model folder and cache: remove the temporary files that writers killed mid-write
        left (``.<key>.npz.<random>.tmp``, see :func:`~tuner._io.files.atomic_writer`), each as large as
        the document's vectors and never replaced by anyone. Only those older than :data:`STALE_TEMP_S`:
        a younger one may be another process's write in progress."""
        if model_key in self._swept:
            return
        self._swept.add(model_key)
        cutoff = time.time() - STALE_TEMP_S
        for leftover in (self.folder / model_key).glob(".*.npz.*.tmp"):
            try:
                if leftover.lstat().st_mtime < cutoff:
                    leftover.unlink()
            except OSError:
                continue  # gone meanwhile (another cache swept it), or not ours to remove

    def get(self, model_key: str, document_key: str) -> DocumentTokens | None:
        """The stored token embeddings, or None (missing, or damaged: computed again)."""
        if (kept := self._memory.get((model_key, document_key))) is not None:
            return self._remember((model_key, document_key), kept)
        self._sweep(model_key)
        path = self._path(model_key, document_key)
        try:
            with np.load(path, allow_pickle=False) as stored:
                # The keys the file was written under (absent in a file of an older chunkwise: computed again).
                if str(stored["document"]) != document_key or str(stored["model"]) != model_key:
                    return None
                vectors, offsets = stored["vectors"], stored["offsets"]
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return None
        if vectors.ndim != 2 or vectors.dtype != np.float16 or offsets.shape != (len(vectors), 2):
            return None
        # Not finite: a float16 whose exponent bits are all set (inf, nan); read as integers, the
        # check costs a tenth of np.isfinite on float16.
        if ((vectors.view(np.uint16) & 0x7C00) == 0x7C00).any():
            return None
        return self._remember((model_key, document_key), DocumentTokens(vectors, offsets.astype(np.int64)))

    def put(self, model_key: str, document_key: str, tokens: DocumentTokens, describe: dict[str, Any]) -> None:
        """Store one document's token embeddings (``describe``: what the model key stands for,
        written once as the model folder's ``model.json``)."""
        folder = self._model_folder(model_key)
        self._sweep(model_key)
        if not (folder / "model.json").exists():
            write_atomically(folder / "model.json", json.dumps(describe, indent=2) + "\n", EmbeddingCacheError)
        buffer = io.BytesIO()
        np.savez(buffer, vectors=tokens.vectors.astype(np.float16), offsets=tokens.offsets.astype(np.int32),
                 document=np.array(document_key), model=np.array(model_key))
        with atomic_writer(self._path(model_key, document_key), EmbeddingCacheError, binary=True) as out:
            out.write(buffer.getvalue())
            out.flush()  # the whole file in its temporary name, as a writer killed now leaves it
            fault_point("writing_tokens")
        # What was just computed is kept as it is (float16 already): no second copy of a long document.
        self._remember((model_key, document_key), DocumentTokens(tokens.vectors.astype(np.float16, copy=False),
                                                                 tokens.offsets.astype(np.int64, copy=False)))

    def has(self, model_key: str, document_key: str) -> bool:
        """Whether a document's token embeddings are stored (a damaged file still reads as missing)."""
        return (model_key, document_key) in self._memory or self._path(model_key, document_key).is_file()

    def _claim_path(self, model_key: str, document_key: str) -> Path:
        return self.folder / model_key / f".{document_key}.claim"

    def claim(self, model_key: str, document_key: str) -> bool:
        """Take the right to compute a document's token embeddings: True when this process holds it
        now, False while another live process does (see the module docstring, *Shared work*)."""
        self._model_folder(model_key)
        path = self._claim_path(model_key, document_key)
        for _ in range(2):  # a stale claim is removed once, then taken like a free one
            try:
                handle = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                if self.claim_alive(model_key, document_key):
                    return False
                with contextlib.suppress(FileNotFoundError):  # its holder finished meanwhile
                    path.unlink()
                continue
            except OSError as exc:
                raise EmbeddingCacheError(f"cannot use the token-embedding cache {self.folder}: "
                                          f"{exc.strerror or exc}") from None
            with os.fdopen(handle, "w") as out:
                out.write(json.dumps({"host": this_host(), "pid": os.getpid(), "since": time.time()}))
            return True
        return False

    def claim_alive(self, model_key: str, document_key: str) -> bool:
        """Whether a document is claimed by a process that may still be computing it: one on this
        host that runs, or one elsewhere whose claim is younger than :data:`STALE_CLAIM_S`."""
        path = self._claim_path(model_key, document_key)
        try:
            holder = json.loads(path.read_text(encoding="utf-8") or "{}")
            age = time.time() - path.stat().st_mtime
        except FileNotFoundError:
            return False
        except (OSError, ValueError):
            return True  # being written this instant, or unreadable: not ours to take
        if not isinstance(holder, dict) or not holder:
            return age < STALE_TEMP_S  # created, its holder not written yet (or killed between the two)
        if holder.get("host") != this_host():
            return age < STALE_CLAIM_S
        pid, since = holder.get("pid"), holder.get("since")
        # With the time it was taken ("since"), a later process that reuses the pid is not its holder.
        return isinstance(pid, int) and pid > 0 and pid_alive(pid, since if isinstance(since, float) else None)

    def release(self, model_key: str, document_key: str) -> None:
        """Give up a claim this process holds (its document stored, or its computation failed)."""
        with contextlib.suppress(FileNotFoundError):
            self._claim_path(model_key, document_key).unlink()

    def documents(self, model_key: str) -> list[str]:
        """The document keys stored for a model."""
        self._sweep(model_key)
        folder = self.folder / model_key
        return sorted(p.stem for p in folder.glob("*.npz")) if folder.is_dir() else []


def default_memory_bytes() -> int:
    """A quarter of this machine's physical memory (1 GiB where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE") // 4
    except (ValueError, OSError, AttributeError):
        return 1 << 30


def token_cache_for(cache: Any) -> TokenEmbeddingCache | None:
    """Where the token embeddings of an embedder with ``cache`` go: beside a local cache file
    (``embeddings.sqlite3`` -> ``embeddings-late-chunking/``; the default cache's folder holds
    ``late-chunking/`` beside it then), in this machine's cache folder for a shared cache in a
    database (they are large, and cheap to recompute next to the model); nowhere without a cache."""
    if cache is None:
        return None
    if isinstance(cache, EmbeddingCache):
        return TokenEmbeddingCache(cache.path.parent / f"{cache.path.stem}-{FOLDER}")
    return TokenEmbeddingCache(cache_dir() / FOLDER)


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
        self._overlap = overlap

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

    @cached_property
    def _transformer(self):
        """The model's Transformer module, after checking that the model pools by the mean."""
        model = self.base._model
        modules = [type(module).__name__ for module in model]
        pooling = getattr(model[1], "pooling_mode", None) if len(model) > 1 else None
        modes = (pooling,) if isinstance(pooling, str) else tuple(pooling or ())
        if (len(modules) < 2 or modules[0] != "Transformer" or modules[1] != "Pooling" or modes != ("mean",)
                or any(name != "Normalize" for name in modules[2:])):
            error = EmbeddingError(
                f"late chunking needs a mean-pooling model (Transformer, mean Pooling, optionally Normalize); "
                f"{self.base.path} is {' -> '.join(modules)}{f' pooled by {modes}' if modes else ''}")
            error.fatal = True
            raise error
        return model[0]

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
        import torch

        encoding = self.base._tokenizer.encode(text, add_special_tokens=False)
        ids = np.asarray(encoding.ids, dtype=np.int64)
        offsets = np.asarray(encoding.offsets, dtype=np.int64).reshape(-1, 2)
        transformer = self._transformer
        dimension = self.dimension
        if len(ids) == 0:
            return DocumentTokens(np.zeros((0, dimension), dtype=np.float16), offsets)
        starts = window_starts(len(ids), self.window, self.overlap)
        owner = owning_window(len(ids), starts, self.window)
        length = min(self.window, len(ids))
        prefix, suffix = self.base.special_tokens
        rows = np.stack([np.concatenate([prefix, ids[s:s + length], suffix]) for s in starts])
        out = np.zeros((len(ids), dimension), dtype=np.float16)
        device = self.base.device
        for first in range(0, len(starts), WINDOWS_PER_CALL):
            batch = rows[first:first + WINDOWS_PER_CALL]
            features = {"input_ids": torch.from_numpy(batch).to(device),
                        "attention_mask": torch.ones(batch.shape, dtype=torch.int64, device=device),
                        "token_type_ids": torch.zeros(batch.shape, dtype=torch.int64, device=device)}
            with torch.inference_mode(), self.base._autocast():
                embedded = transformer(features)["token_embeddings"].float().cpu().numpy()
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

        self.pass_tokens += self.read_documents(rows_of, ready)
        shared = self.tokens is not None
        for document, rows in by_document.items():
            before = self.stats.computed_tokens
            tokens = self.document_tokens(documents.document(document).text)
            self.pass_tokens += self.stats.computed_tokens - before
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
