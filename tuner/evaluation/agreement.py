"""How far one evaluation set can stand in for another: both rank a fixed grid of configurations.

A team that has a handful of its own questions wants to know whether a generated set picks the
configuration its own questions would pick. Tuning only ever uses a set to *rank* configurations,
so that is what is compared: :data:`GRID`, a fixed, cheap grid (a few chunkings under dense,
BM25 and hybrid retrieval, all at ``k`` = :data:`GRID_K`, so that no row wins by retrieving more),
is scored on both sets, each configuration by its mean recall, and the two rankings are compared
by Kendall's τ-b, with a bootstrap interval over questions.

* :func:`~.grid.score_grid` (in :mod:`.grid`, beside the grid) scores the grid on several sets at
  once: each chunking is split once and embedded once, for every set's questions together, and
  its retrieval methods are ranked from the same vectors (BM25 rows embed nothing);
* :func:`agreement` compares two :class:`ScoreTable` s: τ-b, its percentile interval from
  resampling each set's questions independently, and where each set's best configuration lands
  in the other's ranking;
* :func:`~.head_to_head.head_to_head` (in :mod:`.head_to_head`) puts the candidate beside the
  reference's own questions on equal terms: split the reference at random, and rank the grid on as
  many of the candidate's questions as on one part of the reference, each against the other part.
  The τ-b of the reference's own part is what to expect of a set of that size asked as the team's
  is: with few questions, or configurations that score alike, two halves of a team's own questions
  rank the grid far from identically;
* :func:`measure_agreement` does both, after :func:`check_comparable` refused what cannot be
  compared;
* :attr:`Agreement.verdict` and :meth:`Agreement.sentence` say what the figures mean for the
  recommendation: by the head-to-head where there is one (:data:`PARITY_CLOSER`,
  :data:`SCREEN_CLOSER`), since no fixed τ-b says how far a set of this many questions can agree
  (the team's own halves reach 0.45-0.65 against each other on the corpora measured); by τ-b
  (:data:`STAND_IN_TAU`) only without one. The thresholds are declared once, with the figures
  measured on them, in :mod:`tuner.data.generate.trust`.

Two hand-built tables that rank three configurations the same way::

    >>> import numpy as np
    >>> own = ScoreTable("own", ("a", "b", "c"), np.array([[0.2, 0.5, 0.9], [0.1, 0.4, 0.8]] * 3))
    >>> made = ScoreTable("made", ("a", "b", "c"), np.array([[0.0, 0.6, 0.7], [0.3, 0.4, 1.0]] * 3))
    >>> found = agreement(made, own, resamples=200)
    >>> round(found.tau, 2), found.reference_best_on_candidate.ranks, found.verdict
    (1.0, (1, 1), 'stand-in')
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..data.corpus import Corpus
from ..data.evalset import EvaluationSet
from ..data.generate.trust import PARITY_CLOSER, SCREEN_CLOSER, SCREEN_TAU, STAND_IN_LOW, STAND_IN_TAU
from ..embedding import Embedder, EmbeddingCache
from ..errors import option
from ..schema import ParamSpec, invalid
from .config import EvaluationConfig
from .grid import (
    GRID,
    GRID_K,
    AgreementError,
    ChunkingScored,
    GridRow,
    ScoreTable,
    embedded_chunkings,
    grid_rows,
    score_grid,
)
from .head_to_head import MIN_QUESTIONS, SPLITS, HeadToHead, head_to_head, kendall_tau_b, tau_interval

#: Names callers imported from this module before the grid, the head-to-head and the verdict's
#: thresholds had modules of their own (:mod:`.grid`, :mod:`.head_to_head`, :mod:`tuner.data.generate.trust`).
__all__ = ["GRID", "GRID_K", "MIN_CONFIGURATIONS", "MIN_QUESTIONS", "PARITY_CLOSER", "RESAMPLES_ALLOWED",
           "SCREEN_CLOSER", "SCREEN_TAU",
           "SECONDS_PER_RESAMPLE", "SPLITS", "STAND_IN_LOW", "STAND_IN_TAU", "Agreement", "AgreementError",
           "ChunkingScored", "GridRow", "HeadToHead", "Placement", "ScoreTable", "agreement", "check_comparable",
           "check_resamples", "embedded_chunkings", "grid_rows", "head_to_head", "kendall_tau_b", "measure_agreement",
           "score_grid"]

#: Fewer configurations than this and τ-b can only be +1 or -1.
MIN_CONFIGURATIONS = 3
#: The bootstrap resamples an interval takes: at least 100 for the ends of a 95% interval, and at
#: most 20,000, beyond which its ends no longer move in the two decimals shown (the standard error
#: of the 2.5% quantile's level is then 0.1 point) while each resample costs about 0.3 ms: a
#: billion would take days, in silence.
RESAMPLES_ALLOWED = ParamSpec(int, low=100, high=20_000)
#: About what one resample takes (20 configurations, two cores), for a message that says how long.
SECONDS_PER_RESAMPLE = 0.0005


@dataclass(frozen=True)
class Placement:
    """Where one set's best configuration lands in the other set's ranking; when several tie for
    best on their own set, where the tied ones land (a study could recommend any of them).

    Attributes:
        labels: the best configuration, or those tied for best, in grid order.
        ranks: their best and worst rank on the other set (1 the best; ties share the better rank).
        of: configurations ranked.
        scores: their lowest and highest mean score on the other set.
        best_score: the other set's best mean score.
    """

    labels: tuple[str, ...]
    ranks: tuple[int, int]
    of: int
    scores: tuple[float, float]
    best_score: float

    @property
    def shortfall(self) -> float:
        """How far below the other set's best the worst of them scores there (0: each is that best)."""
        return self.best_score - self.scores[0]


def _placement(best_of: ScoreTable, on: ScoreTable) -> Placement:
    means = best_of.means
    tied = np.flatnonzero(means == means.max())
    ranks, scores = on.ranks[tied], on.means[tied]
    return Placement(tuple(best_of.labels[i] for i in tied), (int(ranks.min()), int(ranks.max())), len(on.labels),
                     (float(scores.min()), float(scores.max())), float(on.means.max()))


@dataclass(frozen=True)
class Agreement:
    """How alike two sets rank the grid (see :func:`agreement`).

    Attributes:
        candidate: the set that would stand in (a generated one).
        reference: the set it would stand in for (the team's own questions).
        tau: Kendall's τ-b between the two rankings.
        interval: its percentile bootstrap interval at ``confidence``: where τ-b falls when each
            set's questions are drawn again. Each draw ranks with noise of its own, so the interval
            lies below a τ-b near 1 (two identical sets: τ-b 1, an interval up to 1 only when every
            question ranks the configurations alike).
        confidence: the interval's level.
        resamples: bootstrap resamples drawn.
        undefined: resamples in which a set scored every configuration the same (no ranking,
            no τ-b); the interval is taken over the others.
        head_to_head: the candidate beside the reference's own questions on equal terms (``None``
            where the reference is too small to split, or it was not asked for).
    """

    candidate: ScoreTable
    reference: ScoreTable
    tau: float
    interval: tuple[float, float]
    confidence: float
    resamples: int
    undefined: int = 0
    head_to_head: HeadToHead | None = None

    @property
    def candidate_best_on_reference(self) -> Placement:
        return _placement(self.candidate, self.reference)

    @property
    def reference_best_on_candidate(self) -> Placement:
        return _placement(self.reference, self.candidate)

    @property
    def basis(self) -> str:
        """What the verdict follows: ``head-to-head`` where one compares (the candidate beside as
        many of the reference's own questions), else ``tau`` (the fixed :data:`STAND_IN_TAU`)."""
        versus = self.head_to_head
        return "head-to-head" if versus is not None and versus.compared > 0 else "tau"

    @property
    def verdict(self) -> str:
        """``stand-in``: the candidate is as good a stand-in as the reference's own questions can
        tell; ``unconfirmed`` (τ-b only): it ranks as the reference does, but the interval reaches too
        low (too few questions to tell); ``screen``: good enough to shortlist; ``own``: tune on the
        reference.

        With a head-to-head (:attr:`basis`), by the share of splits in which the candidate ranks
        closer to the reference's held-out questions than an equal share of its own:
        :data:`PARITY_CLOSER` or more ``stand-in``, :data:`SCREEN_CLOSER` or more ``screen``, less
        ``own``. Without one, by τ-b against :data:`STAND_IN_TAU` and :data:`SCREEN_TAU`."""
        if self.basis == "head-to-head":
            closer = self.head_to_head.closer
            return "stand-in" if closer >= PARITY_CLOSER else "screen" if closer >= SCREEN_CLOSER else "own"
        low = self.interval[0] if not math.isnan(self.interval[0]) else -1.0
        if self.tau >= STAND_IN_TAU:
            return "stand-in" if low >= STAND_IN_LOW else "unconfirmed"
        return "screen" if self.tau >= SCREEN_TAU else "own"

    def sentence(self) -> str:
        """What the figures mean for the recommendation, in one sentence."""
        made, own = self.candidate.name, self.reference.name
        if self.basis == "head-to-head":
            versus = self.head_to_head
            closer, size = f"{versus.closer:.0%}", versus.size
            return {
                "stand-in": f"{made} can stand in for {own} as well as {size} more of {own}'s own questions could: "
                            f"beside as many of them it ranks the configurations closer to {own}'s other "
                            f"questions in {closer} of the splits (parity is about half), so a study tuned on it "
                            f"should recommend what {own} would, as far as {own}'s own questions can tell.",
                "screen": f"{made} ranks the configurations less closely to {own}'s questions than as many of "
                          f"{own}'s own do (closer in only {closer} of the splits; parity is about half): use it "
                          f"only to shortlist configurations, and choose among its best on {own}.",
                "own": f"{made} does not rank the configurations as {own} does: beside as many of {own}'s own "
                       f"questions it comes closer in only {closer} of the splits (parity is about half); tune "
                       f"on {own}: a study tuned on {made} would not recommend what {own} would.",
            }[self.verdict]
        tau, low = f"{self.tau:.2f}", f"{self.interval[0]:.2f}"
        return {
            "stand-in": f"{made} can stand in for {own}: it ranks the configurations as {own} does (tau-b {tau}; "
                        f"the low end of its draws {low}), so a study tuned on it should recommend what {own} "
                        "would.",
            "unconfirmed": f"{made} ranks the configurations as {own} does (tau-b {tau}), but "
                           f"{self.candidate.questions} and {self.reference.questions} questions are too few to be "
                           f"sure (its draws reach down to {low}): use {made} only to shortlist configurations and "
                           f"choose among them on {own}, or measure again with more questions.",
            "screen": f"{made} ranks the configurations only roughly as {own} does (tau-b {tau}): use it only to "
                      f"shortlist configurations, and choose among its best on {own}.",
            "own": f"{made} does not rank the configurations as {own} does (tau-b {tau}): tune on {own}; a study "
                   f"tuned on {made} would not recommend what {own} would.",
        }[self.verdict]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the figures, each configuration's mean on both sets, the verdict."""
        return {
            "candidate": {"name": self.candidate.name, "questions": self.candidate.questions},
            "reference": {"name": self.reference.name, "questions": self.reference.questions},
            "k": GRID_K,
            "tau_b": self.tau,
            "interval": list(self.interval),
            "confidence": self.confidence,
            "resamples": self.resamples,
            "undefined_resamples": self.undefined,
            "configurations": [{"label": label, "candidate": float(c), "reference": float(r)}
                               for label, c, r in zip(self.candidate.labels, self.candidate.means,
                                                      self.reference.means)],
            **{name: {**dataclasses.asdict(placed), "shortfall": placed.shortfall}
               for name, placed in (("candidate_best_on_reference", self.candidate_best_on_reference),
                                    ("reference_best_on_candidate", self.reference_best_on_candidate))},
            "head_to_head": None if self.head_to_head is None else {
                **self.head_to_head.to_dict(), "sentence": self.head_to_head.sentence(self.candidate.name,
                                                                                     self.reference.name)},
            "verdict": self.verdict,
            "verdict_basis": self.basis,
            "sentence": self.sentence(),
        }


def agreement(candidate: ScoreTable, reference: ScoreTable, *, resamples: int = 2000, confidence: float = 0.95,
              seed: int = 0, splits: int = SPLITS) -> Agreement:
    """τ-b between the rankings of ``candidate`` and ``reference`` (by mean score), and its
    percentile bootstrap interval: each set's questions resampled independently, with
    replacement, the grid re-ranked on both and τ-b recomputed, ``resamples`` times; and, unless
    ``splits`` is 0, the two on equal terms (:func:`head_to_head`).

    Raises:
        AgreementError: the tables rank different configurations, either has fewer than
            :data:`MIN_QUESTIONS` questions, or a set scores every configuration the same.
    """
    from scipy.stats import bootstrap

    check_resamples(resamples)
    if candidate.labels != reference.labels:
        raise AgreementError(f"{candidate.name} and {reference.name} were scored on different configurations")
    if len(candidate.labels) < MIN_CONFIGURATIONS:
        raise AgreementError(f"{len(candidate.labels)} configuration(s) to rank: at least {MIN_CONFIGURATIONS} "
                             "are needed for a ranking to agree or not")
    for table in (candidate, reference):
        _enough_questions(table.name, table.questions)
        if np.all(table.means == table.means[0]):
            raise AgreementError(f"{table.name}: every configuration scores the same ({table.means[0]:.1%} mean "
                                 "recall), so its questions rank nothing; they are too easy (or too hard) for the "
                                 "grid")
    tau = kendall_tau_b(candidate.means, reference.means)

    def resampled_tau(asked: np.ndarray, own: np.ndarray, axis: int = -1) -> np.ndarray:
        # The data bootstrapped are question indices (each set's own), so that a resample takes a
        # question's whole row of scores: scipy's bootstrap resamples 1-D samples.
        made_means = candidate.scores[asked].mean(axis=-2)
        own_means = reference.scores[own].mean(axis=-2)
        width = made_means.shape[-1]
        taus = [kendall_tau_b(x, y) for x, y in zip(made_means.reshape(-1, width), own_means.reshape(-1, width))]
        return np.asarray(taus).reshape(made_means.shape[:-1])

    # scipy's bootstrap: independent resampling of several samples (paired=False) and the
    # percentile interval, without our own resampling loop.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # a degenerate distribution (every resample agrees) is a result here
        found = bootstrap((np.arange(candidate.questions), np.arange(reference.questions)), resampled_tau,
                          n_resamples=resamples, batch=500, vectorized=True, paired=False, method="percentile",
                          confidence_level=confidence, rng=np.random.default_rng(seed))
    taus = found.bootstrap_distribution
    undefined = int(np.isnan(taus).sum())
    if undefined == 0:
        interval = (float(found.confidence_interval.low), float(found.confidence_interval.high))
    else:  # the same percentiles over the resamples that ranked something (nan when none did)
        interval = tuple(tau_interval(taus, confidence))
    return Agreement(candidate, reference, tau, interval, confidence, resamples, undefined,
                     head_to_head(candidate, reference, splits=splits, seed=seed) if splits else None)


def check_resamples(resamples: int) -> int:
    """``resamples`` when :data:`RESAMPLES_ALLOWED`, else one message naming it and why."""
    try:
        return RESAMPLES_ALLOWED.coerce(resamples)
    except ValueError:
        raise invalid(option("resamples"), resamples,
                      f"{RESAMPLES_ALLOWED.allowed()} (100 for the ends of a 95% interval; beyond "
                      f"{RESAMPLES_ALLOWED.high:,.0f} they no longer move)") from None


def _enough_questions(name: str, count: int) -> None:
    if count < MIN_QUESTIONS:
        raise AgreementError(f"{name} holds {count} question(s) to score (rejected and stale ones left out): at least "
                             f"{MIN_QUESTIONS} are needed to rank configurations with an interval (more narrow it)")


def check_comparable(candidate: EvaluationSet, reference: EvaluationSet, candidate_name: str,
                     reference_name: str) -> None:
    """Refuse two sets that cannot be compared, before anything is scored: they ask about
    different corpora, or one holds fewer than :data:`MIN_QUESTIONS` questions."""
    asked, own = set(candidate.corpora), set(reference.corpora)
    if asked != own:
        raise AgreementError(f"{candidate_name} asks about corpus {', '.join(sorted(asked))} and {reference_name} "
                             f"about {', '.join(sorted(own))}: compare sets about the same corpora")
    _enough_questions(candidate_name, len(candidate))
    _enough_questions(reference_name, len(reference))



def measure_agreement(corpora: Corpus | Sequence[Corpus], candidate: EvaluationSet, reference: EvaluationSet, *,
                      candidate_name: str | None = None, reference_name: str | None = None,
                      grid: Sequence[GridRow] = GRID, resamples: int = 2000, confidence: float = 0.95,
                      seed: int = 0, splits: int = SPLITS, config: EvaluationConfig | None = None,
                      embedder: Embedder | None = None,
                      cache: EmbeddingCache | bool | None = True,
                      on_chunking: Callable[[ChunkingScored], None] | None = None,
                      on_embedding: Callable[[int, int], None] | None = None) -> Agreement:
    """How far ``candidate`` (a generated set) can stand in for ``reference`` (your own questions):
    :func:`check_comparable`, then :func:`score_grid` on both, then :func:`agreement`.

    ``candidate_name``, ``reference_name``: what messages call them (default: their files).
    The other arguments are those of :func:`score_grid` and :func:`agreement`.
    """
    check_resamples(resamples)  # before anything is scored
    candidate_name = candidate_name or candidate.origin or "the candidate set"
    reference_name = reference_name or reference.origin or "the reference set"
    check_comparable(candidate, reference, candidate_name, reference_name)
    made, own = score_grid(corpora, [candidate, reference], [candidate_name, reference_name], grid, config=config,
                           embedder=embedder, cache=cache, on_chunking=on_chunking, on_embedding=on_embedding)
    return agreement(made, own, resamples=resamples, confidence=confidence, seed=seed, splits=splits)
