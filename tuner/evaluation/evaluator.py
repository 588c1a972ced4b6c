"""Score one configuration end to end: chunk, embed, index, retrieve, measure.

The steps have modules of their own: :mod:`.vectors` (how the chunks are embedded), :mod:`.ranking`
(the indexes and the rankings), :mod:`.result` (what was measured) and :mod:`.window` (what the
embedder leaves unread); this module chunks once and measures at each fidelity asked for."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ..chunkers import Chunk
from ..chunkers.config import ChunkerConfig
from ..data.corpus import Corpus
from ..data.evalset import EvaluationSet
from ..data.repeats import OccurrenceTable
from ..embedding import Embedder, EmbeddingCache
from ..embedding.config import EmbedderConfig
from ..errors import EmbeddingError
from ..retrieval.config import RetrievalConfig
from ..retrieval.context import contextualize, header_of
from ..retrieval.llm_context import context_client
from ..retrieval.methods import dependent_options, retrieval_method
from ..text.tokens import count_span, count_tokens_batch
from .config import EvaluationConfig
from .fidelity import FULL, Fidelity, distractor_sample, holding_references
from .metrics import ChunkIntervals, UnitSpace, query_references, score
from .ranking import rank
from .result import EvaluationResult, identical_chunks
from .vectors import late_vectors, progress_bar, stats_delta, stats_snapshot
from .window import TRUNCATION_WARNING, embedder_window, window_note

#: Names callers imported from this module before the result and the window notes had modules of their own.
__all__ = ["TRUNCATION_WARNING", "EvaluationResult", "embedder_window", "evaluate", "evaluate_rungs",
           "identical_chunks", "window_note"]


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
             retrieval_options: Mapping[str, Any] | None = None,
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
        retrieval_options: the method's own options (:class:`~tuner.retrieval.methods.MethodOption`) by
            name, for any method (``fusion``, ``alpha`` and ``rrf_k`` above are a hybrid's).
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
                            "rerank": rerank, "candidates": candidates, **(retrieval_options or {})})
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
        before_units = stats_snapshot(model)
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
        units = stats_delta(model, before_units)
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
        before = stats_snapshot(model)
        chunk_vectors = query_vectors = None
        if config.retrieval.embeds:  # BM25 alone embeds nothing
            total = len(indexed) + len(queries)
            with progress_bar(progress, total) as bar:
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
                    chunk_vectors = late_vectors(model, self.corpora, [chunks[i] for i in members],
                                                  [chunk_corpora[i] for i in members], update, headers,
                                                  as_read=pooled)
                else:
                    chunk_vectors = model.embed(indexed, progress=update)
                query_vectors = model.embed(questions, progress=update)
        timings["embedding"] = time.perf_counter() - t

        t = time.perf_counter()
        retrievals = [config.retrieval, *variants]
        ranked = rank(retrievals, chunk_vectors, [chunk_corpora[i] for i in members], query_vectors,
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
        embedding = stats_delta(model, before)
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
    base_method = retrieval.get("method", "dense")
    if given.get("method", base_method) != base_method:  # another method: the base's options do not carry over
        for option in retrieval_method(base_method).options:
            retrieval.pop(option.name, None)
    else:  # an option given another value: the base's options that apply only under its old value go with it
        for name in dependent_options(name for name, value in given.items() if retrieval.get(name, value) != value):
            retrieval.pop(name, None)
    retrieval.update(given)
    retrieval.update({key: value for key, value in (("k", k), ("scope", scope), ("index", index))
                      if value is not None})
    return EvaluationConfig(chunker_config.resolved(), embedder_config, RetrievalConfig(**retrieval),
                            unit if unit is not None else base.unit, copies if copies is not None else base.copies)
