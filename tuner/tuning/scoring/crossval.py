"""What the search adds over the baselines, estimated on questions the choice never saw.

A study's headline, "the recommendation against the default", is flattered when it is read on the
questions that chose the recommendation. Repeated k-fold cross-validation takes that out: the
questions are split into ``folds``; for each fold the study's own choice is made on the other
folds (:func:`~.comparisons.recommend` over the configurations with the highest scores there, and
the best baseline there), and the two are scored on the fold; repeated with
``repeats`` shuffles. Each question then has an out-of-fold gain per repeat; their mean per
question is what the interval is drawn from (a bootstrap over questions, so it treats questions
as independent and leaves out the spread that re-choosing on other folds adds: read it as
somewhat narrow).

The same figure answers "does the search win here?" (its gain over the best baseline) and "how
many questions would it take to tell?" (the questions a paired test of that mean gain would need
at the observed spread).
Whether the search *beats* the best baseline is judged on the weighted score, which is what the
study maximises, by the sign-flip test of the per-question gains (the interval only sizes it);
recall is shown beside it, since the weights may trade some of it for IoU, latency or cost.

>>> import numpy as np
>>> from tuner.tuning.scoring.comparisons import Candidate
>>> from tuner.tuning.core.objective import Scales, Weights
>>> weights = Weights(recall=1.0, iou=0.0, latency=0.0, cost=0.0)
>>> def config(number, recall): return Candidate(number, np.array(recall), np.zeros(12), 0.0, 0.0, 1)
>>> base, better = config(0, [0.5] * 12), config(1, [1.0] * 12)
>>> gain = search_gain([base, better], [base], base, weights, Scales())
>>> round(gain.over_best_baseline.recall, 3), gain.picked_baseline
(0.5, 0)
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..core.objective import Scales, Weights
from .comparisons import BOOTSTRAP_SAMPLES, CONFIDENCE, MIN_QUESTIONS, Candidate, ranked
from .significance import sign_flip_test

#: Folds and repeated shuffles of the questions.
FOLDS = 5
REPEATS = 5


@dataclass(frozen=True)
class Gain:
    """The search's out-of-fold gain over one reference configuration (the fold's best baseline,
    or the default), per question averaged over the repeats, with a bootstrap interval."""

    score: float
    score_low: float
    score_high: float
    recall: float  # fraction
    recall_low: float
    recall_high: float
    #: Questions a paired test would need to tell this score gain (what the study maximises) from
    #: none at the observed spread (None: no gain to tell, or no spread).
    questions_to_tell: int | None
    #: The sign-flip test's p-value of the per-question score gains (whether the gain is
    #: significant: the interval only sizes it).
    p_value: float = 1.0

    def describe(self) -> str:
        """``score +0.0120 [-0.0050, +0.0290], recall +2.0 points [-1.3, +5.1]``."""
        recall = (f"recall {self.recall * 100:+.1f} points [{self.recall_low * 100:+.1f}, "
                  f"{self.recall_high * 100:+.1f}]")
        return f"score {self.score:+.4f} [{self.score_low:+.4f}, {self.score_high:+.4f}], {recall}"


@dataclass(frozen=True)
class SearchGain:
    """:func:`search_gain`'s answer."""

    folds: int
    repeats: int
    questions: int
    over_best_baseline: Gain
    over_default: Gain | None
    #: In how many of the ``folds * repeats`` choices the search's pick was itself a baseline.
    picked_baseline: int
    confidence: float = CONFIDENCE

    @property
    def choices(self) -> int:
        return self.folds * self.repeats

    def describe(self, default_name: str = "the default") -> list[str]:
        """What the summary and the report print."""
        out = [f"what the search adds, cross-validated ({self.folds} folds x {self.repeats} repeats over all "
               f"{self.questions} questions: chosen as the study chooses on the other folds, scored on each; "
               f"{self.confidence:.0%} intervals):",
               f"  over the best baseline: {self.over_best_baseline.describe()}"]
        if self.over_default is not None:
            out.append(f"  over {default_name}: {self.over_default.describe()}")
        out.append(f"  the search's choice was a baseline in {self.picked_baseline} of {self.choices} folds"
                   + self._verdict())
        return out

    def _verdict(self) -> str:
        """Judged on the weighted score, what the study maximises (recall may fall where the weights
        buy IoU, latency or cost with it)."""
        gain = self.over_best_baseline
        significant = gain.p_value <= 1 - self.confidence
        if significant and gain.score > 0:
            return f"; the search beats the best baseline out of sample (sign-flip test, p = {gain.p_value:.2g})"
        if significant and gain.score < 0:
            return (f"; out of sample the best baseline beats the search's choice (sign-flip test, "
                    f"p = {gain.p_value:.2g})")
        needed = gain.questions_to_tell
        if gain.score <= 0 or needed is None:
            return "; out of sample the search does not beat the best baseline here"
        return (f"; not distinguishable from the best baseline: telling a score gain of {gain.score:+.4f} from none "
                f"would take about {needed:,} questions")


def search_gain(candidates: Sequence[Candidate], baselines: Sequence[Candidate], default: Candidate | None,
                weights: Weights, scales: Scales, *, folds: int = FOLDS, repeats: int = REPEATS, seed: int = 0,
                confidence: float = CONFIDENCE) -> SearchGain | None:
    """The repeated cross-validated gain of the study's choice among ``candidates`` over the best
    of ``baselines`` and over ``default`` (see the module docstring); every candidate scored on the
    same questions. None without a baseline or with fewer than twice
    :data:`~.comparisons.MIN_QUESTIONS` questions (too few to choose on any fold)."""
    if not candidates or not baselines:
        return None
    n = len(candidates[0].recall)
    if n < 2 * MIN_QUESTIONS:  # a choice on fewer than MIN_QUESTIONS claims nothing
        return None
    folds = max(2, min(folds, n))
    baseline_numbers = {b.number for b in baselines}
    over_best, over_default = _Accumulator(n), _Accumulator(n)
    picked_baseline = 0
    for repeat in range(repeats):
        for part in np.array_split(np.random.default_rng(seed + repeat).permutation(n), folds):
            train = np.setdiff1d(np.arange(n), part)
            pick = _choose(candidates, train, weights, scales)
            picked_baseline += pick.number in baseline_numbers
            best_baseline = max(baselines, key=lambda b: (b.score(weights, scales, train), -b.number))
            over_best.add(pick, best_baseline, part, weights, scales)
            if default is not None:
                over_default.add(pick, default, part, weights, scales)
    return SearchGain(folds, repeats, n, over_best.gain(confidence, seed),
                      None if default is None else over_default.gain(confidence, seed),
                      picked_baseline, confidence)


def _choose(candidates: Sequence[Candidate], train: np.ndarray, weights: Weights, scales: Scales) -> Candidate:
    """The study's choice on the ``train`` questions: the highest score there, as
    :func:`~.comparisons.recommend` chooses (its tie set is not needed to choose)."""
    on_train = [c.on(train) for c in candidates]
    return candidates[ranked(on_train, weights, scales)[0]]


class _Accumulator:
    """Per question, the sums of out-of-fold gains over the repeats."""

    def __init__(self, questions: int) -> None:
        self.recall = np.zeros(questions)
        self.score = np.zeros(questions)
        self.count = np.zeros(questions)

    def add(self, pick: Candidate, reference: Candidate, part: np.ndarray, weights: Weights, scales: Scales) -> None:
        mine, theirs = pick.on(part), reference.on(part)
        self.recall[part] += mine.recall - theirs.recall
        self.score[part] += mine.differences(theirs, weights, scales)
        self.count[part] += 1

    def gain(self, confidence: float, seed: int) -> Gain:
        recall, score = self.recall / self.count, self.score / self.count
        index = np.random.default_rng(seed).integers(0, len(recall), size=(BOOTSTRAP_SAMPLES, len(recall)))
        tail = (1 - confidence) / 2
        recall_low, recall_high = np.quantile(recall[index].mean(axis=1), [tail, 1 - tail])
        score_low, score_high = np.quantile(score[index].mean(axis=1), [tail, 1 - tail])
        return Gain(float(score.mean()), float(score_low), float(score_high), float(recall.mean()),
                    float(recall_low), float(recall_high), _questions_to_tell(score, confidence),
                    sign_flip_test(score, seed=seed).p_value)


def _questions_to_tell(gains: np.ndarray, confidence: float) -> int | None:
    """``(z * sd / mean)**2`` questions with per-question gains like ``gains`` make their mean
    ``z`` standard errors from 0 (None when the mean is not above 0 or nothing varies)."""
    mean, spread = float(gains.mean()), float(gains.std(ddof=1)) if len(gains) > 1 else 0.0
    if mean <= 0 or spread == 0:
        return None
    z = statistics.NormalDist().inv_cdf(0.5 + confidence / 2)
    return max(1, math.ceil((z * spread / mean) ** 2))
