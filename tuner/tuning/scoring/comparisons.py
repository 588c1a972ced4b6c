"""Paired comparisons of configurations on the same questions: the tie gate, the questions
needed to separate two configurations, the baseline check and a cross-validated estimate of what
tuning gains over a default.

Picking the best of many configurations on the same questions that score it is optimistic
(the winner's curse), and with 30-300 questions many configurations are within noise of the
best. A paired bootstrap over the questions resamples both configurations' per-question scores
together and recomputes their weighted scores; a candidate whose score difference to the best has
a confidence interval reaching 0 is tied with it.

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

from ..study.records import TrialRecord
from .objective import Scales, Weights, weighted_score

CONFIDENCE = 0.95


BOOTSTRAP_SAMPLES = 2000

#: Score differences at or below this are ties: what the stored scores cannot resolve. Per-question
#: metrics are stored as float32 (about 7 significant digits), so the mean of a metric near 1 is
#: exact to about 1e-7; a smaller gap is rounding (or a modelled latency differing by microseconds),
#: never a measurement. Two trials equal on every per-question metric are never "significantly"
#: apart, nor "about 1 question" from being told apart.
SCORE_RESOLUTION = 1e-6


def minimum_questions(confidence: float = CONFIDENCE) -> int:
    """The fewest distinct paired questions on which one configuration can be shown better than
    another at ``confidence``, whatever the scores.

    Derived from the exact two-sided sign test: with ``n`` questions, the most lopsided result
    possible (one configuration better on every question) has probability ``2 * 0.5**n`` under
    "no difference", so significance needs ``2 * 0.5**n < 1 - confidence``. At 95% that is
    ``n >= 6`` (2/64 = 0.031; five questions give 2/32 = 0.0625). Below it a paired bootstrap still
    returns an interval (resampling one or two questions has no spread, so it looks decisive), but
    no test can claim anything: the tie gate and the held-out check stand down.

    >>> minimum_questions(0.95), minimum_questions(0.99)
    (6, 8)
    """
    return math.floor(math.log2(2 / (1 - confidence))) + 1


#: :func:`minimum_questions` at the confidence every comparison here uses.
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

    def score(self, weights: Weights, scales: Scales, questions: np.ndarray | slice = slice(None)) -> float:
        means = {name: float(np.mean(values[questions])) for name, values in self.metrics.items()}
        return float(weighted_score(float(np.mean(self.recall[questions])), float(np.mean(self.iou[questions])),
                                    self.latency_s, self.cost_usd_per_1k, weights, scales, means))


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

    def why(self) -> str:
        """Why the tie gate chose :attr:`recommended`, as a clause (no verdict: the statement of
        :class:`StudyRecommendation` says what is recommended, once)."""
        gate = f"paired bootstrap over {self.questions} search questions, {self.confidence:.0%}"
        if len(self.tied) > 1:
            return (f"the cheapest of the {len(self.tied)} configurations statistically tied with the highest "
                    f"score (trial {self.best}; {gate})")
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


def tied_with(boot: np.ndarray, best: int, confidence: float = CONFIDENCE) -> np.ndarray:
    """Which rows of paired bootstrap scores (``(candidates, samples)``, as from
    :func:`bootstrap_scores`) are not significantly worse than row ``best``: the lower
    ``(1 - confidence) / 2`` quantile of their difference to it reaches 0 (``best`` itself included).

    A difference no larger than :data:`SCORE_RESOLUTION` is a tie too.

    >>> tied_with(np.array([[1.0, 1.2, 1.4], [0.9, 1.3, 1.3], [0.1, 0.2, 0.3]]), 0).tolist()
    [True, True, False]
    >>> tied_with(np.array([[0.5, 0.6], [0.5 - 1e-8, 0.6 - 1e-8]]), 0).tolist()
    [True, True]
    """
    return np.quantile(boot[best] - boot, (1 - confidence) / 2, axis=1) <= SCORE_RESOLUTION


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
    if observed_difference <= SCORE_RESOLUTION:  # no difference to tell apart
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


@dataclass(frozen=True)
class Comparison:
    """Configuration *a* against *b* on the same questions, paired: the difference of their
    weighted scores and recalls (a - b) with bootstrap confidence intervals."""

    difference: float
    low: float
    high: float
    recall_difference: float
    recall_low: float
    recall_high: float
    questions: int
    confidence: float = CONFIDENCE

    @property
    def better(self) -> bool:
        """*a* is significantly better than *b* (the interval lies above 0, by more than the
        scores resolve: :data:`SCORE_RESOLUTION`)."""
        return self.low > SCORE_RESOLUTION

    @property
    def worse(self) -> bool:
        return self.high < -SCORE_RESOLUTION

    def describe(self) -> str:
        """``score +0.0412 [+0.0100, +0.0731], recall +6.2 points [+1.0, +11.5]``."""
        return (f"score {self.difference:+.4f} [{self.low:+.4f}, {self.high:+.4f}], recall "
                f"{self.recall_difference * 100:+.1f} points [{self.recall_low * 100:+.1f}, "
                f"{self.recall_high * 100:+.1f}]")


def compare(a: Candidate, b: Candidate, weights: Weights, scales: Scales, questions: np.ndarray | slice = slice(None),
            *, confidence: float = CONFIDENCE, samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> Comparison:
    """The paired bootstrap of ``a - b`` over ``questions`` (a boolean mask or slice).

    >>> one = Candidate(1, np.array([1.0, 1.0, 0.0, 1.0]), np.zeros(4), 0.0, 0.0, 1)
    >>> same = compare(one, one, Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0), Scales())
    >>> (same.difference, same.low, same.high, same.better)
    (0.0, 0.0, 0.0, False)
    """
    pair = [c.on(questions) for c in (a, b)]
    boot = bootstrap_scores(pair, weights, scales, samples=samples, seed=seed)
    n = len(pair[0].recall)
    index = np.random.default_rng(seed).integers(0, n, size=(samples, n))
    recall = (pair[0].recall - pair[1].recall)[index].mean(axis=1)
    tail = (1 - confidence) / 2
    diff = boot[0] - boot[1]
    return Comparison(
        difference=pair[0].score(weights, scales) - pair[1].score(weights, scales),
        low=float(np.quantile(diff, tail)), high=float(np.quantile(diff, 1 - tail)),
        recall_difference=float(np.mean(pair[0].recall) - np.mean(pair[1].recall)),
        recall_low=float(np.quantile(recall, tail)), recall_high=float(np.quantile(recall, 1 - tail)),
        questions=n, confidence=confidence)


@dataclass(frozen=True)
class BaselineCheck:
    """The tie gate's choice against the best baseline, on questions the search never saw."""

    tuned: int  # the tie gate's recommendation (trial number)
    best_baseline: int
    best_baseline_name: str
    comparison: Comparison | None  # tuned - best baseline (None when the tuned one is a baseline)
    held_out: bool  # compared on the held-out questions (else on all: no held-out part)
    fallback: int | None  # the best baseline, recommended instead of ``tuned`` when it is not better

    @property
    def fell_back(self) -> bool:
        return self.fallback is not None


@dataclass(frozen=True)
class Optimism:
    """How far the recommendation's search score lies above its held-out score."""

    gap: float  # search score - held-out score
    half_width: float  # of the held-out score's bootstrap interval

    @property
    def beyond_interval(self) -> bool:
        return self.gap > self.half_width


def check_baselines(tuned: TrialRecord, baselines: Sequence[TrialRecord], search: np.ndarray, weights: Weights,
                    scales: Scales, *, seed: int = 0) -> BaselineCheck | None:
    """Never worse than a baseline without saying so: compare ``tuned`` with the best
    baseline (highest score on the search questions) on the held-out questions (``~search``;
    all questions when none is held out), paired. Unless ``tuned`` is significantly better,
    recommend that best baseline instead: the cheapest-tie rule already chose ``tuned`` and is
    not applied a second time (it would trade the baseline's recall for cost once more). None
    without an evaluated baseline."""
    found = best_baseline(baselines, search, weights, scales)
    if found is None:
        return None
    best_record, best = found
    name = best_record.baseline or f"trial {best_record.number}"
    if tuned.baseline is not None:
        return BaselineCheck(tuned.number, best_record.number, name, None, bool((~search).any()), None)
    tuned_candidate = candidate(tuned)
    if tuned_candidate is None:
        return None
    held_out = bool((~search).any())
    questions = ~search if held_out else slice(None)
    comparison = compare(tuned_candidate, best, weights, scales, questions, seed=seed)
    fallback = None if comparison.better else best_record.number
    return BaselineCheck(tuned.number, best_record.number, name, comparison, held_out, fallback)


def best_baseline(baselines: Sequence[TrialRecord], search: np.ndarray, weights: Weights,
                  scales: Scales) -> tuple[TrialRecord, Candidate] | None:
    """The baseline with the highest score on the search questions (the lower trial number on a
    tie), with its candidate; None without a baseline that stored per-question scores."""
    found = [(r, c) for r in baselines if (c := candidate(r)) is not None]
    if not found:
        return None
    return max(found, key=lambda rc: (rc[1].score(weights, scales, search), -rc[0].number))


def optimism(record: TrialRecord, search: np.ndarray, weights: Weights, scales: Scales, *,
             samples: int = BOOTSTRAP_SAMPLES, seed: int = 0) -> Optimism | None:
    """The optimism gap of ``record`` and the half-width of its held-out score's interval
    (None without held-out questions or stored scores)."""
    found = candidate(record)
    if found is None or not (~search).any():
        return None
    held = found.on(~search)
    boot = bootstrap_scores([held], weights, scales, samples=samples, seed=seed)[0]
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(boot, [tail, 1 - tail])
    return Optimism(found.score(weights, scales, search) - held.score(weights, scales), float(high - low) / 2)


def candidate(record: TrialRecord, questions: np.ndarray | slice = slice(None)) -> Candidate | None:
    """A trial as the tie gate sees it (None when it stored no per-question scores)."""
    per_query = record.per_query()
    if per_query is None:
        return None
    return Candidate(record.number, per_query["recall"][questions], per_query["iou"][questions],
                     record.latency_ms / 1000, record.cost_usd_per_1k_queries, int(record.metric("chunks")),
                     {name: values[questions] for name, values in per_query.items() if name not in ("recall", "iou")})
