"""Paired comparisons of configurations on the same questions: the tie gate, the questions
needed to separate two configurations and the baseline check (what the search gains out of
sample is :mod:`.crossval`'s).

Picking the best of many configurations on the same questions that score it is optimistic
(the winner's curse), and with 30-300 questions many configurations are within noise of the
best. Whether a difference is *significant* is decided by one test, the exact paired sign-flip
test of :mod:`.significance` on the two configurations' per-question scores
(:meth:`Candidate.differences`); a candidate is tied with the best unless that test, at a
level corrected for every pair the candidates make (:func:`pairwise_level`), says it is worse.
The best is recommended; the tie set says how sure that choice is (see :class:`Recommendation`). A paired
bootstrap over the questions (both configurations' scores resampled together) gives the
intervals that say how large a difference is, never whether it is significant.

Everything here works on per-question arrays (recall and IoU per question; latency and cost
per configuration), so it is tested on constructed scores with known answers and never
re-evaluates a configuration.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from ...schema import invalid
from ..core.objective import Scales, Weights, modelled_utilities, utility_slope, weighted_score
from ..core.records import TrialRecord
from .significance import SignFlipTest, flips_for, minimum_questions, paired_tests

CONFIDENCE = 0.95


BOOTSTRAP_SAMPLES = 2000

#: Score differences at or below this are ties: what the stored scores cannot resolve. Per-question
#: metrics are stored as float32 (about 7 significant digits), so the mean of a metric near 1 is
#: exact to about 1e-7; a smaller gap is rounding (or a modelled latency differing by microseconds),
#: never a measurement. Two trials equal on every per-question metric are never "significantly"
#: apart, nor "about 1 question" from being told apart.
SCORE_RESOLUTION = 1e-6


#: The fewest questions that differ on which the sign-flip test can call one configuration better
#: than another at :data:`CONFIDENCE`, whatever the scores (:func:`~.significance.minimum_questions`:
#: 6 at 95%). Below it the tie gate and the held-out check stand down.
MIN_QUESTIONS = minimum_questions(CONFIDENCE)


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration, as the tie gate sees it."""

    number: int
    recall: np.ndarray  # per question
    iou: np.ndarray  # per question
    latency_s: float
    cost_usd_per_1k: float
    chunks: int
    #: Per question, the other metrics the weights may name (MRR, context tokens, ...).
    metrics: dict[str, np.ndarray] = field(default_factory=dict)

    def on(self, questions: np.ndarray | slice) -> Candidate:
        """The same configuration on a subset of the questions (every per-question metric cut alike)."""
        return replace(self, recall=self.recall[questions], iou=self.iou[questions],
                       metrics={name: values[questions] for name, values in self.metrics.items()})

    def differences(self, other: Candidate, weights: Weights, scales: Scales) -> np.ndarray:
        """Per question, how much this configuration's weighted score exceeds ``other``'s: the
        measured part plus the modelled one (:meth:`difference_parts`).

        >>> a = Candidate(1, np.array([1.0, 0.5]), np.zeros(2), 0.0, 0.0, 1)
        >>> b = Candidate(2, np.array([0.0, 0.5]), np.zeros(2), 0.0, 0.0, 1)
        >>> a.differences(b, Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0), Scales()).tolist()
        [1.0, 0.0]
        """
        measured, modelled = self.difference_parts(other, weights, scales)
        return measured + modelled

    def difference_parts(self, other: Candidate, weights: Weights, scales: Scales) -> tuple[np.ndarray, float]:
        """How much this configuration's weighted score exceeds ``other``'s, in two parts: per
        question, the *measured* part (the weighted metrics the questions score), and the *modelled*
        part (the modelled latency and cost utilities), one constant for every question. Only the
        measured part is evidence: :func:`paired_tests` judges significance on it.

        Each weighted metric's per-question difference counts at its utility's slope at the two
        configurations' mean value (the utility linearised there: exact for the fractions, recall
        and MRR, whose utility is themselves; close for IoU's ``x / (x + half)``). The slope is taken
        at the pair's common mean so that swapping the two configurations on a question negates its
        difference exactly, which is what makes the sign-flip test exact.

        >>> a = Candidate(1, np.array([1.0, 0.5]), np.zeros(2), 0.001, 0.0, 1)
        >>> b = Candidate(2, np.array([0.0, 0.5]), np.zeros(2), 0.002, 0.0, 1)
        >>> measured, modelled = a.difference_parts(b, Weights(recall=1.0, iou=0.0, latency=1.0, cost=0.0), Scales())
        >>> measured.tolist(), modelled > 0
        ([0.5, 0.0], True)
        """
        mine, theirs = self._values(), other._values()
        mine_modelled = modelled_utilities(self.latency_s, self.cost_usd_per_1k, scales)
        theirs_modelled = modelled_utilities(other.latency_s, other.cost_usd_per_1k, scales)
        measured, modelled = np.zeros(len(self.recall)), 0.0
        for name, weight in weights.as_dict().items():
            if weight == 0:
                continue
            if name in mine_modelled:
                modelled += weight * (mine_modelled[name] - theirs_modelled[name])
                continue
            if name not in mine or name not in theirs:
                raise invalid(f"weights.{name}", weight, f"0: the {name} of trial "
                              f"{self.number if name not in mine else other.number} is unknown "
                              "(recorded before chunkwise measured it)")
            first, second = mine[name], theirs[name]
            slope = utility_slope(name, (float(first.mean()) + float(second.mean())) / 2, scales)
            measured = measured + weight * slope * (first - second)
        return measured / weights.total, float(modelled / weights.total)

    def _values(self) -> dict[str, np.ndarray]:
        return {**self.metrics, "recall": self.recall, "iou": self.iou}

    def score(self, weights: Weights, scales: Scales, questions: np.ndarray | slice = slice(None)) -> float:
        means = {name: float(np.mean(values[questions])) for name, values in self.metrics.items()}
        return float(weighted_score(float(np.mean(self.recall[questions])), float(np.mean(self.iou[questions])),
                                    self.latency_s, self.cost_usd_per_1k, weights, scales, means))


#: The tie gate looks at this many of the highest-scoring configurations.
TOP_CANDIDATES = 30


def ranked(candidates: Sequence[Candidate], weights: Weights, scales: Scales) -> list[int]:
    """Indices of ``candidates`` from the highest score down (the lower trial number first on a
    tie): the first is what the study recommends (:func:`recommend`, and the cross-validation's
    choice on each fold)."""
    observed = [c.score(weights, scales) for c in candidates]
    return sorted(range(len(candidates)), key=lambda i: (-observed[i], candidates[i].number))


@dataclass(frozen=True)
class Recommendation:
    """The best configuration, those tied with it, and the one recommended: the best.

    Not the cheapest of the tied (the rule until issue 50): with the tie set as wide as a calibrated
    test makes it, the cheapest tied configuration lost 11-14 recall points to the best baseline out
    of sample on all five benchmark corpora, and the highest score lost less on four of them
    (BENCHMARKS, "What the search adds, out of sample"). The weights already price cost and latency;
    the cheapest of the tied is named beside the recommendation for whoever wants it."""

    best: int
    tied: tuple[int, ...]  # trial numbers not significantly worse than the best (the best included)
    runner_up: int | None
    questions_to_separate: int | None  # to tell the best from the runner-up at the confidence level
    questions: int
    confidence: float
    #: How many candidates the tie gate looked at (its level is corrected for every pair of them).
    candidates: int = 0
    #: The cheapest configuration of the tie set (cost, then latency, then chunks); None: unknown.
    cheapest_tied: int | None = None
    #: The best is ahead of the runner-up by its modelled latency and cost alone: their measured
    #: scores tie (or the runner-up's is higher), so the model, not the questions, decided.
    modelled_decided: bool = False

    @property
    def recommended(self) -> int:
        """The trial recommended: the best (see the class docstring)."""
        return self.best

    def why(self) -> str:
        """Why the tie gate chose :attr:`recommended`, as a clause (no verdict: the statement of
        :class:`StudyRecommendation` says what is recommended, once)."""
        gate = f"paired sign-flip test over {self.questions} questions, {self.confidence:.0%}"
        if self.candidates > 2:
            pairs = self.candidates * (self.candidates - 1) // 2
            gate += f", corrected for the {pairs} pairs of {self.candidates} candidates"
        if len(self.tied) > 1:
            others = len(self.tied) - 1
            text = (f"the highest score, statistically tied with {others} other configuration{'s' * (others > 1)} "
                    f"({gate})")
            if self.modelled_decided and self.runner_up is not None:
                text += (f"; it is ahead of trial {self.runner_up} by its modelled latency and cost only (the "
                         "questions score the two alike): the model, not a measurement, decided")
            if self.cheapest_tied is not None and self.cheapest_tied != self.recommended:
                text += f"; the cheapest of the tied is trial {self.cheapest_tied}"
            return text
        return f"the highest score, significantly better than every other configuration ({gate})"

    def separation(self) -> str:
        """How many questions would tell the top two apart (empty when unknown)."""
        if self.questions_to_separate is None or self.runner_up is None:
            return ""
        questions = "question" if self.questions_to_separate == 1 else "questions"
        return (f"telling the top two apart (trials {self.best} and {self.runner_up}) at {self.confidence:.0%} "
                f"would take about {self.questions_to_separate:,} {questions}")


def bootstrap_scores(candidates: Sequence[Candidate], weights: Weights, scales: Scales, *,
                     samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> np.ndarray:
    """Weighted scores of every candidate on the same ``samples`` resamplings of the questions
    (shape ``(candidates, samples)``): paired, so differences keep their per-question link."""
    n = len(candidates[0].recall)
    index = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    out = np.empty((len(candidates), samples))
    for row, candidate in enumerate(candidates):
        means = {name: values[index].mean(axis=1) for name, values in candidate.metrics.items()
                 if name in weights.metrics()}
        out[row] = weighted_score(candidate.recall[index].mean(axis=1), candidate.iou[index].mean(axis=1),
                                  candidate.latency_s, candidate.cost_usd_per_1k, weights, scales, means)
    return out


def pairwise_level(candidates: int, confidence: float = CONFIDENCE) -> float:
    """The level each comparison of the tie gate is tested at: ``1 - confidence`` shared among
    every pair the ``candidates`` make (Bonferroni).

    Why every pair, when the gate compares only the best with each other: the best is chosen on the
    same questions, as the largest of them, so the gap between it and the others is the largest of
    all the gaps, not a typical one. Corrected for only the comparisons it makes, the gate left a
    configuration as good as the best out of its tie set in 11% of simulated studies of 5 equal
    configurations on 30 questions and 26% of 30 (``benchmarks/search/significance_rates.py``); shared
    among every pair, no such claim is wrong more often than ``1 - confidence`` (a wrong claim
    needs some pair of equal configurations to reach the level, whichever pair the data made the
    best).

    >>> round(pairwise_level(2), 4), round(pairwise_level(30), 6)
    (0.05, 0.000115)
    """
    return (1 - confidence) / max(1, candidates * (candidates - 1) // 2)


def tied_with(measured: np.ndarray, modelled: np.ndarray | float, candidates: int, confidence: float = CONFIDENCE,
              *, seed: int = 0) -> np.ndarray:
    """Which of the other candidates are not significantly worse than the best, given the best's
    per-question measured score differences to each (``(questions, others)``, a column per other
    candidate) and its modelled ones (a constant per column; :meth:`Candidate.difference_parts`)
    among ``candidates`` in all: one is worse only when :func:`~.significance.paired_tests`
    rejects at :func:`pairwise_level`, so the chance that any configuration as good as the best is
    wrongly left out of the tie set is at most ``1 - confidence``, and a modelled latency or cost
    never makes a measured tie a significant difference.

    A mean difference no larger than :data:`SCORE_RESOLUTION` is a tie whatever the test says.

    >>> ones = np.ones((8, 1))
    >>> tied_with(np.hstack([ones * 0.1, ones * 0.9]), 0.0, 3).tolist()  # worse on all 8: p = 2/256 <= 0.05/3
    [False, False]
    >>> tied_with(ones * 1e-8, 0.0, 2).tolist()
    [True]
    >>> tied_with(np.ones((5, 1)), 0.0, 2).tolist()  # 5 questions: p = 2/32 at best
    [True]
    >>> tied_with(np.zeros((8, 1)), 0.01, 2).tolist()  # only modelled apart: tied
    [True]
    """
    level = pairwise_level(candidates, confidence)
    measured = np.asarray(measured, dtype=float)
    if measured.shape[1] == 0:
        return np.zeros(0, dtype=bool)
    return not_worse(paired_tests(measured, modelled, seed=seed, flips=flips_for(level)), level)


def not_worse(tests: Sequence[SignFlipTest], level: float) -> np.ndarray:
    """Given the sign-flip tests of the best configuration's per-question scores minus each other
    candidate's, which candidates are tied with the best: all but those whose p-value is at most
    ``level`` (:func:`pairwise_level`) with a mean difference above :data:`SCORE_RESOLUTION`
    (:func:`tied_with` for per-question scores; the decision bar calls this with tests it computed
    once for every pair)."""
    return np.array([not (test.p_value <= level and test.mean > SCORE_RESOLUTION) for test in tests], dtype=bool)


def recommend(candidates: Sequence[Candidate], weights: Weights, scales: Scales, *,
              confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> Recommendation:
    """The tie gate (see the module docstring) over ``candidates``, which share their questions."""
    if not candidates:
        raise invalid("candidates", list(candidates), "one candidate or more to recommend")
    order = ranked(candidates, weights, scales)
    observed = np.array([c.score(weights, scales) for c in candidates])
    best = order[0]
    others = [i for i in range(len(candidates)) if i != best]
    parts = [candidates[best].difference_parts(candidates[i], weights, scales) for i in others]
    measured = np.array([part[0] for part in parts]).T.reshape(len(candidates[best].recall), len(others))
    ties = np.ones(len(candidates), dtype=bool)
    ties[others] = tied_with(measured, np.array([part[1] for part in parts]), len(candidates), confidence, seed=seed)
    tied = [i for i in order if ties[i]]
    cheapest = min(tied, key=lambda i: (candidates[i].cost_usd_per_1k, candidates[i].latency_s,
                                        candidates[i].chunks, candidates[i].number))
    runner_up = order[1] if len(order) > 1 else None
    needed, modelled_decided = None, False
    if runner_up is not None:
        measured_ahead, _ = candidates[best].difference_parts(candidates[runner_up], weights, scales)
        modelled_decided = (float(measured_ahead.mean()) <= SCORE_RESOLUTION
                            and observed[best] - observed[runner_up] > SCORE_RESOLUTION)
        boot = bootstrap_scores([candidates[best], candidates[runner_up]], weights, scales, samples=samples,
                                seed=seed)
        needed = questions_to_separate(boot[0] - boot[1], observed[best] - observed[runner_up],
                                       len(candidates[0].recall), confidence)
    return Recommendation(
        best=candidates[best].number, tied=tuple(candidates[i].number for i in tied),
        runner_up=None if runner_up is None else candidates[runner_up].number,
        questions_to_separate=needed, questions=len(candidates[0].recall), confidence=confidence,
        candidates=len(candidates), cheapest_tied=candidates[cheapest].number, modelled_decided=modelled_decided)


def questions_to_separate(bootstrap_differences: np.ndarray, observed_difference: float, questions: int,
                          confidence: float = CONFIDENCE) -> int | None:
    """Questions needed for a difference this large to clear the confidence level, assuming
    its standard error shrinks as 1/sqrt(questions): ``n * (z * se / d)**2``.

    A difference of 0.0196 whose bootstrap standard error is 0.01 at 50 questions sits right
    at z = 1.96, so 50 questions suffice:

    >>> questions_to_separate(np.array([0.0096, 0.0296] * 50), 0.0196, 50)
    50
    """
    spread = float(np.std(bootstrap_differences))
    if observed_difference <= SCORE_RESOLUTION:  # no difference to tell apart
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return max(1, math.ceil(questions * (z * spread / observed_difference) ** 2))


@dataclass(frozen=True)
class Comparison:
    """Configuration *a* against *b* on the same questions, paired: the difference of their
    weighted scores and recalls (a - b) with bootstrap confidence intervals (how large), and the
    sign-flip test of the score difference (whether significant)."""

    difference: float
    low: float
    high: float
    recall_difference: float
    recall_low: float
    recall_high: float
    questions: int
    confidence: float = CONFIDENCE
    #: The two-sided sign-flip test of the per-question score differences (None: not tested).
    test: SignFlipTest | None = None

    @property
    def significant(self) -> bool:
        return self.test is not None and self.test.significant(self.confidence)

    @property
    def better(self) -> bool:
        """*a* is significantly better than *b*: the sign-flip test rejects "no difference" at
        :attr:`confidence` and *a*'s score is higher, by more than the scores resolve
        (:data:`SCORE_RESOLUTION`)."""
        return self.significant and self.difference > SCORE_RESOLUTION

    @property
    def worse(self) -> bool:
        return self.significant and self.difference < -SCORE_RESOLUTION

    def describe(self) -> str:
        """``score +0.0412 [+0.0100, +0.0731], recall +6.2 points [+1.0, +11.5], p = 0.031 (sign-flip
        test, 9 of 12 questions differ)``."""
        text = (f"score {self.difference:+.4f} [{self.low:+.4f}, {self.high:+.4f}], recall "
                f"{self.recall_difference * 100:+.1f} points [{self.recall_low * 100:+.1f}, "
                f"{self.recall_high * 100:+.1f}]")
        if self.test is not None:
            text += (f", p = {self.test.p_value:.2g} (sign-flip test, {self.test.nonzero} of {self.questions} "
                     "questions differ)")
        return text


def compare(a: Candidate, b: Candidate, weights: Weights, scales: Scales, questions: np.ndarray | slice = slice(None),
            *, confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> Comparison:
    """``a - b`` over ``questions`` (a boolean mask or slice): the paired bootstrap's intervals
    and the sign-flip test.

    >>> one = Candidate(1, np.array([1.0, 1.0, 0.0, 1.0]), np.zeros(4), 0.0, 0.0, 1)
    >>> same = compare(one, one, Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0), Scales())
    >>> (same.difference, same.low, same.high, same.better, same.test.p_value)
    (0.0, 0.0, 0.0, False, 1.0)
    """
    pair = [c.on(questions) for c in (a, b)]
    boot = bootstrap_scores(pair, weights, scales, samples=samples, seed=seed)
    n = len(pair[0].recall)
    index = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    recall = (pair[0].recall - pair[1].recall)[index].mean(axis=1)
    tail = (1 - confidence) / 2
    diff = boot[0] - boot[1]
    measured, modelled = pair[0].difference_parts(pair[1], weights, scales)
    test = paired_tests(measured[:, None], modelled, seed=seed)[0]
    return Comparison(
        difference=pair[0].score(weights, scales) - pair[1].score(weights, scales),
        low=float(np.quantile(diff, tail)), high=float(np.quantile(diff, 1 - tail)),
        recall_difference=float(np.mean(pair[0].recall) - np.mean(pair[1].recall)),
        recall_low=float(np.quantile(recall, tail)), recall_high=float(np.quantile(recall, 1 - tail)),
        questions=n, confidence=confidence, test=test)


def candidate(record: TrialRecord, questions: np.ndarray | slice = slice(None)) -> Candidate | None:
    """A trial as the tie gate sees it (None when it stored no per-question scores)."""
    per_query = record.per_query()
    if per_query is None:
        return None
    return Candidate(record.number, per_query["recall"][questions], per_query["iou"][questions],
                     record.latency_ms / 1000, record.cost_usd_per_1k_queries, int(record.metric("chunks")),
                     {name: values[questions] for name, values in per_query.items() if name not in ("recall", "iou")})
