"""What :func:`~tuner.evaluation.evaluator.evaluate` measured: :class:`EvaluationResult`, read at any
smaller cut-off (:meth:`EvaluationResult.cut`) and summarised for JSON."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..chunkers import Chunk
from ..data.repeats import RepeatSummary
from ..schema import invalid
from .config import EvaluationConfig
from .metrics import QueryScores, summarise


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
            raise invalid("k", k, f"an integer from 1 to {self.config.retrieval.k} (the cut-offs this result ranked)")
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


def identical_chunks(chunks: Sequence[Chunk]) -> int:
    """Chunks whose text equals an earlier chunk's (identical texts embed identically: the
    index ranks them by position, the earlier first, so rankings stay deterministic)."""
    return len(chunks) - len({c.text for c in chunks})


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
