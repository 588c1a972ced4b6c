"""Token-level retrieval metrics (Smith and Troynikov, "Evaluating Chunking Strategies
for Retrieval", Chroma, 2024), in one vectorised implementation.

For a query, let ``t_e`` be the set of units (cl100k tokens, or characters) of the
corpus that fall in its references, and ``t_r`` the units of the retrieved chunks,
counted with multiplicity (a unit in two retrieved chunks counts twice). Then::

    recall          = |t_e ∩ t_r| / |t_e|
    precision       = |t_e ∩ t_r| / |t_r|
    IoU             = |t_e ∩ t_r| / (|t_e| + |t_r| - |t_e ∩ t_r|)
    precision-Ω     = precision when exactly the chunks that hold a reference unit
                      are retrieved (an upper bound on precision for the chunking)

``|t_e ∩ t_r|`` counts each reference unit once, however many retrieved chunks hold
it. A ratio whose denominator is 0 (nothing retrieved) is 0.

What a RAG pipeline reads of the ranking, per query and per ``k``:

    hit_rate        1 when some chunk of the top k holds a reference unit, else 0 (its mean
                    over queries is the hit rate)
    mrr             1 / r, r the rank of the first chunk holding a reference unit (0 when
                    none of the top k does); its mean is the mean reciprocal rank
    ndcg            Σ_{i<=k} g_i / log2(i + 1) over the same sum for the k chunks of largest
                    gain in the whole run, with graded gain g = |chunk ∩ t_e| / |t_e| (the
                    share of the query's reference units the chunk holds)
    doc_recall      share of the query's reference documents that some chunk of the top k
                    lies in (whether or not it holds reference units): large chunks cannot
                    win it by covering more text
    context_tokens  cl100k tokens of the top k chunks, overlap counted (what the reader LLM
                    is handed per question)

A reference may have several *occurrences* (its exact text appears more than once in its
corpus, see :mod:`tuner.data.repeats`). Then, per query and per ``k``, each reference is scored
at the occurrence that the top ``k`` chunks cover best (most units; a tie keeps the marked
occurrence, listed first, then the earliest), and ``t_e`` is the union of the chosen
occurrences, for recall, precision, IoU and nDCG alike. Precision-Ω, which does not depend on
``k``, uses the occurrences chosen at the largest ``k`` scored. Hit rate and MRR count a chunk
holding a unit of *any* occurrence (the first such chunk may not be the best-covered copy), and
a reference document is reached when a chunk lies in the document of any of its occurrences
(references whose occurrences lie in the same documents count as one reference document). A
reference with one occurrence is scored exactly as before.

Units live on one integer line per run: each document of each corpus gets its own
stretch, so a chunk of another corpus (pooled retrieval) can never overlap a
reference. In the ``tokens`` unit a token belongs to a span when the span holds the
token's anchor (:mod:`tuner.text.tokens`); a reference so short that it holds no anchor
(part of one token) owns the token it starts in. The ``chars`` unit scores character
offsets directly, as Chroma's reference code does.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..data.corpus import Corpus
from ..data.evalset import Query
from ..schema import invalid
from .registry import metric, metric_names, metrics

if TYPE_CHECKING:
    from ..data.repeats import OccurrenceTable

#: Scoring units: cl100k tokens of each document, or characters.
UNITS = ("tokens", "chars")
class UnitSpace:
    """Maps character spans of documents to intervals on one integer line of units."""

    def __init__(self, corpora: Iterable[Corpus], unit: str = "tokens") -> None:
        if unit not in UNITS:
            raise invalid("unit", unit, ", ".join(UNITS))
        self.unit = unit
        self._offset: dict[tuple[str, str], int] = {}
        self._documents = {}
        size = 0
        starts = []
        for corpus in corpora:
            for doc in corpus:
                self._offset[(corpus.name, doc.id)] = size
                self._documents[(corpus.name, doc.id)] = doc
                starts.append(size)
                size += len(doc.tokens) if unit == "tokens" else len(doc.text)
        self.size = size
        #: Where each document's stretch begins on the line (sorted): a unit's document is found by bisection.
        self.document_starts = np.asarray(starts, dtype=np.int64)

    def interval(self, corpus: str, document: str, start: int, end: int) -> tuple[int, int]:
        """The units of characters ``[start, end)`` of a document, as ``[a, b)``."""
        base = self._offset[(corpus, document)]
        if self.unit == "chars":
            return base + start, base + end
        i, j = self._documents[(corpus, document)].tokens.token_range(start, end)
        return base + i, base + j

    def reference_interval(self, corpus: str, document: str, start: int, end: int) -> tuple[int, int]:
        """Like :meth:`interval`, but never empty for a non-empty reference."""
        a, b = self.interval(corpus, document, start, end)
        if a == b and end > start and self.unit == "tokens":
            tokens = self._documents[(corpus, document)].tokens
            holder = max(int(np.searchsorted(tokens.starts, start, side="right")) - 1, 0)
            base = self._offset[(corpus, document)]
            return base + holder, base + holder + 1
        return a, b


@dataclass(frozen=True)
class ChunkIntervals:
    """Chunks on the unit line: ``starts``/``ends`` of shape ``(n_chunks, max_spans)``.

    A chunk made of several disjoint spans uses several columns; unused columns are
    empty (``start == end``).
    """

    starts: np.ndarray
    ends: np.ndarray

    @classmethod
    def from_spans(cls, spans: Sequence[Sequence[tuple[int, int]]]) -> ChunkIntervals:
        width = max((len(s) for s in spans), default=1) or 1
        starts = np.zeros((len(spans), width), dtype=np.int64)
        ends = np.zeros((len(spans), width), dtype=np.int64)
        for i, chunk_spans in enumerate(spans):
            for j, (a, b) in enumerate(chunk_spans):
                starts[i, j], ends[i, j] = a, b
        return cls(starts, ends)

    @property
    def lengths(self) -> np.ndarray:
        return (self.ends - self.starts).sum(axis=1)

    def __len__(self) -> int:
        return len(self.starts)


class QueryScores:
    """Per-query scores for every cut-off ``k = 1..K`` of one ranking, one array per metric
    (:mod:`.registry`), read as attributes (``scores.recall``).

    A metric that depends on ``k`` has shape ``(n_queries, K)``, column ``k-1`` holding the
    scores of the top ``k`` chunks; one that does not (``precision_omega``) has shape
    ``(n_queries,)``.
    """

    def __init__(self, values: dict[str, np.ndarray]) -> None:
        self.values = values

    def __getattr__(self, name: str) -> np.ndarray:
        try:
            return self.__dict__["values"][name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def max_k(self) -> int:
        return self.values["recall"].shape[1]

    def at(self, k: int) -> dict[str, np.ndarray]:
        """Per-query arrays of every metric at cut-off ``k``."""
        if not 1 <= k <= self.max_k:
            raise invalid("k", k, f"an integer from 1 to {self.max_k} (the cut-offs scored)")
        return {name: values[:, k - 1] if metric(name).per_k else values for name, values in self.values.items()}


@dataclass(frozen=True)
class ScoringInputs:
    """What a metric added from outside (:class:`~.registry.Metric` with ``compute``) may read:
    the scored run on the unit line and the built-in metrics already computed (``scores``)."""

    references: list[list[list[tuple[int, int]]]]
    chunks: ChunkIntervals
    ranking: np.ndarray
    space_size: int
    document_starts: np.ndarray
    chunk_tokens: np.ndarray
    scores: QueryScores


Interval = tuple[int, int]


def score(references: Sequence[Sequence[Interval | Sequence[Interval]]], chunks: ChunkIntervals,
          ranking: np.ndarray, space_size: int, *, document_starts: np.ndarray | None = None,
          chunk_tokens: Sequence[int] | np.ndarray | None = None) -> QueryScores:
    """Score rankings against references, on the unit line.

    Args:
        references: per query, its references; each is an interval ``[a, b)``, or the
            intervals of its occurrences, the marked one first (intervals may overlap).
        chunks: every chunk of the run, retrieved or not (for precision-Ω and nDCG's ideal).
        ranking: chunk indices per query, best first, shape ``(n_queries, K)``;
            ``-1`` marks an empty slot.
        space_size: length of the unit line.
        document_starts: where each document begins on the line, sorted
            (:attr:`UnitSpace.document_starts`); without it the line is one document.
        chunk_tokens: each chunk's cl100k tokens, for ``context_tokens``; without it, each
            chunk's length in units.
    """
    occurrences = [[_as_occurrences(r) for r in query] for query in references]
    scores = _score_marked([[r[0] for r in query] for query in occurrences], chunks, ranking, space_size)
    for q, query in enumerate(occurrences):
        if any(len(r) > 1 for r in query):
            _rescore_best_occurrences(scores, q, query, chunks, ranking[q], space_size)
            # The first chunk holding a unit of any copy (not only of the best-covered one).
            anywhere = _score_marked([[o for alts in query for o in alts]], chunks, ranking[q : q + 1], space_size)
            scores.mrr[q], scores.hit_rate[q] = anywhere.mrr[0], anywhere.hit_rate[0]
    starts = np.zeros(1, dtype=np.int64) if document_starts is None else np.asarray(document_starts, dtype=np.int64)
    scores.doc_recall[:] = _document_recall(occurrences, chunks, ranking, starts)
    tokens = chunks.lengths if chunk_tokens is None else np.asarray(chunk_tokens, dtype=np.float64)
    padded = np.concatenate([np.asarray(tokens, dtype=np.float64), [0.0]])  # index -1 -> 0 tokens
    scores.context_tokens[:] = np.cumsum(padded[ranking], axis=1)
    added = [m for m in metrics() if m.compute is not None]
    if added:
        inputs = ScoringInputs(occurrences, chunks, ranking, space_size, starts, padded[:-1], scores)
        n_queries, max_k = ranking.shape
        for declared in added:
            values = np.asarray(declared.compute(inputs), dtype=np.float64)
            shape = (n_queries, max_k) if declared.per_k else (n_queries,)
            if values.shape != shape:
                raise invalid("computed shape", list(values.shape), f"{list(shape)}: one value per question"
                              f"{' and cut-off' * declared.per_k}", owner=f"metric {declared.name!r}")
            scores.values[declared.name] = values
    return scores


def _document_of(starts: np.ndarray, positions: np.ndarray) -> np.ndarray:
    return np.searchsorted(starts, positions, side="right") - 1


def _document_recall(occurrences: list[list[list[Interval]]], chunks: ChunkIntervals, ranking: np.ndarray,
                     document_starts: np.ndarray) -> np.ndarray:
    """Per query and ``k``, the share of its reference documents some top-``k`` chunk lies in.

    A reference's documents are those of its occurrences (one, without repeats); references with
    the same documents count once, so without repeats this is the share of distinct documents.
    """
    n_queries, max_k = ranking.shape
    chunk_document = _document_of(document_starts, chunks.starts[:, 0]) if len(chunks) else np.zeros(0, np.int64)
    padded = np.concatenate([chunk_document, [-1]])  # an empty slot lies in no document
    out = np.zeros((n_queries, max_k))
    for q, query in enumerate(occurrences):
        groups = {frozenset(int(d) for d in _document_of(document_starts, np.array([a for a, _ in alts])))
                  for alts in query}
        if not groups:
            continue
        retrieved = padded[ranking[q]]
        reached = np.zeros(max_k)
        for group in groups:
            hits = np.flatnonzero(np.isin(retrieved, list(group)))
            if len(hits):
                reached[hits[0]:] += 1  # reached from the first rank that lies in one of its documents on
        out[q] = reached / len(groups)
    return out


def _as_occurrences(reference: Interval | Sequence[Interval]) -> list[Interval]:
    if len(reference) == 2 and all(isinstance(x, (int, np.integer)) for x in reference):
        return [(int(reference[0]), int(reference[1]))]
    return [(int(a), int(b)) for a, b in reference]


def _rescore_best_occurrences(scores: QueryScores, q: int, references: list[list[Interval]],
                              chunks: ChunkIntervals, ranking: np.ndarray, space_size: int) -> None:
    """Row ``q`` of ``scores``, each reference at its best-covered occurrence per ``k``.

    Both the choice and the metrics come from :func:`_score_marked`: the units of an
    occurrence covered by the top ``k`` chunks are its recall at ``k`` times its length.
    """
    max_k = len(ranking)
    row = ranking[None, :]
    choices = []
    for alternatives in references:
        if len(alternatives) == 1:
            choices.append(np.zeros(max_k, dtype=np.int64))
            continue
        single = _score_marked([[o] for o in alternatives], chunks, np.repeat(row, len(alternatives), axis=0),
                               space_size)
        covered = np.rint(single.recall * np.array([[b - a] for a, b in alternatives]))  # (occurrences, K)
        choices.append(np.argmax(covered, axis=0))  # ties: the first, i.e. marked, then earliest
    chosen_per_k = np.stack(choices, axis=1)  # (K, references)
    scored: dict[tuple[int, ...], QueryScores] = {}  # the choice often stays the same as k grows
    for k in range(1, max_k + 1):
        picked = tuple(int(i) for i in chosen_per_k[k - 1])
        if picked not in scored:
            scored[picked] = _score_marked([[alts[i] for alts, i in zip(references, picked)]], chunks, row,
                                           space_size)
        again = scored[picked]
        scores.recall[q, k - 1] = again.recall[0, k - 1]
        scores.precision[q, k - 1] = again.precision[0, k - 1]
        scores.iou[q, k - 1] = again.iou[0, k - 1]
        scores.ndcg[q, k - 1] = again.ndcg[0, k - 1]
        if k == max_k:
            scores.precision_omega[q] = again.precision_omega[0]


def _score_marked(references: Sequence[Sequence[Interval]], chunks: ChunkIntervals,
                  ranking: np.ndarray, space_size: int) -> QueryScores:
    """The metrics with each reference at one interval (see the module docstring)."""
    n_queries, max_k = ranking.shape
    positions, owner = _reference_positions(references)
    expected = np.bincount(owner, minlength=n_queries).astype(np.float64)

    # Rank at which each reference unit is first covered by a retrieved chunk (K: never).
    first_rank = np.full(len(positions), max_k, dtype=np.int64)
    for rank in range(max_k):
        chunk = ranking[owner, rank]
        valid = chunk >= 0
        safe = np.where(valid, chunk, 0)
        covered = valid & ((chunks.starts[safe] <= positions[:, None])
                           & (positions[:, None] < chunks.ends[safe])).any(axis=1)
        first_rank = np.where(covered & (first_rank == max_k), rank, first_rank)
    hits = np.bincount(owner * (max_k + 1) + first_rank, minlength=n_queries * (max_k + 1))
    intersection = np.cumsum(hits.reshape(n_queries, max_k + 1)[:, :max_k], axis=1).astype(np.float64)

    lengths = np.concatenate([chunks.lengths, [0]])  # index -1 -> length 0
    retrieved = np.cumsum(lengths[ranking], axis=1).astype(np.float64)

    recall = _ratio(intersection, expected[:, None])
    precision = _ratio(intersection, retrieved)
    iou = _ratio(intersection, expected[:, None] + retrieved - intersection)
    omega = _precision_omega(references, chunks, positions, owner, n_queries, space_size)

    # The rank of the first chunk holding a reference unit is the earliest first rank of its units.
    first = np.full(n_queries, max_k, dtype=np.int64)
    np.minimum.at(first, owner, first_rank)
    ranks = np.arange(1, max_k + 1)
    mrr = np.where(ranks[None, :] > first[:, None], 1.0 / (first[:, None] + 1.0), 0.0)
    hit = (mrr > 0).astype(np.float64)
    ndcg = _ndcg(positions, owner, chunks, ranking)
    return QueryScores({"recall": recall, "precision": precision, "iou": iou, "precision_omega": omega,
                        "hit_rate": hit, "mrr": mrr, "ndcg": ndcg, "doc_recall": np.zeros((n_queries, max_k)),
                        "context_tokens": np.zeros((n_queries, max_k))})


def _ndcg(positions: np.ndarray, owner: np.ndarray, chunks: ChunkIntervals, ranking: np.ndarray) -> np.ndarray:
    """nDCG at every ``k``, each chunk's gain the share of the query's reference units it holds;
    the ideal ranks every chunk of the run by gain."""
    n_queries, max_k = ranking.shape
    discount = 1.0 / np.log2(np.arange(2, max_k + 2))
    out = np.zeros((n_queries, max_k))
    for q in range(n_queries):
        units = np.sort(positions[owner == q])  # unique already
        if not len(units) or not len(chunks):
            continue
        held = (np.searchsorted(units, chunks.ends) - np.searchsorted(units, chunks.starts)).sum(axis=1)
        gain = np.concatenate([held / len(units), [0.0]])  # index -1 -> no gain
        dcg = np.cumsum(gain[ranking[q]] * discount)
        ideal = np.sort(gain)[::-1][:max_k]
        ideal = np.cumsum(np.pad(ideal, (0, max_k - len(ideal))) * discount)
        out[q] = _ratio(dcg, ideal)
    return out


def _reference_positions(references: Sequence[Sequence[tuple[int, int]]]) -> tuple[np.ndarray, np.ndarray]:
    """Units of each query's reference union, flattened, with the owning query index."""
    positions, owner = [], []
    for q, intervals in enumerate(references):
        units = np.unique(np.concatenate(
            [np.arange(a, b, dtype=np.int64) for a, b in intervals] or [np.zeros(0, np.int64)]))
        positions.append(units)
        owner.append(np.full(len(units), q, dtype=np.int64))
    if not positions:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    return np.concatenate(positions), np.concatenate(owner)


def _precision_omega(references, chunks: ChunkIntervals, positions: np.ndarray,
                     owner: np.ndarray, n_queries: int, space_size: int) -> np.ndarray:
    # A reference unit is in t_e ∩ t_Ω exactly when some chunk covers it.
    coverage = np.zeros(space_size + 1, dtype=np.int64)
    flat_starts, flat_ends = chunks.starts.ravel(), chunks.ends.ravel()
    nonempty = flat_ends > flat_starts
    np.add.at(coverage, flat_starts[nonempty], 1)
    np.add.at(coverage, flat_ends[nonempty], -1)
    covered = np.cumsum(coverage)[:-1] > 0
    numerator = np.bincount(owner, weights=covered[positions], minlength=n_queries)

    # t_Ω: every chunk holding at least one reference unit, with multiplicity.
    lengths = chunks.lengths
    denominator = np.zeros(n_queries)
    for q, intervals in enumerate(references):
        relevant = np.zeros(len(chunks), dtype=bool)
        for a, b in intervals:
            overlap = (np.minimum(chunks.ends, b) - np.maximum(chunks.starts, a)) > 0
            relevant |= overlap.any(axis=1)
        denominator[q] = lengths[relevant].sum()
    return _ratio(numerator, denominator)


def _ratio(numerator: np.ndarray, denominator: np.ndarray) -> np.ndarray:
    numerator, denominator = np.broadcast_arrays(numerator, denominator)
    out = np.zeros(numerator.shape, dtype=np.float64)
    np.divide(numerator, denominator, out=out, where=denominator > 0)
    return out


def summarise(values: dict[str, np.ndarray], groups: Sequence[str] | None = None) -> dict:
    """Mean and population standard deviation of each metric, overall and per group.

    Returns ``{"overall": {metric: {"mean", "std"}}, "per_corpus": {group: {...}}}``
    in fractions (not percent); ``per_corpus`` is present when ``groups`` is given.
    """
    def stats(mask: np.ndarray | slice) -> dict:
        return {m: {"mean": float(np.mean(values[m][mask])), "std": float(np.std(values[m][mask]))}
                for m in metric_names() if m in values}

    result: dict = {"overall": stats(slice(None))}
    if groups is not None:
        labels = np.asarray(groups)
        result["per_corpus"] = {g: stats(labels == g) for g in dict.fromkeys(groups)}
    return result


def query_references(space: UnitSpace, queries: Sequence[Query],
                     occurrences: OccurrenceTable | None = None) -> list[list[list[Interval]]]:
    """Each query's references on ``space``'s unit line: per reference, the intervals of its
    occurrences, the marked one first (only the marked one without ``occurrences``)."""
    if occurrences is None:
        return [[[space.reference_interval(q.corpus, r.document, r.start_index, r.end_index)]
                 for r in q.references] for q in queries]
    return [[[space.reference_interval(q.corpus, doc, start, end) for doc, start, end in alternatives]
             for alternatives in table] for q, table in zip(queries, occurrences.queries)]
