"""What the search adds over the baselines, estimated on questions the choice never saw.

A study's headline, "the recommendation against the default", is flattered when it is read on the
questions that chose the recommendation. Repeated k-fold cross-validation takes that out: the
questions are split into ``folds``; for each fold the study's own choice is made on the other
folds (the highest score there, as :func:`~.comparisons.recommend` chooses, and the best baseline
there), and the two are scored on the fold; repeated with ``repeats`` shuffles. Each of the
``folds * repeats`` folds then has one out-of-fold gain: the mean, over its questions, of the
choice's score minus the reference's.

**The interval: Nadeau and Bengio's corrected resampled t** (Machine Learning 52, 2003). The
folds' gains are not independent: every two folds of a repeat share their training questions,
and the repeats re-use the same questions. A plain interval over them, or a bootstrap over the
questions' mean gains (what chunkwise printed before issue 60), leaves out the spread that
re-choosing on other training questions adds, and in simulated studies of 40-60 equal
configurations its 95% interval excluded 0 in 27-36% of them. The corrected t inflates the
variance of the folds' gains by ``1/J + n_test/n_train`` instead of ``1/J`` (``J`` folds in all)
and reads a t distribution with ``J - 1`` degrees of freedom; it was made for exactly this case,
repeated cross-validation of a learning procedure, needs nothing but the folds' gains (no nested
second level of cross-validation, which would multiply the work by the folds again and leave
each inner choice fewer questions), and is known to err on the wide side. Chosen over Corani and
Benavoli's correlated Bayesian t (2015), which gives the same interval under a flat prior and is
read as a posterior, not as the frequentist figure the rest of the summary quotes.
``benchmarks/search/crossval_coverage.py`` measures its coverage by simulation (BENCHMARKS: "What the
search adds, told truthfully (issue 60)").

**What is evidence.** The score's modelled latency and cost are constants per configuration, not
measurements: the choice's modelled difference to the reference adds the same amount to every
question of a fold. Whether the search *beats* the best baseline is judged, as every paired
comparison is (:func:`~.significance.paired_tests`), by an intersection-union test: the
corrected t of the measured part of the folds' gains and that of the whole score must both
reject, in the same direction; its p-value is the larger. "Questions to tell" is read from the
same corrected figure. Recall is shown beside the score, since the weights may trade some of it
for IoU, latency or cost.

The cross-validation runs over every question, the held-out ones included. The search questions
also steered the sampler, so the candidates it chooses among were shaped by some of the folds it
scores: ``benchmarks/search/fresh_questions.py`` measures what the figure is worth against questions no
part of the study saw.

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..core.objective import Scales, Weights
from .comparisons import CONFIDENCE, MIN_QUESTIONS, SCORE_RESOLUTION, Candidate, ranked
from .significance import intersection_union

#: Folds and repeated shuffles of the questions.
FOLDS = 5
REPEATS = 5


@dataclass(frozen=True)
class CorrectedT:
    """Nadeau and Bengio's corrected resampled t of one set of folds' gains (module docstring):
    their mean, its corrected standard error and the degrees of freedom, from which an interval at
    any level, a p-value and the questions needed to tell the mean from 0 follow."""

    mean: float
    se: float
    df: int

    @classmethod
    def of(cls, gains: np.ndarray, test_share: float) -> CorrectedT:
        """``gains``: one per fold (``folds * repeats`` of them); ``test_share``: a fold's questions
        over the training questions', ``n_test / n_train``."""
        gains = np.asarray(gains, dtype=float)
        spread = float(gains.var(ddof=1)) if len(gains) > 1 else 0.0
        return cls(float(gains.mean()), math.sqrt((1 / len(gains) + test_share) * spread), max(1, len(gains) - 1))

    def interval(self, confidence: float) -> tuple[float, float]:
        half = float(stats.t.ppf(0.5 + confidence / 2, self.df)) * self.se
        return self.mean - half, self.mean + half

    def upper(self, confidence: float) -> float:
        """The one-sided upper ``confidence`` bound of the mean."""
        return self.mean + float(stats.t.ppf(confidence, self.df)) * self.se

    @property
    def p_value(self) -> float:
        """Two-sided, of "the mean is 0" (0 when nothing varies but the mean is not 0)."""
        if abs(self.mean) <= SCORE_RESOLUTION:
            return 1.0
        if self.se == 0:
            return 0.0
        return float(2 * stats.t.sf(abs(self.mean) / self.se, self.df))

    def questions_to_tell(self, questions: int, confidence: float) -> int | None:
        """Questions with which this mean would lie on the edge of the ``confidence`` interval, the
        corrected standard error shrinking as ``1 / sqrt(questions)`` (None: no gain to tell, or no
        spread)."""
        if self.mean <= SCORE_RESOLUTION or self.se == 0:
            return None
        critical = float(stats.t.ppf(0.5 + confidence / 2, self.df))
        return max(1, math.ceil(questions * (critical * self.se / self.mean) ** 2))


@dataclass(frozen=True)
class Gain:
    """The search's out-of-fold gain over one reference configuration (the fold's best baseline,
    or the default): the mean of the folds' gains with corrected-t intervals (module docstring)."""

    score: float
    score_low: float
    score_high: float
    recall: float  # fraction
    recall_low: float
    recall_high: float
    #: Questions the corrected test would need to tell this score gain (what the study maximises)
    #: from none at the observed spread (None: no measured gain to tell, or no spread).
    questions_to_tell: int | None
    #: The p-value of "no score gain": the larger of the corrected t's of the measured part and of
    #: the whole score, 1 when they point opposite ways (module docstring).
    p_value: float = 1.0
    #: The part of :attr:`score` that is modelled latency and cost (the same on every question).
    modelled: float = 0.0
    #: The corrected t of the whole score's folds' gains (None: made without folds, as in a test).
    test: CorrectedT | None = None
    #: The spread (standard deviation) of the out-of-fold score gains of single questions.
    question_sd: float = 0.0

    @property
    def measured_tied(self) -> bool:
        """The questions score the choice and the reference alike: only the modelled part differs."""
        return abs(self.score - self.modelled) <= SCORE_RESOLUTION

    def upper(self, confidence: float) -> float:
        """The one-sided upper ``confidence`` bound of the score gain."""
        return self.score_high if self.test is None else self.test.upper(confidence)

    def prediction(self, questions: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
        """Where the mean score gain over ``questions`` *new* questions should fall: the interval of
        the expected gain widened by those questions' own spread (``sqrt(se**2 + sd**2 / questions)``).
        The summary's interval is for the expected gain; a handful of new questions scatter around
        it, which is what ``benchmarks/search/fresh_questions.py`` checks this against."""
        se = 0.0 if self.test is None else self.test.se
        df = 1_000_000 if self.test is None else self.test.df
        half = float(stats.t.ppf(0.5 + confidence / 2, df)) * math.sqrt(se**2 + self.question_sd**2 / questions)
        return self.score - half, self.score + half

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

    @property
    def beats(self) -> bool:
        """Out of sample the search's choice beats the best baseline: significant at
        :attr:`confidence` by the corrected test (measured and whole score alike), a gain above 0."""
        gain = self.over_best_baseline
        return gain.p_value <= 1 - self.confidence and gain.score > SCORE_RESOLUTION

    @property
    def loses(self) -> bool:
        """Out of sample the best baseline beats the search's choice."""
        gain = self.over_best_baseline
        return gain.p_value <= 1 - self.confidence and gain.score < -SCORE_RESOLUTION

    def describe(self, default_name: str = "the default") -> list[str]:
        """What the summary and the report print."""
        out = [f"what the search adds, cross-validated ({self.folds} folds x {self.repeats} repeats over all "
               f"{self.questions} questions: chosen as the study chooses on the other folds, scored on each; "
               f"{self.confidence:.0%} intervals, corrected resampled t):",
               f"  over the best baseline: {self.over_best_baseline.describe()}"]
        if self.over_default is not None:
            out.append(f"  over {default_name}: {self.over_default.describe()}")
        out.append(f"  the search's choice was a baseline in {self.picked_baseline} of {self.choices} folds; "
                   + self.verdict())
        return out

    def verdict(self) -> str:
        """Judged on the weighted score, what the study maximises (recall may fall where the weights
        buy IoU, latency or cost with it), by the corrected test."""
        gain = self.over_best_baseline
        if self.beats:
            return f"the search beats the best baseline out of sample (corrected t, p = {gain.p_value:.2g})"
        if self.loses:
            return f"out of sample the best baseline beats the search's choice (corrected t, p = {gain.p_value:.2g})"
        if gain.measured_tied and abs(gain.modelled) > SCORE_RESOLUTION:
            side = "ahead of" if gain.modelled > 0 else "behind"
            return (f"the questions score the search's choice and the best baseline alike; only its modelled "
                    f"latency and cost put it {side} it")
        needed = gain.questions_to_tell
        if gain.score <= SCORE_RESOLUTION or needed is None:
            return "out of sample the search does not beat the best baseline here"
        return (f"not distinguishable from the best baseline: telling a score gain of {gain.score:+.4f} from none "
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
    over_best, over_default = _Folds(), _Folds()
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
    test_share = (n / folds) / (n - n / folds)
    return SearchGain(folds, repeats, n, over_best.gain(test_share, n, confidence),
                      None if default is None else over_default.gain(test_share, n, confidence),
                      picked_baseline, confidence)


def _choose(candidates: Sequence[Candidate], train: np.ndarray, weights: Weights, scales: Scales) -> Candidate:
    """The study's choice on the ``train`` questions: the highest score there, as
    :func:`~.comparisons.recommend` chooses (its tie set is not needed to choose)."""
    on_train = [c.on(train) for c in candidates]
    return candidates[ranked(on_train, weights, scales)[0]]


class _Folds:
    """Per fold, the out-of-fold gains: recall, the measured part of the score and its modelled part."""

    def __init__(self) -> None:
        self.recall: list[float] = []
        self.measured: list[float] = []
        self.modelled: list[float] = []
        self.questions: list[np.ndarray] = []  # each fold's per-question score gains

    def add(self, pick: Candidate, reference: Candidate, part: np.ndarray, weights: Weights, scales: Scales) -> None:
        mine, theirs = pick.on(part), reference.on(part)
        measured, modelled = mine.difference_parts(theirs, weights, scales)
        self.recall.append(float(np.mean(mine.recall - theirs.recall)))
        self.measured.append(float(measured.mean()))
        self.modelled.append(modelled)
        self.questions.append(measured + modelled)

    def gain(self, test_share: float, questions: int, confidence: float) -> Gain:
        measured, modelled = np.array(self.measured), np.array(self.modelled)
        whole = CorrectedT.of(measured + modelled, test_share)
        alone = CorrectedT.of(measured, test_share)
        recall = CorrectedT.of(np.array(self.recall), test_share)
        p_value = intersection_union(alone.mean, alone.p_value, whole.mean, whole.p_value)
        needs = [alone.questions_to_tell(questions, confidence), whole.questions_to_tell(questions, confidence)]
        needed = None if needs[0] is None else max(n for n in needs if n is not None)
        per_question = np.concatenate(self.questions)
        spread = float(per_question.std(ddof=1)) if len(per_question) > 1 else 0.0
        return Gain(whole.mean, *whole.interval(confidence), recall.mean, *recall.interval(confidence), needed,
                    p_value, float(modelled.mean()), whole, spread)
