"""Score one configuration end to end: chunk, embed, index, retrieve, measure."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import numpy as np

from ..chunkers import Chunk
from ..chunkers.config import ChunkerConfig
from ..data.corpus import Corpus
from ..data.evalset import EvaluationSet
from ..data.repeats import OccurrenceTable, RepeatSummary
from ..embedding import Embedder, EmbeddingCache
from ..embedding.config import EmbedderConfig
from ..embedding.late import LateChunkingEmbedder
from ..errors import EmbeddingError
from ..retrieval import BM25Index, make_index, retrieve
from ..retrieval.config import RetrievalConfig
from ..retrieval.context import contextualize, header_of
from ..retrieval.llm_context import context_client
from ..text.tokens import count_span, count_tokens_batch
from .config import EvaluationConfig
from .fidelity import FULL, Fidelity, distractor_sample, holding_references
from .metrics import ChunkIntervals, QueryScores, UnitSpace, query_references, score, summarise


@dataclass
class EvaluationResult:
    """What :func:`evaluate` measured.

    Attributes:
        config: the configuration scored (every parameter spelled out).
        metrics: ``{"overall": {metric: {"mean", "std"}}, "per_corpus": {...}}`` at
            ``config.retrieval.k``, as fractions.
        scores: per-query scores at every ``k`` up to the one searched.
        chunks: every chunk, in corpus and document order; ``chunk_corpora`` gives
            each chunk's corpus.
        query_corpora: each query's corpus, in evaluation-set order.
        ranking: retrieved chunk indices per query, best first, shape
            ``(n_queries, k)``; ``-1`` marks an empty slot.
        query_tokens: mean cl100k tokens per question.
        indexed_texts: what was embedded and indexed for each chunk: its text, with the
            context header in front when ``config.retrieval.context`` asks for one.
        chunks_searched: mean number of chunks in the index a query searched.
        timings: seconds per stage (``chunking``, split into ``unit_embedding`` and
            ``segmentation`` for semantic chunkers; ``embedding``, ``retrieval``,
            ``scoring``, ``total``).
        embedding: texts and tokens embedded for the index and the questions, the cache
            hit rate, and what semantic chunkers embedded while splitting (``unit_*``);
            ``index_tokens``: cl100k tokens of the texts the index embedded (headers
            included; 0 for ``bm25``, which embeds nothing).
        notes: things the caller should know about how the figures were obtained, one
            sentence each (e.g. ``k`` larger than the chunks there were to retrieve, so
            queries retrieved fewer than ``k``). The command line prints them.
        repeats: how many references occur more than once in their corpus (scored at any
            copy unless ``config.copies`` is ``"marked"``).
        window: the embedder's input window (``max_input_tokens``) and what lies past it:
            ``truncated_chunks``, the share of chunks the model reads only in part, and
            ``unread_text``, the share of all chunk characters it never reads (of the
            chunks indexed).
        fidelity: the share of distractor chunks indexed (1.0: every chunk; see
            :mod:`tuner.evaluation.fidelity`); ``indexed_chunks`` counts the chunks the index held.
            Chunk counts, tokens and the modelled latency and cost always describe the
            full index.
        first_stage: with a reranker, ``{"candidates": n, "recall": per-query recall}`` of the
            ``n`` candidates the first stage handed it (None without one): what the reranker
            could at best keep, beside the reranked recall at ``k``.
    """

    config: EvaluationConfig
    metrics: dict[str, Any]
    scores: QueryScores
    chunks: list[Chunk]
    chunk_corpora: list[str]
    query_corpora: list[str]
    ranking: np.ndarray
    query_tokens: float
    chunks_searched: float
    timings: dict[str, float] = field(default_factory=dict)
    embedding: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    repeats: RepeatSummary | None = None
    window: dict[str, Any] = field(default_factory=dict)
    indexed_texts: list[str] = field(default_factory=list, repr=False)
    fidelity: float = 1.0
    indexed_chunks: int | None = None
    first_stage: dict[str, Any] | None = None
    #: The proxy that scored this result (a first rung: see :class:`~tuner.evaluation.fidelity.Fidelity`), or None.
    proxy: str | None = None
    #: The same chunks and vectors ranked by the other retrievals asked for (``variants`` of
    #: :func:`evaluate_rungs`: an inner loop's fusions), each a result of its own.
    variants: tuple[EvaluationResult, ...] = field(default=(), repr=False)
    #: What :attr:`chunk_stats` and :attr:`chunk_token_counts` computed from ``chunks``, shared with
    #: every :meth:`cut` (the same chunks): an inner loop scores 150 cuts of one result.
    _chunk_memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def metrics_at(self, k: int) -> dict[str, Any]:
        """The metric summary at another cut-off ``k`` (up to the searched one)."""
        return summarise(self.scores.at(k), self.query_corpora)

    def cut(self, k: int) -> EvaluationResult:
        """This result at a smaller cut-off ``k``: the first ``k`` chunks of the same ranking, as an
        evaluation at ``k`` would have retrieved them (a reranker's candidates aside, which stay)."""
        if not 1 <= k <= self.config.retrieval.k:
            raise ValueError(f"k={k} is outside 1..{self.config.retrieval.k}, the cut-offs this result ranked")
        config = dataclasses.replace(self.config, retrieval=dataclasses.replace(self.config.retrieval, k=k))
        notes = [note for note in self.notes if not note.startswith("k=")]
        if note := _short_index_note(k, self._chunks_per_index()):
            notes.insert(0, note)
        return dataclasses.replace(self, config=config, metrics=self.metrics_at(k), ranking=self.ranking[:, :k],
                                   notes=notes, variants=(), _chunk_memo=self._chunk_memo)

    def _chunks_per_index(self) -> dict[str, int]:
        if self.config.retrieval.scope == "pooled":
            return {"": len(self.chunks)}
        return {name: self.chunk_corpora.count(name) for name in dict.fromkeys(self.query_corpora)}

    @property
    def chunk_token_counts(self) -> np.ndarray:
        """Each chunk's token count (read-only)."""
        if "token_counts" not in self._chunk_memo:
            counts = np.array([c.token_count for c in self.chunks], dtype=np.float64)
            counts.flags.writeable = False
            self._chunk_memo["token_counts"] = counts
        return self._chunk_memo["token_counts"]

    @property
    def chunk_stats(self) -> dict[str, float]:
        if "stats" not in self._chunk_memo:
            counts = self.chunk_token_counts
            self._chunk_memo["stats"] = {
                "chunks": len(self.chunks),
                "mean_chunk_tokens": float(counts.mean()) if len(counts) else 0.0,
                "max_chunk_tokens": int(counts.max()) if len(counts) else 0,
                "identical_chunks": identical_chunks(self.chunks),
            }
        return dict(self._chunk_memo["stats"])

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready summary (no per-query arrays, no chunk texts)."""
        return {
            "config": self.config.to_dict(),
            "queries": len(self.query_corpora),
            "metrics": self.metrics,
            "chunks": self.chunk_stats,
            "embedding": self.embedding,
            "timings": self.timings,
            "notes": self.notes,
            "repeated_references": None if self.repeats is None else self.repeats.to_dict(),
            "window": self.window,
            **({"first_stage": {"candidates": self.first_stage["candidates"],
                                "recall": {"mean": float(np.mean(self.first_stage["recall"])),
                                           "std": float(np.std(self.first_stage["recall"]))}}}
               if self.first_stage is not None else {}),
        }


#: Above this share of truncated chunks, a configuration's scores come with a warning.
TRUNCATION_WARNING = 0.05


def embedder_window(model: Embedder, chunks: Sequence[Chunk] | Sequence[str]) -> dict[str, Any]:
    """The model's input window and how much of the chunks (or the texts embedded for them,
    context headers included) lies past it (see ``window``)."""
    texts = [c if isinstance(c, str) else c.text for c in chunks]
    unread = model.unread_characters(texts) if texts else np.zeros(0, dtype=np.int64)
    total = sum(len(t) for t in texts)
    ratio = model.tokens_per_cl100k(texts)
    return {"max_input_tokens": model.max_input_tokens,
            "truncated_chunks": float(np.mean(unread > 0)) if len(unread) else 0.0,
            "unread_text": float(unread.sum() / total) if total else 0.0,
            **({"tokens_per_cl100k": round(ratio, 3)} if ratio is not None else {})}


#: Of the model's own tokens per cl100k token, a ratio this far from 1 (either way) makes a chunk
#: size mean something else to the model than it says: the note names it. all-MiniLM-L6-v2 reads
#: 0.94-1.07 word pieces per cl100k token on the English chroma-dev corpora, 1.51 on a Korean one.
SIZE_RATIO_WARNING = 1.25


def window_note(window: dict[str, Any], model: str) -> str | None:
    """A sentence when more than :data:`TRUNCATION_WARNING` of the chunks exceed the window, and one
    when the model's tokens per cl100k token (``tokens_per_cl100k``) are :data:`SIZE_RATIO_WARNING`
    times more or fewer than 1.

    >>> print(window_note({"max_input_tokens": 256, "truncated_chunks": 0.0, "unread_text": 0.0,
    ...                    "tokens_per_cl100k": 2.5}, "m"))  # doctest: +NORMALIZE_WHITESPACE
    chunk sizes count cl100k tokens, but m reads 2.50 of its own tokens per cl100k token of these chunks:
    a size of 100 is about 250 of its tokens
    """
    notes = []
    if window.get("truncated_chunks", 0.0) > TRUNCATION_WARNING:
        notes.append(f"{window['truncated_chunks']:.0%} of the chunks exceed {model}'s input window of "
                     f"{window['max_input_tokens']} tokens ({window['unread_text']:.0%} of their text is never "
                     "embedded): they are retrieved on their first part only")
    ratio = window.get("tokens_per_cl100k")
    if ratio and not 1 / SIZE_RATIO_WARNING < ratio < SIZE_RATIO_WARNING:
        notes.append(f"chunk sizes count cl100k tokens, but {model} reads {ratio:.2f} of its own tokens per cl100k "
                     f"token of these chunks: a size of 100 is about {100 * ratio:.0f} of its tokens")
    return "; ".join(notes) or None


def identical_chunks(chunks: Sequence[Chunk]) -> int:
    """Chunks whose text equals an earlier chunk's (identical texts embed identically: the
    index ranks them by position, the earlier first, so rankings stay deterministic)."""
    return len(chunks) - len({c.text for c in chunks})


def evaluate(corpora: Corpus | Sequence[Corpus], evaluation_set: EvaluationSet,
             config: EvaluationConfig | None = None, *,
             chunker: str | None = None, k: int | None = None, unit: str | None = None,
             scope: str | None = None, index: str | None = None,
             embedder: Embedder | EmbedderConfig | None = None,
             cache: EmbeddingCache | bool | None = True,
             index_path: str | None = None, progress: bool = False,
             occurrences: OccurrenceTable | None = None, copies: str | None = None,
             method: str | None = None, fusion: str | None = None, alpha: float | None = None,
             rrf_k: int | None = None, context: str | None = None,
             rerank: str | None = None, candidates: int | None = None,
             fidelity: float = 1.0, fidelity_seed: int = 0,
             on_progress: Callable[[int, int], None] | None = None,
             **chunker_params: Any) -> EvaluationResult:
    """Score one chunking configuration on corpora and their evaluation set.

    Either pass a complete :class:`~tuner.evaluation.config.EvaluationConfig`, or build one from
    keywords (keywords override the config's fields)::

        result = tuner.evaluate(corpus, evalset, chunker="recursive", size=250, overlap=0, k=5)
        result.metrics["overall"]["recall"]["mean"]

    Args:
        corpora: the corpus or corpora to chunk; with ``scope="pooled"`` the chunks of
            all of them compete in one index.
        evaluation_set: validated queries (see :func:`tuner.load_evaluation_set`).
        config: the configuration; defaults to recursive 250/0, MiniLM, k=5, tokens.
        chunker: chunker name (its parameters are the other keyword arguments).
        k: retrieval cut-off.
        unit: scoring unit, ``"tokens"`` or ``"chars"``.
        scope: ``"pooled"`` or ``"per-corpus"``.
        index: ``"numpy"`` or ``"chroma"``.
        method: the retrieval method, ``"dense"``, ``"bm25"`` or ``"hybrid"``
            (see :class:`~tuner.retrieval.config.RetrievalConfig`).
        fusion: a hybrid's fusion, ``"rrf"`` (with ``rrf_k``) or ``"weighted"`` (with ``alpha``).
        alpha: the dense share of a weighted fusion.
        rrf_k: the constant of reciprocal-rank fusion.
        context: the context header, ``"none"``, ``"title"``, ``"headings"`` or ``"llm"`` (written by
            the LLM endpoint every LLM feature uses; see :mod:`tuner.retrieval.llm_context`).
        rerank: the folder of a saved cross-encoder that reorders ``candidates`` first-stage chunks
            (``"none"``: no reranker; see :mod:`tuner.retrieval.rerank`).
        embedder: an :class:`~tuner.embedding.Embedder` instance to reuse (keeps its
            loaded model across calls) or an :class:`EmbedderConfig`.
        cache: ``True`` for the default persistent cache, an
            :class:`~tuner.embedding.EmbeddingCache`, or ``None``/``False`` for none.
        index_path: folder of a persistent chromadb database (``index="chroma"``).
        progress: show a progress bar while embedding.
        on_progress: called with ``(texts embedded so far, texts to embed)`` while embedding
            (a tuning trial reports its progress through it).
        copies: ``"any"`` (default): a reference whose text occurs more than once in its
            corpus is satisfied by any copy; ``"marked"``: only by its marked offsets.
        occurrences: the references' occurrences, precomputed (a tuning worker builds them
            once for all its trials); found in the corpora when not given.
        fidelity: below 1.0, index only the chunks holding a reference and this fraction of
            the others (see :mod:`tuner.evaluation.fidelity`); the scores are then comparable
            only with scores at the same fidelity.
        fidelity_seed: the seed of that sample.
        **chunker_params: the chunker's parameters.
    """
    corpus_list = [corpora] if isinstance(corpora, Corpus) else list(corpora)
    config = _merge_config(config, chunker, chunker_params, k, unit, scope, index, embedder, copies,
                           {"method": method, "fusion": fusion, "alpha": alpha, "rrf_k": rrf_k, "context": context,
                            "rerank": rerank, "candidates": candidates})
    if cache is True:
        cache = EmbeddingCache()
    elif cache is False:
        cache = None
    model = embedder if isinstance(embedder, Embedder) else config.embedder.build(cache)
    chunked = _Chunked.split(corpus_list, evaluation_set, config, model, occurrences)
    return chunked.measure(model, fidelity, Fidelity(seed=fidelity_seed) if fidelity < 1 else FULL,
                           index_path=index_path, progress=progress, on_progress=on_progress)


def evaluate_rungs(corpora: Corpus | Sequence[Corpus], evaluation_set: EvaluationSet, config: EvaluationConfig,
                   fidelity: Fidelity, *, embedder: Embedder, occurrences: OccurrenceTable | None = None,
                   on_progress: Callable[[int, int], None] | None = None,
                   proxy: Embedder | None = None,
                   variants: Sequence[RetrievalConfig] = ()) -> Iterator[EvaluationResult]:
    """Score ``config`` at each of ``fidelity``'s rungs in turn, chunking only once.

    Yields one :class:`EvaluationResult` per rung (its ``fidelity`` says which); stop
    iterating to stop climbing. A rung embeds only the chunks the one before did not (the
    samples are nested and the embedder's cache keeps the rest). With ``fidelity.proxy``, the first
    result is the proxy rung's (its ``proxy`` names it), scored with ``proxy``, the embedder's
    late-chunking twin (:func:`tuner.embedding.late.late_chunking_embedder`). ``variants``: other retrievals
    of the same method and context to rank from the same vectors at each rung (each result's ``variants``)::

        for result in evaluate_rungs(corpus, evalset, config, Fidelity(rungs=(0.1, 1.0)), embedder=model):
            if not good_enough(result):
                break
    """
    corpus_list = [corpora] if isinstance(corpora, Corpus) else list(corpora)
    chunked = _Chunked.split(corpus_list, evaluation_set, config, embedder, occurrences)
    if fidelity.proxy is not None:
        if proxy is None:
            raise EmbeddingError(f"fidelity {fidelity.proxy!r} scores a first rung with a proxy embedder: pass it")
        # The proxy rung: the same chunks, every one indexed, their vectors pooled from the documents'
        # token embeddings (the pass is paid once per embedder, then cached).
        result = chunked.measure(proxy, 1.0, fidelity, on_progress=on_progress, pooled=True, variants=variants)
        yield dataclasses.replace(result, proxy=fidelity.proxy,
                                  variants=tuple(dataclasses.replace(v, proxy=fidelity.proxy) for v in result.variants))
    for fraction in fidelity.rungs:
        yield chunked.measure(embedder, fraction, fidelity, on_progress=on_progress, variants=variants)


@dataclass
class _Chunked:
    """A configuration's chunks, split once, ready to be measured at any fidelity."""

    corpora: list[Corpus]
    evaluation_set: EvaluationSet
    config: EvaluationConfig
    occurrences: OccurrenceTable
    chunks: list[Chunk]
    chunk_corpora: list[str]
    indexed: list[str]
    seconds: float
    units: dict[str, Any]
    llm_tokens: int | None
    llm_models: dict[str, str]

    # What does not depend on the fidelity is found once, however many rungs are measured.
    @cached_property
    def space(self) -> UnitSpace:
        return UnitSpace(self.corpora, self.config.unit)

    @cached_property
    def intervals(self) -> ChunkIntervals:
        return ChunkIntervals.from_spans(
            [[self.space.interval(corpus, c.document, s, e) for s, e in c.all_spans]
             for c, corpus in zip(self.chunks, self.chunk_corpora)])

    @cached_property
    def references(self) -> list[list[list[tuple[int, int]]]]:
        occurrences = (OccurrenceTable.marked_only(self.evaluation_set) if self.config.copies == "marked"
                       else self.occurrences)
        return query_references(self.space, list(self.evaluation_set), occurrences)

    @cached_property
    def index_tokens(self) -> int:
        """cl100k tokens of the texts a full index embeds (context headers included)."""
        if not self.config.retrieval.embeds:
            return 0
        if self.config.embedder.late_chunking:  # the documents, read once (their windows' overlaps aside)
            return sum(count_span(d.text, 0, len(d.text)) for corpus in self.corpora for d in corpus)
        if self.config.retrieval.context != "none":
            return sum(count_tokens_batch(self.indexed))
        return sum(c.token_count for c in self.chunks)

    @classmethod
    def split(cls, corpus_list: list[Corpus], evaluation_set: EvaluationSet, config: EvaluationConfig,
              model: Embedder, occurrences: OccurrenceTable | None) -> _Chunked:
        t = time.perf_counter()
        splitter = config.chunker.build()
        if splitter.needs_embedder:
            splitter = splitter.bind(model)
        before_units = _stats_snapshot(model)
        llm_usage = getattr(splitter, "llm_usage", None)
        llm_before = 0 if llm_usage is None else llm_usage.prompt_tokens + llm_usage.completion_tokens
        # LLM-written context headers: one client for the whole corpus, its tokens counted as the chunker's are.
        writer = context_client() if config.retrieval.context == "llm" else None
        chunks: list[Chunk] = []
        chunk_corpora: list[str] = []
        # What the retriever reads: the chunk's text, after its context header if there is one
        # (offsets and scored units stay the chunk's own).
        indexed: list[str] = []
        for corpus in corpus_list:
            first = len(chunks)
            for doc in corpus:
                pieces = splitter.split(doc)
                chunks.extend(pieces)
                chunk_corpora.extend([corpus.name] * len(pieces))
            indexed += contextualize(chunks[first:], corpus, config.retrieval.context, writer)
        seconds = time.perf_counter() - t
        units = _stats_delta(model, before_units)
        llm_tokens = None if llm_usage is None else (
            llm_usage.prompt_tokens + llm_usage.completion_tokens - llm_before)
        if writer is not None:
            llm_tokens = (llm_tokens or 0) + writer.usage.prompt_tokens + writer.usage.completion_tokens
        # Which model wrote what (its name only: never the endpoint, which may carry a user name).
        llm_models = {"chunker": str(splitter.client().model)} if llm_usage is not None else {}
        if writer is not None:
            llm_models["context"] = str(writer.model)
        if occurrences is None:
            occurrences = OccurrenceTable.build(evaluation_set, corpus_list)
        return cls(corpus_list, evaluation_set, config, occurrences, chunks, chunk_corpora, indexed, seconds,
                   units, llm_tokens, llm_models)

    def measure(self, model: Embedder, fraction: float, fidelity: Fidelity, *, index_path: str | None = None,
                progress: bool = False, on_progress: Callable[[int, int], None] | None = None,
                pooled: bool = False, variants: Sequence[RetrievalConfig] = ()) -> EvaluationResult:
        """Embed, index, retrieve and score, indexing every chunk (``fraction`` 1.0) or the
        reference-holding chunks and ``fraction`` of the distractors (:mod:`tuner.evaluation.fidelity`).
        ``pooled``: a late-chunking proxy's vectors (``model`` is the embedder's late twin), a context
        header's own tokens pooled with its chunk's. ``variants``: other retrievals of the same method and
        context, ranked from the same indexes (the result's ``variants``)."""
        config, chunks, chunk_corpora = self.config, self.chunks, self.chunk_corpora
        started = time.perf_counter()
        timings = {"chunking": self.seconds, "unit_embedding": self.units["seconds"],
                   "segmentation": self.seconds - self.units["seconds"]}
        t = time.perf_counter()
        repeats = self.occurrences.summary()
        queries = list(self.evaluation_set)
        space, intervals, references = self.space, self.intervals, self.references
        timings["scoring"] = time.perf_counter() - t

        in_index = np.ones(len(chunks), dtype=bool)
        if fraction < 1.0:
            in_index = distractor_sample(chunks, chunk_corpora, fraction, seed=fidelity.seed,
                                         block_chars=fidelity.block_chars)
            in_index |= holding_references(references, intervals.starts, intervals.ends, space.size)
        members = np.flatnonzero(in_index)
        indexed = [self.indexed[i] for i in members]

        questions = [q.question for q in queries]
        t = time.perf_counter()
        before = _stats_snapshot(model)
        chunk_vectors = query_vectors = None
        if config.retrieval.embeds:  # BM25 alone embeds nothing
            total = len(indexed) + len(queries)
            with _progress_bar(progress, total) as bar:
                update = bar
                if on_progress is not None:
                    done = [0]

                    def update(count: int) -> None:
                        if bar is not None:
                            bar(count)
                        done[0] += count
                        on_progress(done[0], total)

                if config.embedder.late_chunking or pooled:
                    headers = ([header_of(self.indexed[i], chunks[i].text) for i in members]
                               if config.retrieval.context != "none" else None)
                    chunk_vectors = _late_vectors(model, self.corpora, [chunks[i] for i in members],
                                                  [chunk_corpora[i] for i in members], update, headers,
                                                  as_read=pooled)
                else:
                    chunk_vectors = model.embed(indexed, progress=update)
                query_vectors = model.embed(questions, progress=update)
        timings["embedding"] = time.perf_counter() - t

        t = time.perf_counter()
        retrievals = [config.retrieval, *variants]
        ranked = _rank(retrievals, chunk_vectors, [chunk_corpora[i] for i in members], query_vectors,
                       [q.corpus for q in queries], index_path, indexed, questions, [chunks[i].text for i in members])
        timings["retrieval"] = time.perf_counter() - t

        # Searched chunks, tokens and notes describe the full index, the one production builds.
        query_corpora = [q.corpus for q in queries]
        if config.retrieval.scope == "pooled":
            searched = float(len(chunks))
        else:
            per_corpus = {name: chunk_corpora.count(name) for name in dict.fromkeys(query_corpora)}
            searched = float(np.mean([per_corpus[name] for name in query_corpora]))
        notes = []
        window = embedder_window(model, indexed) if config.retrieval.embeds else {}
        if note := window_note(window, config.embedder.model):
            notes.append(note)
        if duplicates := identical_chunks(chunks):
            notes.append(f"{duplicates} chunk(s) repeat the text of an earlier chunk: identical texts tie in the "
                         "index, and the earlier one ranks first")
        if fraction < 1.0:
            notes.append(f"low fidelity: {len(members)} of {len(chunks)} chunks indexed (every chunk holding a "
                         f"reference, {fraction:.0%} of the others)")
        query_tokens = float(np.mean(count_tokens_batch(questions)))
        embedding = _stats_delta(model, before)
        embedding["index_tokens"] = self.index_tokens
        embedding["unit_texts"], embedding["unit_tokens"] = self.units["texts"], self.units["tokens"]
        embedding["unit_model_seconds"] = self.units["model_seconds"]
        if self.llm_tokens is not None:  # LLM chunkers and contexts: tokens the model read and wrote
            embedding["llm_tokens"] = self.llm_tokens
        if self.llm_models:  # and the model that wrote them: {"chunker": ..., "context": ...}
            embedding["llm_model_names"] = dict(self.llm_models)

        results = []
        chunk_tokens = [c.token_count for c in chunks]  # the same for every retrieval
        chunk_memo: dict[str, Any] = {}  # one set of chunks for every retrieval ranked
        for retrieval, (local, local_first) in zip(retrievals, ranked):
            t = time.perf_counter()
            ranking = np.where(local >= 0, members[np.maximum(local, 0)], -1)
            scores = score(references, intervals, ranking, space.size, document_starts=space.document_starts,
                           chunk_tokens=chunk_tokens)
            first_stage = None
            if local_first is not None:  # a reranker: the recall of the candidates it was given
                first_ranking = np.where(local_first >= 0, members[np.maximum(local_first, 0)], -1)
                first_scores = score(references, intervals, first_ranking, space.size)
                first_stage = {"candidates": retrieval.depth, "recall": first_scores.recall[:, retrieval.depth - 1]}
            spent = {**timings, "scoring": timings["scoring"] + time.perf_counter() - t}
            spent["total"] = self.seconds + time.perf_counter() - started
            result = EvaluationResult(dataclasses.replace(config, retrieval=retrieval), {}, scores, chunks,
                                      chunk_corpora, query_corpora, ranking, query_tokens, searched, spent,
                                      dict(embedding), list(notes), repeats, window, self.indexed, fraction,
                                      len(members), first_stage, _chunk_memo=chunk_memo)
            results.append(result.cut(retrieval.k))  # its metrics, and a note when an index is short of k
        return dataclasses.replace(results[0], variants=tuple(results[1:]))


def _late_vectors(model: Embedder, corpora: list[Corpus], chunks: list[Chunk], chunk_corpora: list[str],
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


def _short_index_note(k: int, chunks_per_index: dict[str, int]) -> str | None:
    """One sentence when an index holds fewer than ``k`` chunks: its queries then retrieve
    every chunk there is (the ranking is padded), which the metrics at ``k`` silently reflect.

    ``chunks_per_index`` maps each searched corpus to its chunk count (``{"": n}`` pooled).
    """
    short = {name: n for name, n in chunks_per_index.items() if n < k}
    if not short:
        return None
    if list(short) == [""]:
        return (f"k={k} but the index holds only {short['']} chunk(s): each query retrieved all of them, "
                f"fewer than k")
    listed = ", ".join(f"{name!r} has {n}" for name, n in short.items())
    return (f"k={k} but some corpora have fewer chunks ({listed}): their queries retrieved every chunk of "
            "their corpus, fewer than k")


def _merge_config(config, chunker, chunker_params, k, unit, scope, index, embedder, copies,
                  retrieval_overrides: dict[str, Any] | None = None) -> EvaluationConfig:
    base = config or EvaluationConfig()
    chunker_config = base.chunker
    if chunker is not None or chunker_params:
        name = chunker or base.chunker.name
        params = dict(base.chunker.params) if name == base.chunker.name else {}
        params.update(chunker_params)
        chunker_config = ChunkerConfig(name, params)
    embedder_config = embedder if isinstance(embedder, EmbedderConfig) else base.embedder
    given = {key: value for key, value in (retrieval_overrides or {}).items() if value is not None}
    retrieval = base.retrieval.to_dict()
    stage = retrieval.pop("rerank", None)
    if stage is not None:  # flat fields, so that a keyword overrides either
        retrieval.update(rerank=stage["model"], candidates=stage["candidates"])
    if given.get("rerank") == "none":  # no reranker: its candidates go with it
        retrieval.pop("candidates", None)
    if given.get("method", retrieval.get("method", "dense")) != retrieval.get("method", "dense") or (
            given.get("fusion", retrieval.get("fusion")) != retrieval.get("fusion")):
        # Another method or fusion: the base's fusion parameters do not carry over.
        for key in ("fusion", "alpha", "rrf_k"):
            retrieval.pop(key, None)
    retrieval.update(given)
    retrieval.update({key: value for key, value in (("k", k), ("scope", scope), ("index", index))
                      if value is not None})
    return EvaluationConfig(chunker_config.resolved(), embedder_config, RetrievalConfig(**retrieval),
                            unit if unit is not None else base.unit, copies if copies is not None else base.copies)


def _rank(retrievals: Sequence[RetrievalConfig], chunk_vectors: np.ndarray | None, chunk_corpora: list[str],
          query_vectors: np.ndarray | None, query_corpora: list[str], index_path: str | None,
          indexed_texts: Sequence[str] = (), questions: Sequence[str] = (),
          chunk_texts: Sequence[str] = ()) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """Per retrieval (one method and context, e.g. an inner loop's fusions), the top-k chunk indices
    per query (numbering the chunks given), pooled or per corpus, ranked by
    :func:`tuner.retrieval.retrieve` (the function production queries call too); with a reranker, also
    the first stage's candidates (else None). The indexes are built, and each searched to a depth,
    once for all of them. The reranker reads ``chunk_texts`` (the chunks' own texts, as a production
    collection stores them)."""
    head = retrievals[0]
    texts = list(indexed_texts)
    rankings = [np.full((len(query_corpora), r.k), -1, dtype=np.int64) for r in retrievals]
    firsts = [np.full((len(query_corpora), r.depth), -1, dtype=np.int64) if r.rerank else None for r in retrievals]
    if head.scope == "pooled":
        groups = [(np.arange(len(chunk_corpora)), np.arange(len(query_corpora)), None)]
    else:
        chunk_labels, query_labels = np.asarray(chunk_corpora), np.asarray(query_corpora)
        groups = [(np.flatnonzero(chunk_labels == corpus), np.flatnonzero(query_labels == corpus),
                   f"chunkwise-{corpus}" if index_path else None) for corpus in dict.fromkeys(query_corpora)]
    for members, asking, collection in groups:
        dense = (make_index(chunk_vectors[members], head.index, path=index_path, collection=collection)
                 if head.embeds else None)
        lexical = BM25Index([texts[i] for i in members]) if head.lexical else None
        try:
            searched_dense, searched_lexical = _Searched(dense), _Searched(lexical)
            for retrieval, ranking, first in zip(retrievals, rankings, firsts):
                ranked = retrieve(retrieval, dense=None if dense is None else searched_dense,
                                  lexical=None if lexical is None else searched_lexical,
                                  query_vectors=None if query_vectors is None else query_vectors[asking],
                                  questions=[questions[i] for i in asking],
                                  texts=lambda rows, members=members: [chunk_texts[members[r]] for r in rows])
                local = ranked.rows
                ranking[asking] = np.where(local >= 0, members[np.maximum(local, 0)], -1)
                if first is not None and ranked.first_stage is not None:
                    candidates = ranked.first_stage.rows
                    first[asking] = np.where(candidates >= 0, members[np.maximum(candidates, 0)], -1)
        finally:
            if dense is not None:
                dense.close()
    return list(zip(rankings, firsts))


class _Searched:
    """An index whose searches are kept by depth: the retrievals :func:`_rank` ranks together ask
    the same questions, so each depth is searched once."""

    def __init__(self, index: Any) -> None:
        self.index, self.kept = index, {}

    def search_scored(self, queries: Any, k: int) -> Any:
        if k not in self.kept:
            self.kept[k] = self.index.search_scored(queries, k)
        return self.kept[k]


def _stats_snapshot(model: Embedder) -> tuple[int, int, int, int, float, float]:
    s = model.stats
    return s.texts, s.tokens, s.computed, s.computed_tokens, s.model_seconds, s.seconds


def _stats_delta(model: Embedder, before: tuple) -> dict[str, Any]:
    texts, tokens, computed, computed_tokens, model_seconds, seconds = (
        a - b for a, b in zip(_stats_snapshot(model), before))
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


class _progress_bar:
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
