"""The grid of configurations two evaluation sets rank, and scoring it on several sets at once.

:data:`GRID` is a fixed, cheap grid (a few chunkings under dense, BM25 and hybrid retrieval, all
at ``k`` = :data:`GRID_K`, so that no row wins by retrieving more). :func:`score_grid` scores it on
several sets at once: each chunking is split once and embedded once, for every set's questions
together, and its retrieval methods are ranked from the same vectors (BM25 rows embed nothing).
What the scores say of the sets is :mod:`.agreement`'s.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..chunkers.config import ChunkerConfig
from ..data.corpus import Corpus
from ..data.evalset import EvaluationSet
from ..data.repeats import OccurrenceTable
from ..embedding import Embedder, EmbeddingCache
from ..errors import AgreementError
from ..retrieval.config import RetrievalConfig
from ..retrieval.methods import method_names, retrieval_method
from ..schema import invalid
from .config import EvaluationConfig
from .evaluator import evaluate_rungs
from .fidelity import FULL

#: Every row of the grid retrieves this many chunks: rows compared at one cut-off.
GRID_K = 5


@dataclass(frozen=True)
class GridRow:
    """One configuration of the grid: a chunking and a retrieval method, at ``k`` = :data:`GRID_K`."""

    chunker: str
    params: Mapping[str, Any]
    method: str

    @property
    def chunking(self) -> str:
        """``token size=800 overlap=400``: the chunker and its parameters, as declared."""
        return " ".join([self.chunker, *(f"{name}={value}" for name, value in self.params.items())])

    @property
    def label(self) -> str:
        """``token size=800 overlap=400 dense``."""
        return f"{self.chunking} {self.method}"

    def config(self, base: EvaluationConfig) -> EvaluationConfig:
        """``base`` (its embedder, unit, copies) with this row's chunker and retrieval."""
        return dataclasses.replace(base, chunker=ChunkerConfig(self.chunker, dict(self.params)).resolved(),
                                   retrieval=RetrievalConfig(k=GRID_K, method=self.method))


def _rows(chunkings: Iterable[tuple[str, Mapping[str, Any]]], methods: Iterable[str]) -> tuple[GridRow, ...]:
    methods = tuple(methods)
    return tuple(GridRow(name, params, method) for name, params in chunkings for method in methods)


#: The grid both sets rank, declared once (``chunkwise validate --agreement`` and the realdocs
#: benchmark use it; its figures in the issue were measured on it). Four chunkings around the
#: sizes a study recommends, the default token 800/400 among them, under all three methods
#: (four embedding passes in all); then eight more chunkings under BM25 alone, which embed
#: nothing, so the grid spans small to large chunks at the cost of chunking and counting terms.
GRID: tuple[GridRow, ...] = (
    *_rows((("token", {"size": 800, "overlap": 400}),
            ("token", {"size": 256, "overlap": 64}),
            ("recursive", {"size": 250, "overlap": 0}),
            ("markdown", {"size": 250, "overlap": 0})), ("dense", "bm25", "hybrid")),
    *_rows((("token", {"size": 128, "overlap": 0}),
            ("token", {"size": 512, "overlap": 0}),
            ("token", {"size": 1000, "overlap": 200}),
            ("recursive", {"size": 500, "overlap": 100}),
            ("recursive", {"size": 1000, "overlap": 0}),
            ("markdown", {"size": 500, "overlap": 0}),
            ("sentence", {"sentences": 5, "overlap": 1}),
            ("recursive", {"size": 120, "overlap": 0})), ("bm25",)),
)


def grid_rows(methods: Iterable[str] | None = None) -> tuple[GridRow, ...]:
    """The rows of :data:`GRID` whose method is one of ``methods`` (all of them by default).

    >>> len(grid_rows()), len(grid_rows(["bm25"]))
    (20, 12)
    """
    if methods is None:
        return GRID
    wanted = set(methods)
    if unknown := sorted(wanted - set(method_names())):
        raise AgreementError(f"unknown retrieval method {', '.join(unknown)}: the grid has "
                             f"{', '.join(dict.fromkeys(row.method for row in GRID))}")
    return tuple(row for row in GRID if row.method in wanted)


def embedded_chunkings(grid: Sequence[GridRow]) -> tuple[int, int]:
    """``(chunkings, chunkings embedded)`` of ``grid``: what scoring it costs, in corpus passes.

    >>> embedded_chunkings(GRID), embedded_chunkings(grid_rows(["bm25"]))
    ((12, 4), (12, 0))
    """
    chunkings = {row.chunking for row in grid}
    return len(chunkings), len({row.chunking for row in grid if _needs(row.method)[0]})


@dataclass(frozen=True)
class ScoreTable:
    """Per-question scores of the grid on one evaluation set.

    Attributes:
        name: what the set is called in messages (its file).
        labels: the configurations, in grid order.
        scores: shape ``(questions, configurations)``: each question's recall at ``k`` under
            each configuration.
    """

    name: str
    labels: tuple[str, ...]
    scores: np.ndarray = field(repr=False)

    def __post_init__(self) -> None:
        if self.scores.ndim != 2 or self.scores.shape[1] != len(self.labels):
            raise invalid("scores shape", list(self.scores.shape),
                          f"[questions, {len(self.labels)}]: a column per configuration", owner=self.name)

    @property
    def questions(self) -> int:
        return self.scores.shape[0]

    @property
    def means(self) -> np.ndarray:
        """Each configuration's mean score: what ranks it."""
        return self.scores.mean(axis=0)

    @property
    def ranks(self) -> np.ndarray:
        """Each configuration's rank, 1 the best; ties share the better rank (1, 2, 2, 4)."""
        means = self.means
        return np.array([1 + int(np.sum(means > m)) for m in means])

    @property
    def best(self) -> int:
        """The index of the best configuration (the first in grid order among ties)."""
        return int(np.argmax(self.means))


@dataclass(frozen=True)
class ChunkingScored:
    """Progress of :func:`score_grid`: one chunking done (``done`` of ``total``), its methods
    ranked, in ``seconds``."""

    done: int
    total: int
    chunking: str
    methods: tuple[str, ...]
    seconds: float


def _needs(method: str) -> tuple[bool, bool]:
    found = retrieval_method(method)
    return found.embeds, found.lexical


def _passes(positions: Sequence[int], grid: Sequence[GridRow]) -> list[list[int]]:
    """The rows of one chunking (their positions in ``grid``) in groups, each ranked from one pass
    (one set of indexes): the row whose method needs the most (hybrid: vectors and BM25) first, with
    every row its indexes serve; a method needing an index the first does not build goes to another pass.

    >>> [[GRID[p].method for p in served] for served in _passes([0, 1, 2], GRID)]
    [['hybrid', 'dense', 'bm25']]
    >>> [[GRID[p].method for p in served] for served in _passes([0, 1], GRID)]
    [['dense'], ['bm25']]
    """
    pending, passes = list(positions), []
    while pending:
        head = max(pending, key=lambda p: sum(_needs(grid[p].method)))
        has = _needs(grid[head].method)
        served = [head, *(p for p in pending if p != head
                          and all(h or not n for h, n in zip(has, _needs(grid[p].method))))]
        passes.append(served)
        pending = [p for p in pending if p not in served]
    return passes


def score_grid(corpora: Corpus | Sequence[Corpus], evaluation_sets: Sequence[EvaluationSet], names: Sequence[str],
               grid: Sequence[GridRow] = GRID, *, config: EvaluationConfig | None = None,
               embedder: Embedder | None = None, cache: EmbeddingCache | bool | None = True,
               on_chunking: Callable[[ChunkingScored], None] | None = None,
               on_embedding: Callable[[int, int], None] | None = None) -> list[ScoreTable]:
    """Each set's per-question recall at :data:`GRID_K` under every row of ``grid``.

    The sets' questions are scored together: each chunking is split once, its chunks embedded
    once (with every set's questions) and each of its methods ranked from the same indexes, so a
    second set costs its questions' embeddings only; BM25 rows embed nothing.

    Args:
        corpora: the corpora both sets ask about.
        evaluation_sets: the sets, validated against ``corpora``.
        names: what each set is called (its file).
        grid: the configurations (:data:`GRID` or a part of it, :func:`grid_rows`).
        config: the embedder, unit and copies rule of every row (default: MiniLM, tokens).
        embedder: a built embedder to reuse (default: built from ``config``).
        cache: as :func:`tuner.evaluate`'s.
        on_chunking: called after each chunking is scored.
        on_embedding: called with ``(texts embedded, texts to embed)`` while a chunking embeds.
    """
    corpus_list = [corpora] if isinstance(corpora, Corpus) else list(corpora)
    base = config or EvaluationConfig()
    if cache is True:
        cache = EmbeddingCache()
    model = embedder or base.embedder.build(cache or None)
    combined = EvaluationSet(tuple(query for evaluation_set in evaluation_sets for query in evaluation_set))
    occurrences = OccurrenceTable.build(combined, corpus_list)  # the same for every chunking
    bounds = np.cumsum([0, *(len(evaluation_set) for evaluation_set in evaluation_sets)])
    columns: dict[int, np.ndarray] = {}  # by position in the grid
    chunkings = list(dict.fromkeys(row.chunking for row in grid))
    for done, chunking in enumerate(chunkings, 1):
        started = time.perf_counter()
        rows = [position for position, row in enumerate(grid) if row.chunking == chunking]
        for served in _passes(rows, grid):
            head, *others = [grid[position].config(base) for position in served]
            result = next(evaluate_rungs(corpus_list, combined, head, FULL, embedder=model, occurrences=occurrences,
                                         on_progress=on_embedding, variants=[c.retrieval for c in others]))
            for position, scored in zip(served, (result, *result.variants)):
                columns[position] = scored.scores.at(GRID_K)["recall"]
        if on_chunking is not None:
            on_chunking(ChunkingScored(done, len(chunkings), chunking, tuple(grid[p].method for p in rows),
                                       time.perf_counter() - started))
    labels = tuple(row.label for row in grid)
    everything = np.column_stack([columns[position] for position in range(len(grid))])
    return [ScoreTable(name, labels, everything[start:end]) for name, start, end in zip(names, bounds, bounds[1:])]
