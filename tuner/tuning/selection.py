"""What to recommend, and how sure to be: the tie gate, the questions needed to separate two
configurations, and a cross-validated estimate of what tuning gains over a default.

Picking the best of many configurations on the same questions that score it is optimistic
(the winner's curse), and with 30-300 questions many configurations are within noise of the
best. So the recommendation is the *cheapest* configuration (modelled cost, then latency, then
fewer chunks) among those not significantly worse than the best: for each candidate, a paired
bootstrap over the questions resamples both configurations' per-question scores together and
recomputes their weighted scores; a candidate whose score difference to the best has a
confidence interval reaching 0 is tied with it.

Everything here works on per-question arrays (recall and IoU per question; latency and cost
per configuration), so it is tested on constructed scores with known answers and never
re-evaluates a configuration.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import optuna

from .objective import Scales, Weights, weighted_score
from .records import TrialRecord, evaluated
from .settings import StudySettings

CONFIDENCE = 0.95
BOOTSTRAP_SAMPLES = 2000


@dataclass(frozen=True)
class Candidate:
    """One evaluated configuration, as the tie gate sees it."""

    number: int
    recall: np.ndarray  # per question
    iou: np.ndarray  # per question
    latency_s: float
    cost_usd_per_1k: float
    chunks: int

    def score(self, weights: Weights, scales: Scales, questions: np.ndarray | slice = slice(None)) -> float:
        return float(weighted_score(float(np.mean(self.recall[questions])), float(np.mean(self.iou[questions])),
                                    self.latency_s, self.cost_usd_per_1k, weights, scales))


@dataclass(frozen=True)
class Recommendation:
    """The best configuration, those tied with it, and the one recommended."""

    best: int
    recommended: int
    tied: tuple[int, ...]  # trial numbers not significantly worse than the best (the best included)
    runner_up: int | None
    questions_to_separate: int | None  # to tell the best from the runner-up at the confidence level
    questions: int
    confidence: float

    def describe(self) -> str:
        """The tie gate's verdict, one or two sentences."""
        if len(self.tied) > 1:
            text = (f"{len(self.tied)} configurations are statistically tied with the best (paired bootstrap over "
                    f"{self.questions} questions, {self.confidence:.0%}); recommending the cheapest: trial "
                    f"{self.recommended}.")
        else:
            text = f"The best configuration (trial {self.best}) is significantly better than every other one."
        if self.questions_to_separate is not None and self.runner_up is not None:
            text += (f" Telling the top two apart (trials {self.best} and {self.runner_up}) at "
                     f"{self.confidence:.0%} would take about {self.questions_to_separate:,} questions.")
        return text


def bootstrap_scores(candidates: Sequence[Candidate], weights: Weights, scales: Scales, *,
                     samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> np.ndarray:
    """Weighted scores of every candidate on the same ``samples`` resamplings of the questions
    (shape ``(candidates, samples)``): paired, so differences keep their per-question link."""
    n = len(candidates[0].recall)
    index = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    out = np.empty((len(candidates), samples))
    for row, candidate in enumerate(candidates):
        out[row] = weighted_score(candidate.recall[index].mean(axis=1), candidate.iou[index].mean(axis=1),
                                  candidate.latency_s, candidate.cost_usd_per_1k, weights, scales)
    return out


def tied_with(boot: np.ndarray, best: int, confidence: float = CONFIDENCE) -> np.ndarray:
    """Which rows of paired bootstrap scores (``(candidates, samples)``, as from
    :func:`bootstrap_scores`) are not significantly worse than row ``best``: the lower
    ``(1 - confidence) / 2`` quantile of their difference to it reaches 0 (``best`` itself included).

    >>> tied_with(np.array([[1.0, 1.2, 1.4], [0.9, 1.3, 1.3], [0.1, 0.2, 0.3]]), 0).tolist()
    [True, True, False]
    """
    return np.quantile(boot[best] - boot, (1 - confidence) / 2, axis=1) <= 0


def recommend(candidates: Sequence[Candidate], weights: Weights, scales: Scales, *,
              confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> Recommendation:
    """The tie gate (see the module docstring) over ``candidates``, which share their questions."""
    if not candidates:
        raise ValueError("no candidate to recommend")
    observed = np.array([c.score(weights, scales) for c in candidates])
    order = sorted(range(len(candidates)), key=lambda i: (-observed[i], candidates[i].number))
    best = order[0]
    boot = bootstrap_scores(candidates, weights, scales, samples=samples, seed=seed)
    ties = tied_with(boot, best, confidence)
    tied = [i for i in order if ties[i]]
    cheapest = min(tied, key=lambda i: (candidates[i].cost_usd_per_1k, candidates[i].latency_s,
                                        candidates[i].chunks, candidates[i].number))
    runner_up = order[1] if len(order) > 1 else None
    needed = None
    if runner_up is not None:
        needed = questions_to_separate(boot[best] - boot[runner_up], observed[best] - observed[runner_up],
                                       len(candidates[0].recall), confidence)
    return Recommendation(
        best=candidates[best].number, recommended=candidates[cheapest].number,
        tied=tuple(candidates[i].number for i in tied),
        runner_up=None if runner_up is None else candidates[runner_up].number,
        questions_to_separate=needed, questions=len(candidates[0].recall), confidence=confidence)


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
    if observed_difference <= 0:
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return max(1, math.ceil(questions * (z * spread / observed_difference) ** 2))


@dataclass(frozen=True)
class CrossValidatedGain:
    """What tuning gains over a default, estimated on questions the choice never saw."""

    gain: float  # mean over folds of (chosen score - default score) on the held-out fold
    recall_gain: float  # the same, in recall (fraction)
    naive_gain: float  # best on all questions minus the default, on those same questions
    folds: tuple[float, ...]  # the gain in each fold
    chosen: tuple[int, ...]  # the trial chosen in each fold


def cross_validated_gain(candidates: Sequence[Candidate], default: Candidate, weights: Weights, scales: Scales, *,
                         folds: int = 5, seed: int = 0) -> CrossValidatedGain:
    """For each fold of the questions: choose the best candidate on the other folds, score it
    and the default on this fold; the mean difference is an honest estimate of the gain."""
    n = len(default.recall)
    folds = max(2, min(folds, n))
    parts = np.array_split(np.random.default_rng(seed).permutation(n), folds)
    gains, recall_gains, chosen = [], [], []
    for part in parts:
        train = np.setdiff1d(np.arange(n), part)
        pick = max(candidates, key=lambda c: (c.score(weights, scales, train), -c.number))
        chosen.append(pick.number)
        gains.append(pick.score(weights, scales, part) - default.score(weights, scales, part))
        recall_gains.append(float(np.mean(pick.recall[part]) - np.mean(default.recall[part])))
    best_all = max(candidates, key=lambda c: (c.score(weights, scales), -c.number))
    return CrossValidatedGain(
        gain=float(np.mean(gains)), recall_gain=float(np.mean(recall_gains)),
        naive_gain=best_all.score(weights, scales) - default.score(weights, scales),
        folds=tuple(float(g) for g in gains), chosen=tuple(chosen))


#: The tie gate looks at this many of the highest-scoring configurations.
TOP_CANDIDATES = 30


@dataclass(frozen=True)
class StudyRecommendation:
    """The tie gate's verdict on a study, with the records it speaks of."""

    recommendation: Recommendation
    records: dict[int, TrialRecord]

    @property
    def recommended(self) -> TrialRecord:
        return self.records[self.recommendation.recommended]

    @property
    def best(self) -> TrialRecord:
        return self.records[self.recommendation.best]


def candidate(record: TrialRecord, questions: np.ndarray | slice = slice(None)) -> Candidate | None:
    """A trial as the tie gate sees it (None when it stored no per-question scores)."""
    per_query = record.per_query()
    if per_query is None:
        return None
    return Candidate(record.number, per_query["recall"][questions], per_query["iou"][questions],
                     record.latency_ms / 1000, record.cost_usd_per_1k_queries, int(record.metric("chunks")))


def recommend_for_study(study: optuna.Study, *, seed: int = 0) -> StudyRecommendation | None:
    """Run the tie gate on the study's best configurations, on its search questions."""
    settings = StudySettings.of(study)
    ranked = sorted(evaluated(study), key=lambda r: (-r.score, r.number))[:TOP_CANDIDATES]
    records, candidates = {}, []
    for record in ranked:
        stored = record.stored_per_query
        if stored is None:
            continue
        found = candidate(record, settings.search_mask(int(stored["queries"])))
        if found is not None:
            records[record.number] = record
            candidates.append(found)
    if not candidates:
        return None
    return StudyRecommendation(recommend(candidates, settings.weights, settings.scales, seed=seed), records)
